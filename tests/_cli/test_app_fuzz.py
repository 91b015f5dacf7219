"""Property test: no command line makes caplet fail with a foreign exception (issue 13).

Hypothesis builds command lines from every command's own parameters (read
from the typer app, so a new command or option is fuzzed without editing
this file) and a vocabulary of awkward values: missing, empty, garbage and
directory paths, a path with NUL, names too long for the file system,
non-UTF-8 arguments (lone surrogates, as Python decodes them from argv),
broken JSON, NaN and huge numbers, odd ``key=value`` pairs, terminal escapes.
Each runs in-process (typer's runner) against fresh copies of the example
plugins and a fresh state directory.

A command may succeed or refuse with any documented exit code; it must not
end in an exception other than ``SystemExit``: that is what ``main()``
would report as an internal error (exit 70, tests/_cli/test_internal.py),
i.e. a bug. Left out: ``selftest`` and ``demo`` (they run the hostile corpus
and a whole demo, minutes per example), and values that would write outside
the example's directory (``/dev/null`` as a lock file: caplet's atomic write
replaces the target by rename, as root even a device node).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import event, example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._cli._command import load_commands
from tests._fuzz.budget import fuzz
from tests.conftest import EXAMPLES

SKIPPED = frozenset({"selftest", "demo"})
runner = CliRunner()


def _commands() -> dict[tuple[str, ...], Any]:
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, prefix: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*prefix, name))
        elif prefix[0] not in SKIPPED:
            found[prefix] = command

    load_commands()  # the root group imports a command's module when it is looked up
    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _commands()


@dataclass
class Workspace:
    root: Path
    count: int = 0

    def fresh(self) -> Path:
        """A new directory holding the examples, a garbage file, an empty file, a folder."""
        self.count += 1
        base = self.root / f"run-{self.count}"
        shutil.copytree(EXAMPLES, base / "plugins", ignore=shutil.ignore_patterns("__pycache__"))
        (base / "garbage").write_bytes(b"\x00\xff[[not toml or json\n" * 40)
        (base / "empty").write_bytes(b"")
        (base / "folder").mkdir()
        (base / "lock.toml").write_text("[[plugin]]\nname = 3\n", encoding="utf-8")
        return base


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("cli-fuzz")
    cwd = Path.cwd()
    # Relative paths among the values land in the workspace, never in the repository.
    os.chdir(root)
    try:
        yield Workspace(root)
    finally:
        os.chdir(cwd)


# -- values -----------------------------------------------------------------------------------

#: ``{base}`` is the example's directory.
PATHS = (
    "{base}/plugins", "{base}/plugins/hello", "{base}/missing", "{base}/garbage", "{base}/empty",
    "{base}/folder", "{base}/lock.toml", "{base}/plugins/hello/plugin.toml", "{base}/a\x00b",
    "{base}/" + "n" * 300, "{base}/\udcff", "", ".", "relative/dir", "{base}/out.sarif",
)  # fmt: skip
NAMES = (
    "hello", "fs-read", "shell-out", "nope", "", "Hello", "../hello", "a" * 300, "\x1b[2J",
    "hello\n", "-", "\udcff", "new-plugin", "x y",
)  # fmt: skip
VALUES = (
    '"x"', "{", "[1,", "NaN", "1e999", '{"a": 1}', "[]", "null", "'x'", '"\udcff"', "-1", "0",
    "nan", "inf", "1e309", "99999999999999999999", "abc", "root={base}/plugins", "x=", "=y",
    "a=b=c", "root=\x00", "greet.say", "greet.", ".", "nope.x", "content:afterSave", ":",
    "1/0", "print('x')", "import os; os._exit(3)", "6*7", "\udcff", "--json", "-y",
)  # fmt: skip
#: Free text, never an absolute path or one climbing out of the workspace (keygen writes
#: files wherever its prefix says).
TEXT = st.text(max_size=12).filter(lambda t: not t.startswith(("/", "~")) and ".." not in t)
TOKEN = st.one_of(st.sampled_from(PATHS + NAMES + VALUES), TEXT)


def _value(option: str) -> st.SearchStrategy[str]:
    if option in ("--plugins-dir", "--state-dir", "--lockfile", "--sarif", "--from", "--key"):
        return st.sampled_from(PATHS)
    return TOKEN


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    path = draw(st.sampled_from(sorted(COMMANDS)))
    command = COMMANDS[path]
    argv = list(path)
    for param in command.params:
        opts = getattr(param, "opts", None) or []
        option = next((o for o in opts if o.startswith("--")), None)
        if option is None:  # an argument
            many = param.nargs == -1
            count = draw(st.integers(0, 3)) if many else draw(st.sampled_from([1, 1, 0]))
            argv += [draw(TOKEN) for _ in range(count)]
        elif option == "--plugins-dir":
            argv += [option, draw(st.sampled_from(["{base}/plugins", "{base}/plugins", *PATHS]))]
        elif option == "--state-dir":
            argv += [option, draw(st.sampled_from(["{base}/state", "{base}/state", *PATHS]))]
        elif getattr(param, "is_flag", False):
            if draw(st.booleans()):
                argv.append(option)
        elif draw(st.booleans()):
            argv += [option, draw(_value(option))]
    return argv


LONG = "{base}/" + "n" * 300


@fuzz(150)
@given(argv=command_lines())
# What the fuzzing found (each raised OSError or UnicodeEncodeError out of the command):
@example(argv=["audit", "hello", "--plugins-dir", LONG, "--state-dir", "{base}/state"])
@example(argv=["trust", "list", "--state-dir", LONG])
@example(argv=["doctor", "--check-state", "--plugins-dir", "{base}/plugins", "--state-dir", LONG])
@example(argv=["keygen", LONG])
@example(argv=["keygen", ""])
@example(argv=["log", "\udcff", "--plugins-dir", "{base}/plugins", "--state-dir", "{base}/state"])
@example(argv=["new", "a" * 300, "--plugins-dir", "{base}/plugins"])
@example(argv=["log", "-n", "99999999999999999999", "--plugins-dir", "{base}/plugins"])
def test_no_command_line_ends_in_a_foreign_exception(workspace: Workspace, argv: list[str]) -> None:
    base = workspace.fresh()
    args = [token.replace("{base}", str(base)) for token in argv]
    result = runner.invoke(app, args, input="")
    event(f"{argv[0]}: exit {result.exit_code}")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"caplet {args!r} raised {result.exception!r}") from result.exception
    assert result.exit_code in (0, 1, 2, 3), (args, result.exit_code, result.output)
    # A guest's own traceback (caplet exec) has frames of "<guest>" only; one of caplet's
    # or Python's would name a source file.
    assert not re.search(r'File "/[^"]*\.py", line \d+', result.output), result.output
