"""README.md's examples run: every shell and Python block, in order, from a fresh directory.

Issue 15 found the README's own `root=/srv/notes` (missing) refused with a
sandbox traceback, and a first command that assumed `sudo`. So the README is
executed as a reader would follow it: one fresh temporary directory, the
blocks in order (a later block may use what an earlier one made), `caplet`
and `python` from this test's environment, stdin not a terminal, HOME and
the state directory inside the temporary directory.

A shell block runs as one bash script; each command must exit 0, unless its
comment says otherwise (`caplet scan shell-out   # exit 1: ...`), and a
command whose exit code differs stops the block, naming the command. A
Python block runs as a script (with "y" answers on stdin, for a consent
question). A block preceded by `<!-- readme-test: not run: REASON -->` is
not run; the only ones allowed are listed in :data:`NOT_RUN`, with why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
_BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<marker>[^\n]*?) -->\n)?```(?P<lang>sh|python)\n(?P<body>.*?)```",
    re.S,
)
_EXIT = re.compile(r"#\s*exit (\d+)\b")
_HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
#: The blocks the test does not run, by their first line, and why.
NOT_RUN = {
    # Installs caplet from the package index (its dependencies too): tests never
    # reach the network. Each part is tested on its own: the venv module by
    # .ci/run, `caplet demo` by tests/_cli/test_demo.py.
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/caplet demo",
    # The test suite itself, which runs this test.
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest",
}


@dataclass(frozen=True)
class Block:
    number: int
    lang: str
    body: str
    marker: str | None


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [
        Block(index, m.group("lang"), m.group("body"), m.group("marker"))
        for index, m in enumerate(_BLOCK.finditer(text), start=1)
    ]


def commands(body: str) -> Iterator[tuple[str, int]]:
    """Each command of a shell block (continued lines and here-documents joined) and the
    exit code its comment expects (0 when it says none)."""
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = [line]
        heredoc = _HEREDOC.search(line)
        if heredoc:
            while lines[index] != heredoc.group(1):
                command.append(lines[index])
                index += 1
            command.append(lines[index])
            index += 1
        else:
            while command[-1].endswith("\\"):
                command.append(lines[index])
                index += 1
        expected = _EXIT.search(command[0] if heredoc else command[-1])
        yield "\n".join(command), int(expected.group(1)) if expected else 0


def script(body: str) -> str:
    parts = ["set -u"]
    for number, (command, expected) in enumerate(commands(body), start=1):
        shown = command.splitlines()[0].replace("'", "'\\''")
        parts.append(command)
        parts.append(
            f"rc=$?; if [ $rc -ne {expected} ]; then echo 'README command {number} "
            f"exited '$rc', expected {expected}: {shown}' >&2; exit 97; fi"
        )
    return "\n".join(parts) + "\n"


@pytest.fixture
def fresh() -> Iterator[Path]:
    """A fresh directory every user can enter: as root, caplet runs plugins as an
    unprivileged uid, which must reach the README's `notes` folder (a pytest tmp_path
    lies under a 0700 directory it cannot)."""
    root = Path(tempfile.mkdtemp(prefix="caplet-readme-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def environment(root: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CAPLET_") and k not in ("CI", "PYTHONPATH")
    }
    home = root / ".home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CONFIG_HOME=str(home / "config"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        NO_COLOR="1",
        COLUMNS="100",
    )
    return env


def test_the_blocks_not_run_are_the_listed_ones() -> None:
    found = {b.body.splitlines()[0] for b in blocks() if b.marker is not None}
    assert found == NOT_RUN
    for block in blocks():
        if block.marker is not None:
            assert block.marker.startswith("not run: "), block.marker
    assert len([b for b in blocks() if b.marker is None]) >= 10


@pytest.mark.slow
def test_every_shell_and_python_block_runs_in_order(fresh: Path) -> None:
    env = environment(fresh)
    for block in blocks():
        if block.marker is not None:
            continue
        if block.lang == "sh":
            result = subprocess.run(
                ["bash", "-c", script(block.body)],
                cwd=fresh,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
        else:
            result = subprocess.run(
                [sys.executable, "-c", block.body],
                cwd=fresh,
                env=env,
                input="y\n" * 20,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        assert result.returncode == 0, (
            f"README block {block.number} ({block.lang}) failed:\n{result.stderr[-4000:]}"
        )
        assert "Traceback" not in result.stderr, (block.number, result.stderr[-4000:])
