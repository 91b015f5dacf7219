"""attack38: blind37's rule for a shipped program started detached at install
(``_shipped_programs._detached``), both ways.

Evasions: the rule read only ``start_new_session=True`` as a literal ``True``,
``process_group`` as a literal, ``preexec_fn`` as ``os.setsid``/``os.setpgrp`` by name, and
skipped options spread from a mapping, ``setsid``/``nohup`` in front of the program and
``os.spawn*`` without ``P_WAIT``: a truthy ``1``, a variable, a lambda calling
``os.setsid``, ``**{...}`` each started the jar in its own session unseen. What cannot be
read fails closed now.

False positives: a start that is waited for (``subprocess.run``, ``check_call``,
``Popen(...).wait()``) is a build step, whatever session it runs in
(``start_new_session=True`` is how a build script kills the whole group on a timeout);
the rule flagged it as a payload. Each test failed at ``3a75ec17``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._scan.test_blind32 import attack, clean
from tests._scan.test_blind37 import SETUP_STARTS_JAR


def _shipped_jar(root: Path) -> None:
    (root / "pkg" / "lib").mkdir(parents=True)
    (root / "pkg" / "lib" / "helper.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")


@pytest.mark.security
@pytest.mark.parametrize(
    "start",
    [
        'subprocess.Popen(["java", "-jar", jar], start_new_session=1)',
        'subprocess.Popen(["java", "-jar", jar], start_new_session=not False)',
        'detach = True\nsubprocess.Popen(["java", "-jar", jar], start_new_session=detach)',
        'subprocess.Popen(["java", "-jar", jar], preexec_fn=lambda: os.setsid())',
        'subprocess.Popen(["java", "-jar", jar], process_group=os.getpid())',
        'subprocess.Popen(["java", "-jar", jar], **{"start_new_session": True})',
        'kw = dict(start_new_session=True)\nsubprocess.Popen(["java", "-jar", jar], **kw)',
        'subprocess.Popen(["setsid", "java", "-jar", jar])',
        'subprocess.run(["setsid", "-f", "java", "-jar", jar])',
        'subprocess.Popen(["nohup", "java", "-jar", jar])',
        'os.spawnlp(os.P_NOWAIT, "java", "java", "-jar", jar)',
    ],
)
def test_a_shipped_jar_detached_at_install_by_a_variation_is_a_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    _shipped_jar(tmp_path)
    attack(tmp_path, monkeypatch, {"setup.py": SETUP_STARTS_JAR % start}, "CPL-THR-018")


@pytest.mark.parametrize(
    "start",
    [
        'subprocess.run(["java", "-jar", jar, "gen"], start_new_session=True, check=True)',
        'subprocess.check_call(["java", "-jar", jar, "gen"], start_new_session=True)',
        'subprocess.call(["java", "-jar", jar, "gen"], process_group=0)',
        'p = subprocess.Popen(["java", "-jar", jar, "gen"], start_new_session=True)\np.wait()',
        'subprocess.Popen(["java", "-jar", jar, "gen"], preexec_fn=os.setpgrp).communicate()',
    ],
)
def test_a_shipped_jar_waited_for_in_its_own_session_is_a_build_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    _shipped_jar(tmp_path)
    clean(tmp_path, monkeypatch, {"setup.py": SETUP_STARTS_JAR % start})


@pytest.mark.parametrize(
    "start",
    [
        'subprocess.run(["java", "-jar", jar, "gen"], start_new_session=False)',
        'os.spawnlp(os.P_WAIT, "java", "java", "-jar", jar, "gen")',
        'subprocess.Popen(["java", "-jar", jar, "gen"], preexec_fn=None).wait()',
    ],
)
def test_near_miss_a_shipped_jar_started_in_the_installs_session_is_a_build_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    _shipped_jar(tmp_path)
    clean(tmp_path, monkeypatch, {"setup.py": SETUP_STARTS_JAR % start})
