"""A program the package ships, started behind the user's back (caplet._scan._shipped_programs).

The attacks are tune samples b15-np-torchtriton-binary (an ELF the package ships started
from ``__init__``) and b15-np-jar-stealer (a shipped jar handed to java at import), and
a shipped script handed to node: clean on main, whose rule knew Windows programs only
(recall16). The near misses are what tabula-py and ruff do (a bundled jar or binary started
when the user calls a function or runs the command), a bundled tool asked its version at
import, and setup.py building the package with its own files.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_file

_TUNE = Path(__file__).resolve().parents[2] / "benchmarks/malware/tune"

STARTED = [
    ("triton/__init__.py", (_TUNE / "b15-np-torchtriton-binary/triton/__init__.py").read_text()),
    (
        "jpype_helper/__init__.py",
        (_TUNE / "b15-np-jar-stealer/jpype_helper/__init__.py").read_text(),
    ),
    (
        "pkg/__init__.py",
        """
        import os, subprocess
        subprocess.Popen(["node", os.path.join(os.path.dirname(__file__), "x.js")],
                         start_new_session=True)
        """,
    ),
    (
        "pkg/__init__.py",
        """
        import os
        from pathlib import Path
        os.system(str(Path(__file__).parent / "bin" / "svc") + " &")
        """,
    ),
]


def danger(source: str, filename: str, mode: ScanMode) -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(("filename", "source"), STARTED)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_shipped_file_started_at_import_or_install_is_a_dropper(
    filename: str, source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-018" in danger(source, filename, mode)


@pytest.mark.parametrize(("filename", "source"), STARTED)
def test_the_prefilter_keeps_a_shipped_file_started(
    filename: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_file(tmp_path, monkeypatch, filename, textwrap.dedent(source), "CPL-THR-018")


@pytest.mark.parametrize(
    ("filename", "source"),
    [
        # tabula-py: its jar run by java when the user asks to read a PDF
        (
            "tabula/__init__.py",
            """
            import os, subprocess
            JAR = os.path.join(os.path.dirname(__file__), "tabula-1.0.5-jar-with-dependencies.jar")
            def read_pdf(path):
                return subprocess.run(["java", "-jar", JAR, path], stdout=subprocess.PIPE)
            """,
        ),
        # the ruff wheel: its binary started as the command, under python -m
        (
            "ruff/__main__.py",
            """
            import os, sys
            BIN = os.path.join(os.path.dirname(__file__), "bin", "ruff")
            if __name__ == "__main__":
                os.execvp(BIN, [BIN, *sys.argv[1:]])
            """,
        ),
        # a bundled tool asked its version at import: its output read
        (
            "pkg/__init__.py",
            """
            import os, subprocess
            TOOL = os.path.join(os.path.dirname(__file__), "bin", "tool")
            VERSION = subprocess.check_output([TOOL, "--version"], text=True).strip()
            FEATURES = subprocess.run([TOOL, "--features"], capture_output=True).stdout
            """,
        ),
        # an install script building the package with its own files: its configure
        # script, make on its Makefile, protoc on its files (cython's, llvmlite's,
        # playwright's, snowpark's setup.py in the benign corpus)
        (
            "setup.py",
            """
            import os, subprocess, sys
            from setuptools import setup
            HERE = os.path.dirname(os.path.abspath(__file__))
            subprocess.check_call([os.path.join(HERE, "configure"), "--prefix=/usr"])
            subprocess.check_call(["make", "-f", os.path.join(HERE, "ext", "Makefile")])
            subprocess.call([sys.executable, os.path.join(HERE, "scripts", "build_driver.py")])
            setup(name="x")
            """,
        ),
        # a module's own helper started by a function of the package
        (
            "pkg/server.py",
            """
            import os, subprocess
            def start():
                here = os.path.dirname(__file__)
                return subprocess.Popen([os.path.join(here, "bin", "server")])
            """,
        ),
    ],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_bundled_program_the_user_starts_or_questions_is_no_dropper(
    filename: str, source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-018" not in danger(source, filename, mode)
