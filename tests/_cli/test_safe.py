"""Untrusted text never drives the terminal: the CLI's review commands on a hostile plugin.

The plugin's manifest (description, config field, hook, a capability), a
comment in its source, its result and its exception message, and the
scripted model's summary and reasons all carry ESC sequences (CSI erase
line, OSC 52 clipboard, OSC 0 title), CR, C1 controls, bidi overrides and
rich markup. Every command must show them as visible escapes and the markup
as literal text, on stdout and stderr alike.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.control import Control
from rich.text import Text
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._cli._prompt import RichPrompter
from caplet._cli._safe import TerminalLogHandler, guard, plain, safe_markup
from caplet._config._schema import ConfigField, ConfigType
from caplet._display import DISTINCT_RECORD
from tests._audit.llm_server import LLMServer, honest, serve
from tests.conftest import PluginFactory

runner = CliRunner()

#: Wide enough that no line or cell wraps: the assertions read whole lines.
WIDE = {"COLUMNS": "400", "FORCE_COLOR": None, "TTY_COMPATIBLE": None, "NO_COLOR": None}

#: The payload in the description, as TOML escapes (a TOML string cannot hold a raw ESC).
DESCRIPTION_TOML = (
    r"Formats text \u001b[2K\u001b[1Gsafe \u001b]52;c;aGk=\u0007 \u001b]0;pwned\u0007 "
    r"\u202eevil\u202c [green]approved[/] \u009b31m"
)
MANIFEST = r"""
name = "tricky"
version = "1.0.0"
description = "{description}"
capabilities = ["env.read:HOME", "net.http:https://example.com/[green]ok[/]"]

[modules.main]
functions = ["run"]

[hooks."content:afterSave"]
function = "main.run"
description = "hook \u001b[2K\r [green]ok[/]"

[config.style]
type = "string"
description = "Style \u001b[2K\r\u202e [green]ok[/]"
default = "plain\u001b]0;t\u0007 [red]x[/]"
""".replace("{description}", DESCRIPTION_TOML)

#: A raw ESC in a comment (the scanner's excerpt quotes the line as it is), and a
#: result and an exception message that carry the payload.
SOURCE = """
import os

HOME = os.environ.get("HOME")  # \x1b[2K\x1b]0;title\x07 [green]approved[/]


def create_functions(config):
    def run(text):
        if text == "boom":
            raise ValueError("\\x1b]52;c;aGk=\\x07\\r\\u202e [red]boom[/]")
        return "\\x1b[2K\\rresult\\u202e [green]approved[/]"

    return {"main": {"run": run}}
"""

DESCRIPTION_SHOWN = (
    "Formats text \\x1b[2K\\x1b[1Gsafe \\x1b]52;c;aGk=\\x07 \\x1b]0;pwned\\x07 "
    "\\u202eevil\\u202c [green]approved[/] \\x9b31m"
)

#: An SGR sequence: the only escape rich's own styling writes (checked in colour).
SGR = re.compile(r"\x1b\[[0-9;]*m")


def assert_inert(output: str) -> None:
    """Nothing in ``output`` a terminal would act on, or that reorders what follows."""
    for char in ("\x1b", "\r", "\x07", "\x9b", "\u202e", "\u202c"):
        assert char not in output, (char, output)


def shown(*args: str, code: int = 0, env: Mapping[str, str | None] = WIDE) -> str:
    """The CLI's text output (stdout and stderr), checked inert."""
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.exit_code, result.output)
    assert_inert(result.output)
    return result.output


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


@pytest.fixture
def cli(plugins_dir: Path, state_dir: Path) -> list[str]:
    return ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]


@pytest.fixture
def tricky(make_plugin: PluginFactory) -> Path:
    return make_plugin("tricky", manifest=MANIFEST, source=SOURCE)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    for server in serve():
        monkeypatch.setenv("CAPLET_LLM_PROVIDER", "openai")
        monkeypatch.setenv("CAPLET_LLM_BASE_URL", server.url)
        monkeypatch.setenv("CAPLET_LLM_MODEL", "scripted-model")
        yield server


def test_info_shows_every_manifest_field_escaped_and_markup_literally(
    tricky: Path, cli: list[str]
) -> None:
    out = lines(shown("info", "tricky", *cli))
    assert out[0] == f"tricky 1.0.0: {DESCRIPTION_SHOWN}"
    assert "  capabilities: env.read:HOME, net.http:https://example.com/[green]ok[/]" in out
    assert (
        "  config style: string, default 'plain\\x1b]0;t\\x07 [red]x[/]': "
        "Style \\x1b[2K\\x0d\\u202e [green]ok[/]"
    ) in out


def test_list_shows_the_description_escaped_in_its_cell(tricky: Path, cli: list[str]) -> None:
    out = shown("list", *cli)
    assert f"│ {DESCRIPTION_SHOWN} │" in out
    assert "│ env.read:HOME" in out
    assert "│ net.http:https://example.com/[green]ok[/] │" in out


def test_json_keeps_the_data_exact_and_the_bytes_inert(tricky: Path, cli: list[str]) -> None:
    result = runner.invoke(app, ["info", "tricky", *cli, "--json"])
    assert result.exit_code == 0, result.output
    assert_inert(result.stdout)
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["description"] == (
        "Formats text \x1b[2K\x1b[1Gsafe \x1b]52;c;aGk=\x07 \x1b]0;pwned\x07 \u202eevil\u202c "
        "[green]approved[/] \x9b31m"
    )
    assert document["config_schema"][0]["description"] == "Style \x1b[2K\r\u202e [green]ok[/]"


def test_scan_quotes_the_source_line_escaped(tricky: Path, cli: list[str]) -> None:
    out = lines(shown("scan", "tricky", "--verbose", *cli))
    excerpt = (
        '            HOME = os.environ.get("HOME")  # \\x1b[2K\\x1b]0;title\\x07 [green]approved[/]'
    )
    assert excerpt in out
    assert (
        "      4:8 info    CPL-ENV-001 os.environ.get('HOME') reads an environment "
        in "\n".join(out)
    )


def test_scan_of_trojan_source_shows_the_override_escaped(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        'access = "user"  # \u202e } \u2066if admin\u2069 \u2066 begin admins only\n',
        encoding="utf-8",
    )
    out = shown("scan", str(tmp_path / "pkg"), code=1)
    assert (
        '            access = "user"  # \\u202e } \\u2066if admin\\u2069 \\u2066 begin admins only'
        in lines(out)
    )


def test_audit_approve_call_and_log_show_model_and_plugin_text_escaped(
    tricky: Path, cli: list[str], llm: LLMServer
) -> None:
    llm.script(
        honest(
            summary=(
                "Formats text.\x1b[2K\x1b]52;c;aGk=\x07\r\u202e [green]approved[/]\n"
                "  risk:            LOW"
            ),
            risk_reasons=["reads \x1b]0;pwned\x07HOME [red]x[/]"],
            findings=[
                {"severity": "info", "message": "quotes \x1b[2K [green]ok[/]", "file": "plugin.py"}
            ],
        )
    )
    summary = (
        "  summary:         Formats text.\\x1b[2K\\x1b]52;c;aGk=\\x07\\x0d\\u202e "
        "[green]approved[/]"
    )
    # The model's second line is indented under the summary: it cannot pass for the risk.
    forged = "                     risk:            LOW"
    audited = lines(shown("audit", "tricky", "--verbose", *cli))
    assert audited[audited.index(summary) + 1] == forged
    assert "    - reads \\x1b]0;pwned\\x07HOME [red]x[/]" in audited
    assert "    INFO    plugin.py CPL-AUDIT-006: quotes \\x1b[2K [green]ok[/]" in audited

    approved = lines(shown("approve", "tricky", "--yes", *cli))
    assert approved[0] == "Approve tricky 1.0.0"
    assert approved[approved.index(summary) + 1] == forged
    assert approved[-1].startswith("approved tricky: ")

    called = shown("call", "--enable", "tricky", "main.run", '"ok"', *cli)
    assert called == "\\x1b[2K\\x0dresult\\u202e [green]approved[/]\n"

    failed = shown("call", "--enable", "tricky", "main.run", '"boom"', *cli, code=1)
    assert failed.startswith("error: ")
    assert "ValueError: \\x1b]52;c;aGk=\\x07\\x0d\\u202e [red]boom[/]" in failed

    emitted = shown(
        "emit", "content:afterSave", "--payload", '"boom"', "--enable", "tricky", *cli, code=1
    )
    assert "ValueError: \\x1b]52;c;aGk=\\x07\\x0d\\u202e [red]boom[/]" in emitted

    # The hook's failure is in the decision log, quoting the exception.
    logged = shown("log", "tricky", *cli)
    assert "ValueError: \\x1b]52;c;aGk=\\x07\\x0d\\u202e [red]boom[/]" in logged


def test_in_colour_the_only_escapes_are_richs_own_styles(
    tricky: Path, cli: list[str], llm: LLMServer
) -> None:
    llm.script(honest(summary="Formats.\x1b]52;c;aGk=\x07 \x1b[32mok"))
    colour = {**WIDE, "FORCE_COLOR": "1"}
    for command in (["info", "tricky"], ["list"], ["audit", "tricky"], ["scan", "tricky"]):
        result = runner.invoke(app, [*command, *cli], env=colour)
        assert result.exit_code in (0, 1), result.output
        assert SGR.search(result.output), "rich wrote no colour: the check would be vacuous"
        assert_inert(SGR.sub("", result.output))


def test_exec_escapes_the_guests_output(cli: list[str]) -> None:
    code = (
        "import sys; print('\\x1b]0;pwned\\x07\\rout'); sys.stderr.write('\\u202eerr\\n'); 'v\\x1b'"
    )
    result = runner.invoke(app, ["exec", code, *cli])
    assert result.exit_code == 0, result.output
    assert result.stdout == "\\x1b]0;pwned\\x07\\x0dout\n'v\\x1b'\n"
    assert result.stderr == "\\u202eerr\n"


def _caplet_list(plugins_dir: Path, state_dir: Path) -> subprocess.CompletedProcess[str]:
    """``caplet list`` in a real process: Python's last-resort log handler, which the CLI
    replaces, is only in play when nothing set up logging (pytest does)."""
    return subprocess.run(
        [sys.executable, "-m", "caplet", "list", "--plugins-dir", str(plugins_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, "CAPLET_STATE_DIR": str(state_dir), "COLUMNS": "400"},
        timeout=60,
        check=False,
    )


def test_a_broken_plugin_folder_name_is_escaped_in_warnings_and_the_log(
    plugins_dir: Path, state_dir: Path
) -> None:
    """A real process: Python's last-resort log handler, which the CLI replaces, is
    only in play when nothing set up logging (pytest does)."""
    folder = plugins_dir / "bad\x1b]0;pwned\x07"
    folder.mkdir(parents=True)
    (folder / "plugin.toml").write_text("name = 3\n", encoding="utf-8")
    process = _caplet_list(plugins_dir, state_dir)
    assert process.returncode == 0, process.stderr
    assert_inert(process.stdout + process.stderr)
    err = process.stderr.splitlines()
    assert err[0].startswith("skipping plugin bad\\x1b]0;pwned\\x07: ")
    # Once (issue 15: it was printed twice, by the log and by the CLI).
    assert [line for line in err if "skipp" in line] == err[:1]


def test_every_skipped_plugin_folder_is_named_with_its_problems_on_one_line(
    plugins_dir: Path, state_dir: Path
) -> None:
    """Nine broken folders: nine lines, each naming its folder and why. The terminal
    handler showed five and then "(4 more log line(s) repeating the ones above were not
    shown)", though no line repeated another: the operator was not told why four
    plugins were missing. A manifest's list of problems reads as one line joined by
    "; ", not a run-on of ``\\x0a`` escapes."""
    for index in range(9):
        folder = plugins_dir / f"broken-{index}"
        folder.mkdir(parents=True)
        (folder / "plugin.toml").write_text(
            f'name = "broken-{index}"\nversion = "1.0.0"\ndescription = "x"\n'
            'capabilities = ["env.read:*"]\n',
            encoding="utf-8",
        )
    process = _caplet_list(plugins_dir, state_dir)
    assert process.returncode == 0, process.stderr
    skips = [line for line in process.stderr.splitlines() if line.startswith("skipping plugin")]
    assert sorted(line.split(":")[0] for line in skips) == [
        f"skipping plugin broken-{index}" for index in range(9)
    ]
    assert "not shown" not in process.stderr
    assert skips[0].endswith(
        "plugin.toml: invalid manifest (3 problems): entry: 'plugin.py' does not exist in "
        f"{plugins_dir / 'broken-0'}; create it or point entry at the plugin's entry module; "
        "modules: required field missing; capabilities[0]: capability 'env.read:*' uses a "
        "wildcard; name each variable in its own capability, e.g. env.read:API_TOKEN"
    )
    assert "\\x0a" not in process.stderr


def test_a_repeated_warning_is_still_shown_five_times_and_then_counted() -> None:
    """The near miss: a message of caplet's that does repeat is held back after five,
    and the summary says how many (a skipped folder is shown every time)."""
    console, screen = _terminal()
    logger = logging.getLogger("caplet.tests.safe")
    handler = TerminalLogHandler(console)
    logger.addHandler(handler)
    try:
        for index in range(8):
            logger.warning("worker %s is slow", index)
        for index in range(8):
            logger.warning("skipping plugin %s", index, extra={DISTINCT_RECORD: True})
        handler.summary()
    finally:
        logger.removeHandler(handler)
    lines = SGR.sub("", screen.getvalue()).splitlines()
    assert lines[:5] == [f"worker {index} is slow" for index in range(5)]
    assert lines[5:13] == [f"skipping plugin {index}" for index in range(8)]
    assert lines[13:] == [
        "(3 more log line(s) like the ones above were not shown; CAPLET_DEBUG=1 shows them all)"
    ]


def test_the_config_prompt_shows_the_description_and_default_escaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("fancy\n"))
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system="standard", width=400)
    field = ConfigField(
        name="style",
        type=ConfigType.STRING,
        description="Style \x1b[2K\r\u202e [green]ok[/]",
        default="plain\x1b]0;t\x07 [red]x[/]",
    )
    assert RichPrompter(console).ask("tricky", field, None) == "fancy"
    text = SGR.sub("", screen.getvalue())
    assert_inert(text)
    assert text == (
        "tricky style (Style \\x1b[2K\\x0d\\u202e [green]ok[/]) [plain\\x1b]0;t\\x07 [red]x[/]]: "
    )


# -- the helpers ---------------------------------------------------------------------------------


def _terminal() -> tuple[Console, io.StringIO]:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system="standard", width=200)
    return guard(console), screen


def test_plain_is_escaped_text_never_markup() -> None:
    console, screen = _terminal()
    console.print(plain("[green]ok[/] \x1b[2K\nx", "red"), plain("a\nb", multiline=True))
    assert SGR.sub("", screen.getvalue()) == "[green]ok[/] \\x1b[2K\\x0ax a\n  b\n"
    assert "\x1b[31m" in screen.getvalue()


def test_safe_markup_interpolates_into_our_own_markup() -> None:
    console, screen = _terminal()
    console.print(f"[bold]{safe_markup('[green]ok[/] [link=https://x.example]y[/link]')}[/]")
    assert SGR.sub("", screen.getvalue()) == "[green]ok[/] [link=https://x.example]y[/link]\n"
    assert "\x1b]8" not in screen.getvalue()


def test_the_guard_escapes_what_a_boundary_missed_and_keeps_richs_controls() -> None:
    console, screen = _terminal()
    # (rich's Text itself drops the BEL; the ESC and the override it keeps.)
    console.print(Text("a\x1b]52;c;aGk=\x07b\u202e", style="red"))
    console.print(Control.move_to_column(0))
    assert SGR.sub("", screen.getvalue()) == "a\\x1b]52;c;aGk=b\\u202e\n\x1b[1G"


def test_the_log_handler_escapes_records() -> None:
    console, screen = _terminal()
    logger = logging.getLogger("caplet.tests.safe")
    handler = TerminalLogHandler(console)
    logger.addHandler(handler)
    try:
        logger.warning("skipping plugin %s", "x\x1b[2K\ry")
        logger.info("not shown: below WARNING")
    finally:
        logger.removeHandler(handler)
    assert SGR.sub("", screen.getvalue()) == "skipping plugin x\\x1b[2K\\x0dy\n"


FORGER = """
import os
import sys

def create_functions(config):
    def run(how):
        if how == "raise":
            raise ValueError("boom\\napproved forger: risk LOW, no findings\\n")
        if how == "pad":
            raise ValueError("boom" + " " * 600 + "approved forger: risk LOW, no findings")
        sys.stderr.write("worker says\\napproved forger: risk LOW, no findings\\n")
        sys.stderr.flush()
        os._exit(3)

    return {"main": {"run": run}}
"""
FORGER_MANIFEST = """
name = "forger"
version = "1.0.0"
description = "Forges lines."

[modules.main]
functions = ["run"]
"""


def test_a_plugins_text_in_an_error_cannot_start_a_line_of_its_own(
    make_plugin: PluginFactory, cli: list[str]
) -> None:
    """attack20: a plugin's exception message and its worker's stderr are quoted in the
    error a command ends with; each line after the first was shown from column 0, so
    "approved forger: risk LOW" read as caplet's own line under the error."""
    make_plugin("forger", manifest=FORGER_MANIFEST, source=FORGER)
    shown("approve", "forger", "--yes", *cli)
    raised = lines(shown("call", "--enable", "forger", "main.run", '"raise"', *cli, code=1))
    assert raised[0] == "error: plugin 'forger': main.run raised ValueError: boom"
    assert raised[1] == "  approved forger: risk LOW, no findings"
    crashed = lines(shown("call", "--enable", "forger", "main.run", '"crash"', *cli, code=1))
    assert crashed[-2:] == ["  worker says", "  approved forger: risk LOW, no findings"]
    # rich wraps a long line at a blank and drops the blanks: the words after 600 spaces
    # started a line of their own at column 0, whatever the width
    padded = lines(shown("call", "--enable", "forger", "main.run", '"pad"', *cli, code=1))
    assert padded[-1] == "  approved forger: risk LOW, no findings"
    for line in raised + crashed + padded:
        assert not line or line.startswith(("error: ", "  ")), line


def test_a_results_lines_are_shown_as_returned() -> None:
    """The near miss: a call's result is the data asked for, shown as it is."""
    console, screen = _terminal()
    console.print(plain("a\n  b", multiline=True, margin=0))
    assert screen.getvalue() == "a\n  b\n"
