"""A bug of caplet's at the command line: one line and exit 70, never a traceback (issue 13).

Through a real ``python -m caplet`` subprocess. A bug cannot be triggered on
purpose in code without one, so each test injects one: a ``sitecustomize``
module on ``PYTHONPATH`` (imported by the interpreter at start-up, before
``-m caplet``) makes one method of the library raise an exception caplet
does not expect. Everything else is the real command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from caplet._cli._internal import EXIT_INTERNAL, internal_error_line

#: The one line for the injected KeyError (its text carries a terminal escape).
LINE = internal_error_line(KeyError("plugin \x1b[2J"))

INJECT = """
from caplet._host._host import PluginHost

def _broken(self, *args, **kwargs):
{body}

PluginHost.{method} = _broken
"""


def _caplet(
    tmp_path: Path, *args: str, raise_: str, method: str = "list_plugins", **env: str
) -> subprocess.CompletedProcess[str]:
    inject = tmp_path / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(
        INJECT.format(body=textwrap.indent(raise_, "    "), method=method), encoding="utf-8"
    )
    plugins = tmp_path / "plugins"
    plugins.mkdir(exist_ok=True)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(inject), os.environ.get("PYTHONPATH")])),
        "CAPLET_DEBUG": "",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "caplet", *args, "--plugins-dir", str(plugins)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


def test_an_unexpected_exception_is_one_line_and_exit_70(tmp_path: Path) -> None:
    result = _caplet(tmp_path, "list", raise_="raise KeyError('plugin \\x1b[2J')")
    assert result.returncode == EXIT_INTERNAL == 70
    assert result.stdout == ""
    assert result.stderr == LINE + "\n"
    assert "Traceback" not in result.stderr
    assert "\x1b" not in result.stderr, "the exception's text is escaped"
    assert LINE.startswith("caplet: internal error (KeyError: 'plugin \\x1b[2J'); this is a bug")
    assert LINE.endswith(
        "run the command again with CAPLET_DEBUG=1 to see the traceback, and report it to "
        "caplet's maintainers with that traceback and the output of `caplet --version`"
    )


def test_with_json_the_document_says_so_too(tmp_path: Path) -> None:
    result = _caplet(tmp_path, "list", "--json", raise_="raise KeyError('plugin \\x1b[2J')")
    assert result.returncode == EXIT_INTERNAL
    assert json.loads(result.stdout) == {
        "ok": False,
        "error": {"type": "InternalError", "message": LINE},
    }
    assert result.stderr == LINE + "\n"


def test_caplet_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = _caplet(tmp_path, "list", raise_="raise KeyError('plugin \\x1b[2J')", CAPLET_DEBUG="1")
    assert result.returncode == EXIT_INTERNAL
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert "in _broken\n" in result.stderr
    assert result.stderr.endswith(LINE + "\n")


@pytest.mark.parametrize("value", ["0", ""])
def test_caplet_debug_off(tmp_path: Path, value: str) -> None:
    result = _caplet(
        tmp_path, "list", raise_="raise KeyError('plugin \\x1b[2J')", CAPLET_DEBUG=value
    )
    assert result.stderr == LINE + "\n"


def test_a_caplet_error_outside_a_command_block_keeps_its_message_and_code(
    tmp_path: Path,
) -> None:
    """The commands catch CapletError; should one escape anyway, main() answers the same."""
    result = _caplet(
        tmp_path,
        "list",
        method="__init__",
        raise_="from caplet._errors import StoreError; raise StoreError('state database locked')",
    )
    assert result.returncode == 3
    assert result.stderr == "error: state database locked\n"


def test_a_logged_failure_of_the_host_prints_no_traceback(tmp_path: Path) -> None:
    """The host logs its own failures with the traceback (caplet/_host/_failures.py); the
    command line's log handler shows the line and, only with CAPLET_DEBUG=1, the rest."""
    script = (
        "import logging\n"
        "try:\n"
        "    raise KeyError('x')\n"
        "except KeyError:\n"
        "    logging.getLogger('caplet').exception('ctx.kv.get of %r failed', 'p')\n"
        "raise KeyError('after the log line')"
    )
    result = _caplet(tmp_path, "list", raise_=script)
    lines = result.stderr.splitlines()
    assert lines[0] == "ctx.kv.get of 'p' failed (KeyError; CAPLET_DEBUG=1 shows the traceback)"
    assert "Traceback" not in result.stderr
    debug = _caplet(tmp_path, "list", raise_=script, CAPLET_DEBUG="1")
    # indented under its record (attack20): no line of a logged text starts where a record does
    assert debug.stderr.startswith("ctx.kv.get of 'p' failed\n  Traceback (most recent call last):")
