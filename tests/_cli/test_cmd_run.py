"""call, exec, emit as a user runs them: real processes, any input, never a traceback
(issue 15, points 3 and 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests._cli.clikit import caplet, document
from tests._host.test_red_team import GATED
from tests.conftest import EXAMPLES, REPO, PluginFactory, give_to_worker

#: A plugin that speaks through ctx.log, and takes a keyword named like call's own parameters.
TALKER = """
def create_functions(config):
    def talk(ctx, name, target="-"):
        ctx.log.info("hello from " + name)
        ctx.log.warning("careful, " + target)
        ctx.log.debug("only with CAPLET_DEBUG")
        return name + "/" + target

    def handle(ctx, payload):
        ctx.log.info("saw " + str(payload["id"]))
        return {"seen": payload, "greeting": config["greeting"]}

    def raw(ctx):
        return {"png": b"\\x89PNG\\r\\n", "parts": [b"", b"ok"]}

    return {"main": {"talk": talk, "handle": handle, "raw": raw}}
"""
MODULES = (
    '[modules.main]\nfunctions = ["talk", "handle", "raw"]\n'
    '[hooks."content:afterSave"]\nfunction = "main.handle"\n'
    '[config.greeting]\ntype = "string"\ndefault = "hi"\n'
)


@pytest.fixture
def workspace(tmp_path: Path, make_plugin: PluginFactory) -> Path:
    """tmp_path with plugins/ (the examples and `talker`) and a state directory."""
    for example in EXAMPLES.iterdir():
        if example.is_dir():
            shutil.copytree(example, tmp_path / "plugins" / example.name)
    make_plugin("talker", source=TALKER, modules=MODULES)
    return tmp_path


def state(workspace: Path) -> tuple[str, str]:
    return ("--state-dir", str(workspace / "state"))


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("1" * 5000, "argument 1 holds an integer of 5000 digits; the limit is 40"),
        ("[" * 50_000, "argument 1 nests arrays and objects 50000 deep; the limit is 100"),
        ("NaN", "argument 1 holds NaN, which is not JSON"),
        ("world", "argument 1 'world' is not JSON (Expecting value); quote strings"),
    ],
)
def test_a_hostile_argument_is_a_usage_error_never_a_traceback(
    workspace: Path, argument: str, expected: str
) -> None:
    """Issue 15: 5000 digits gave ValueError, 50,000 `[` a RecursionError."""
    for as_json in (True, False):
        result = caplet(
            "call",
            "--enable",
            "hello",
            "greet.say",
            argument,
            *state(workspace),
            *(["--json"] if as_json else []),
            cwd=workspace,
        )
        assert result.returncode == 2
        assert "Traceback" not in result.stdout + result.stderr
        if as_json:
            error = document(result)["error"]
            assert error["type"] == "UsageError"
            assert error["message"].startswith(expected)
        else:
            assert expected in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("[" * 50_000, "--payload nests arrays and objects 50000 deep"),
        ("9" * 5000, "--payload holds an integer of 5000 digits"),
        ("{", "--payload '{' is not JSON"),
    ],
)
def test_a_hostile_payload_is_a_usage_error(workspace: Path, payload: str, expected: str) -> None:
    result = caplet(
        "emit",
        "content:afterSave",
        "--payload",
        payload,
        *state(workspace),
        "--json",
        cwd=workspace,
    )
    assert result.returncode == 2
    assert document(result)["error"]["type"] == "UsageError"
    assert expected in document(result)["error"]["message"]


def test_keywords_named_like_calls_own_parameters_reach_the_plugin(workspace: Path) -> None:
    """`host.call(name, target, ...)`: its own parameters are positional-only, and a call
    with arguments named `name` works (issue 15)."""
    from caplet import PluginHost

    with PluginHost(workspace / "plugins", state_dir=workspace / "state") as host:
        assert host.enable("talker", consent=True)
        assert host.call("talker", "main.talk", name="n", target="t") == "n/t"


def test_ctx_log_lines_are_shown_as_plugin_message_and_q_hides_them(workspace: Path) -> None:
    call = ("call", "--enable", "talker", "main.talk", '"ann"', "--yes", *state(workspace))
    shown = caplet(*call, cwd=workspace)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "ann/-\n"
    lines = shown.stderr.splitlines()
    assert "[talker] hello from ann" in lines
    assert "[talker] careful, -" in lines
    assert not [line for line in lines if "CAPLET_DEBUG" in line]
    debug = caplet(*call, cwd=workspace, env={"CAPLET_DEBUG": "1"})
    assert "[talker] only with CAPLET_DEBUG" in debug.stderr.splitlines()
    for quiet in ("-q", "--quiet", "--json"):
        hidden = caplet(*call, quiet, cwd=workspace)
        assert hidden.returncode == 0, hidden.stderr
        assert "[talker]" not in hidden.stderr


def test_a_bytes_result_is_base64_as_the_mcp_server_sends_it(workspace: Path) -> None:
    """`caplet call --json` wrote bytes as one int per byte, and the table one line per
    byte; both now carry ``{"base64": ...}``, the MCP server's form."""
    call = ("call", "--enable", "talker", "main.raw", "--yes", *state(workspace))
    shown = caplet(*call, "--json", cwd=workspace)
    assert shown.returncode == 0, shown.stderr
    assert document(shown)["result"] == {
        "png": {"base64": "iVBORw0K"},
        "parts": [{"base64": ""}, {"base64": "b2s="}],
    }
    printed = caplet(*call, cwd=workspace)
    assert printed.returncode == 0, printed.stderr
    assert '"base64": "iVBORw0K"' in printed.stdout
    assert len(printed.stdout.splitlines()) < 15


def test_emit_takes_k_v_per_enable_and_requires_nothing_else(workspace: Path) -> None:
    """Issue 15: `emit --enable` took no k=v."""
    result = caplet(
        "emit",
        "content:afterSave",
        "--payload",
        '{"id": 7}',
        "--enable",
        "talker",
        "greeting=hey",
        "--yes",
        *state(workspace),
        "--json",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    calls = document(result)["calls"]
    assert [(c["plugin"], c["value"]) for c in calls] == [
        ("talker", {"seen": {"id": 7}, "greeting": "hey"})
    ]
    # The event may follow the options as well as precede them.
    before = caplet(
        "emit",
        "--enable",
        "talker",
        "content:afterSave",
        "--payload",
        '{"id": 1}',
        "--yes",
        *state(workspace),
        "--json",
        cwd=workspace,
    )
    assert before.returncode == 0, before.stderr
    assert document(before)["calls"][0]["value"]["greeting"] == "hi"
    stray = caplet("emit", "content:afterSave", "extra", *state(workspace), "--json", cwd=workspace)
    assert stray.returncode == 2
    assert (
        "expected one EVENT (e.g. content:afterSave), got 2"
        in (document(stray)["error"]["message"])
    )


@pytest.fixture
def files(workspace: Path) -> Path:
    """fs-read and fs-write (which requires fs-read) and a directory both may use."""
    for name in ("fs-read", "fs-write"):
        shutil.rmtree(workspace / "plugins" / name, ignore_errors=True)
        shutil.copytree(REPO / "plugins" / name, workspace / "plugins" / name)
    notes = workspace / "notes"
    notes.mkdir()
    give_to_worker(notes)
    return notes


@pytest.mark.slow
def test_call_enables_a_plugins_requires_first_with_their_own_configuration(
    workspace: Path, files: Path
) -> None:
    """Issue 15: `caplet call --enable fs-write root=...` could not work (fs-write requires
    fs-read, and "enable 'fs-read' first" could not be followed)."""
    write = ("fswrite.write_file", '"a.txt"', '"written"', "--yes", *state(workspace), "--json")
    alone = caplet("call", "--enable", "fs-write", f"root={files}", *write, cwd=workspace)
    assert alone.returncode == 2, alone.stderr
    assert document(alone)["error"]["message"].endswith(
        "(plugin 'fs-read' is required by 'fs-write'; configure it with --enable fs-read "
        "k=v ... before --enable fs-write)"
    )
    # Given in any order, the requirement is enabled first.
    both = caplet(
        "call",
        "--enable",
        "fs-write",
        f"root={files}",
        "--enable",
        "fs-read",
        f"root={files}",
        "fs-write",
        *write,
        cwd=workspace,
    )
    assert both.returncode == 0, both.stderr
    assert document(both)["plugin"] == "fs-write"
    assert (files / "a.txt").read_text() == "written"
    # exec takes the same groups, requirements first as well.
    code = "import host.fsread as r; r.read_file('a.txt')"
    snippet = caplet(
        "exec",
        "--enable",
        "fs-write",
        f"root={files}",
        "--enable",
        "fs-read",
        f"root={files}",
        code,
        "--yes",
        *state(workspace),
        "--json",
        cwd=workspace,
    )
    assert snippet.returncode == 0, snippet.stderr
    assert document(snippet)["value"] == "written"


#: `base` needs no configuration, `keyed` does; `pinger` requires `base`, `user` both;
#: the two dependents call their requirements through ctx.plugins, on a call and on an event.
_BASE = """
def create_functions(config):
    return {"base": {"ping": lambda: "pong"}}
"""
_KEYED = """
def create_functions(config):
    return {"keyed": {"token": lambda: config["token"]}}
"""
_PINGER = """
def create_functions(config):
    def run(ctx, payload=None):
        return ctx.plugins.call("base.ping")
    return {"pinger": {"run": run}}
"""
_USER = """
def create_functions(config):
    def handle(ctx, payload):
        return [ctx.plugins.call("base.ping"), ctx.plugins.call("keyed.token"), payload["id"]]
    return {"user": {"handle": handle}}
"""


@pytest.fixture
def dependents(workspace: Path, make_plugin: PluginFactory) -> Path:
    make_plugin("base", source=_BASE, modules='[modules.base]\nfunctions = ["ping"]\n')
    make_plugin(
        "keyed",
        source=_KEYED,
        modules='[modules.keyed]\nfunctions = ["token"]\n[config.token]\ntype = "string"\n',
    )
    make_plugin(
        "pinger",
        source=_PINGER,
        extra='requires = ["base"]\ncapabilities = ["host.call:base"]\n',
        modules='[modules.pinger]\nfunctions = ["run"]\n'
        '[hooks."content:afterSave"]\nfunction = "pinger.run"\n',
    )
    make_plugin(
        "user",
        source=_USER,
        extra='requires = ["base", "keyed>=1.0"]\n'
        'capabilities = ["host.call:base", "host.call:keyed"]\n',
        modules='[modules.user]\nfunctions = ["handle"]\n'
        '[hooks."content:afterSave"]\nfunction = "user.handle"\n',
    )
    return workspace


def test_a_requirement_without_configuration_needs_no_enable_of_its_own(dependents: Path) -> None:
    """Issue 15 point 3: `base` is enabled first, for call and emit alike, unnamed."""
    flags = ("--yes", *state(dependents), "--json")
    called = caplet("call", "--enable", "pinger", "pinger.run", *flags, cwd=dependents)
    assert called.returncode == 0, called.stderr
    assert document(called)["result"] == "pong"
    emitted = caplet(
        "emit", "content:afterSave", "--enable", "pinger", *flags, "--payload", "{}", cwd=dependents
    )
    assert emitted.returncode == 0, emitted.stderr
    shown = document(emitted)
    assert [(c["plugin"], c["status"], c["value"]) for c in shown["calls"]] == [
        ("pinger", "ok", "pong")
    ]
    assert sorted(shown["subscribed_not_enabled"]) == ["talker", "user"]


def test_emit_enables_requires_first_each_with_its_own_enable_group(dependents: Path) -> None:
    """Issue 15 point 3: `emit` enables `requires` first, as `call` and `exec` do."""
    emit = ("emit", "content:afterSave", "--payload", '{"id": 3}')
    flags = ("--yes", *state(dependents), "--json")
    missing = caplet(*emit, "--enable", "user", *flags, cwd=dependents)
    assert missing.returncode == 2, missing.stderr
    assert document(missing)["error"]["message"].endswith(
        "(plugin 'keyed' is required by 'user'; configure it with --enable keyed k=v ... "
        "before --enable user)"
    )
    # The requirement's group may follow the plugin that needs it.
    both = caplet(
        *emit, "--enable", "user", "--enable", "keyed", "token=abc", *flags, cwd=dependents
    )
    assert both.returncode == 0, both.stderr
    shown = document(both)
    assert [(c["plugin"], c["status"], c["value"]) for c in shown["calls"]] == [
        ("user", "ok", ["pong", "abc", 3])
    ]
    assert sorted(shown["subscribed_not_enabled"]) == ["pinger", "talker"]


def test_call_keeps_every_form_of_enable(workspace: Path) -> None:
    for form in (
        ("--enable", "hello", "greeting=Hi", "greet.say", '"x"'),
        ("hello", "--enable", "greeting=Hi", "greet.say", '"x"'),
        ("hello", "greet.say", '"x"', "--enable", "greeting=Hi"),
        ("--enable=hello", "greeting=Hi", "hello", "greet.say", '"x"'),
    ):
        result = caplet("call", *form, "--yes", *state(workspace), "--json", cwd=workspace)
        assert result.returncode == 0, (form, result.stdout, result.stderr)
        assert document(result)["result"] == "Hi, x!"
    refusals: list[tuple[tuple[str, ...], str]] = [
        (("hello", "greeting=Hi", "greet.say"), "configuration entries (greeting=Hi) need"),
        (("--enable",), "missing the plugin NAME: caplet call NAME MODULE.FUNCTION"),
        (("--enable", "hello"), "missing MODULE.FUNCTION (for example: greet.say)"),
        (("hello", "say"), "'say' is not MODULE.FUNCTION"),
        (("hello", "greet.say", '"x"', "--jsno"), "unknown option '--jsno' after greet.say"),
    ]
    for refused, expected in refusals:
        result = caplet("call", *refused, *state(workspace), "--json", cwd=workspace)
        assert result.returncode == 2, (refused, result.stdout)
        assert expected in document(result)["error"]["message"], refused


@pytest.mark.security
def test_red_team_flag_turns_the_gate_off_loudly_and_only_when_asked(
    workspace: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("gated", source=GATED)
    call = ("call", "--enable", "gated", "main.run", "--yes", "--json", *state(workspace))
    gated = caplet(*call, cwd=workspace)
    assert gated.returncode != 0
    refusal = document(gated)
    assert "danger finding" in refusal["error"]["message"]
    assert "red_team" not in refusal

    red = caplet(*call, "--red-team", cwd=workspace)
    assert red.returncode == 0, red.stderr
    result = document(red)
    assert result["red_team"] is True
    assert result["result"] == 1  # EPERM: the kernel layers alone stop the execve
    assert "RED-TEAM MODE: the static gate is OFF" in red.stderr

    locked = caplet(*call, "--red-team", "--locked", cwd=workspace)
    assert locked.returncode == 2, locked.stdout
    assert "red" in document(locked)["error"]["message"].lower()


_CHATTY = """
def create_functions(config):
    def run(ctx):
        for number in range(300):
            ctx.log.info("line %d" % number)
            ctx.log.warning("careful %d" % number)
        return "done"
    return {"main": {"run": run}}
"""


def test_a_json_run_writes_the_document_alone_and_no_log_flood(
    workspace: Path, make_plugin: PluginFactory
) -> None:
    """Issue 15 point 4: `--json` runs flooded stderr with log lines."""
    make_plugin("chatty", source=_CHATTY)
    called = caplet(
        "call",
        "--enable",
        "chatty",
        "main.run",
        "--yes",
        *state(workspace),
        "--json",
        cwd=workspace,
    )
    assert called.returncode == 0, called.stderr
    assert document(called) == {
        "ok": True,
        "plugin": "chatty",
        "function": "main.run",
        "result": "done",
    }
    assert called.stderr == ""
    # Without --json the same lines are the user's to see (bounded by the ctx.log rate).
    shown = caplet(
        "call", "--enable", "chatty", "main.run", "--yes", *state(workspace), cwd=workspace
    )
    assert shown.returncode == 0, shown.stderr
    assert "[chatty] line 0" in shown.stderr.splitlines()
    listed = caplet("list", *state(workspace), "--json", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    assert "chatty" in [p["name"] for p in document(listed)["plugins"]]
    assert listed.stderr == ""
