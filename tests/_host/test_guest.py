"""Guest code in real sandboxes (issue 6, point 5; issue 3's warm pool).

A guest snippet can call the enabled plugins' declared functions through
``import host.<module>`` and nothing else: files, sockets, processes,
plugins that are not enabled, undeclared functions and the channel itself
all fail with a clear error, and the host carries on. Each test builds a
host on the module's one strict sandbox launcher (one zygote).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import (
    CircuitOpenError,
    GuestError,
    GuestLimits,
    GuestStatus,
    LifecycleError,
    Policy,
)
from caplet._host._host import PluginHost
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._sandbox._subprocess import SubprocessWorker
from tests._host.ctxkit import make_host, plugin
from tests.conftest import DelegatingLauncher, PluginFactory

FS_READ_MANIFEST = """
name = "fs-read"
version = "1.0.0"
description = "Reads files under a configured root."
capabilities = ["fs.read:${config.root}"]

[config.root]
type = "string"
description = "The directory to read from"

[config.api_token]
type = "string"
description = "A token the plugin would use"
secret = true
default = "tok-SECRET-4711"

[modules.fsread]
description = "Read notes under the configured root."

[modules.fsread.functions.read_file]
description = "Read one UTF-8 text file by its relative path."
args = { type = "array", prefixItems = [{ type = "string" }], minItems = 1, maxItems = 1 }

[modules.fsread.functions.list_dir]
description = "List the files of the root."

[hints]
overview = "Use fsread to read the user's notes."
critical_rules = ["Paths are relative to the root."]
anti_patterns = ["Do not pass absolute paths."]
common_patterns = ["host.fsread.read_file('notes.md')"]
"""

FS_READ = """
import os

def create_functions(config):
    root = config["root"]

    def read_file(name):
        path = os.path.realpath(os.path.join(root, name))
        if os.path.commonpath([root, path]) != root:
            raise ValueError("paths must stay inside the root")
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    def list_dir():
        return sorted(os.listdir(root))

    return {"fsread": {"read_file": read_file, "list_dir": list_dir}}
"""


class CountingLauncher(DelegatingLauncher):
    """The module's sandbox launcher, recording which thread started each guest worker."""

    def __init__(self, inner: SandboxLauncher) -> None:
        super().__init__(inner)
        self.guest_starts: list[str] = []

    def start(self, spec: WorkerSpec) -> SubprocessWorker:
        if spec.plugin == "guest":
            self.guest_starts.append(threading.current_thread().name)
        return self.inner.start(spec)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxLauncher]:
    launcher = SandboxLauncher(strict=True)
    yield launcher
    launcher.close()


@pytest.fixture
def launcher(sandbox: SandboxLauncher) -> CountingLauncher:
    return CountingLauncher(sandbox)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\nbuy milk\n", encoding="utf-8")
    return root


def _host(
    plugins_dir: Path, state_dir: Path, launcher: CountingLauncher, **limits: int
) -> PluginHost:
    options = {"pool_size": 1, **limits}
    return make_host(
        plugins_dir,
        state_dir,
        launcher,  # type: ignore[arg-type]
        policy=Policy(guest=GuestLimits(**options)),
    )


@pytest.fixture
def host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: CountingLauncher,
    make_plugin: PluginFactory,
    notes: Path,
) -> Iterator[PluginHost]:
    make_plugin("fs-read", manifest=FS_READ_MANIFEST, source=FS_READ)
    plugin(make_plugin, "other-plugin", "", module="other", functions=("run",))
    with _host(plugins_dir, state_dir, launcher) as h:
        h.discover()
        outcome = h.enable("fs-read", [f"root={notes}"], consent=True)
        assert outcome, outcome.reason
        yield h


def _survives(host: PluginHost) -> None:
    """The host still runs guest code and plugins after whatever came before."""
    result = host.exec("import host.fsread\nhost.fsread.list_dir()")
    assert result.ok, result.error
    assert result.value == ["notes.md"]


# -- what works ------------------------------------------------------------------------------


def test_a_snippet_reads_notes_through_the_enabled_plugin(host: PluginHost) -> None:
    result = host.exec(
        'import host.fsread\nprint("reading")\ntext = host.fsread.read_file("notes.md")\n'
        "text.splitlines()"
    )
    assert result.status is GuestStatus.OK, result.error
    assert (result.stdout, result.stderr) == ("reading\n", "")
    assert result.value == ["# Notes", "buy milk"]
    assert result.value_repr == "['# Notes', 'buy milk']"
    assert result.error is None
    assert result.ok
    logged = [
        (d.plugin, d.target, d.allowed)
        for d in host.manager.store.decisions("fs-read")
        if d.action == "guest.call"
    ]
    assert logged == [("fs-read", "fsread.read_file", True)]


def test_from_host_import_and_the_package_attribute_work_too(host: PluginHost) -> None:
    result = host.exec(
        "from host import fsread\nimport host\n[fsread.list_dir(), host.fsread.list_dir()]"
    )
    assert result.value == [["notes.md"], ["notes.md"]], result.error


def test_the_value_is_the_final_expression_like_the_repl(host: PluginHost) -> None:
    result = host.exec("x = 6\nx * 7")
    assert (result.value, result.value_repr) == (42, "42")
    result = host.exec("print('no value')")
    assert (result.stdout, result.value, result.value_repr) == ("no value\n", None, None)
    result = host.exec("object()")
    assert result.value is None
    assert result.value_repr is not None
    assert result.value_repr.startswith("<object object at 0x")


# -- the guest's own errors -------------------------------------------------------------------


def test_the_traceback_is_the_guests_own(host: PluginHost) -> None:
    result = host.exec("def average(xs):\n    return sum(xs) / len(xs)\n\naverage([])")
    assert result.status is GuestStatus.ERROR
    assert result.error_type == "ZeroDivisionError"
    assert result.error == (
        "Traceback (most recent call last):\n"
        '  File "<guest>", line 4, in <module>\n'
        "    average([])\n"
        '  File "<guest>", line 2, in average\n'
        "    return sum(xs) / len(xs)\n"
        "           ~~~~~~~~^~~~~~~~~\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert not result.ok


def test_a_failing_plugin_call_shows_the_guests_line_and_no_caplet_paths(
    host: PluginHost,
) -> None:
    result = host.exec('import host.fsread\n\nhost.fsread.read_file("../../etc/passwd")')
    assert result.error_type == "HostCallError"
    assert result.error is not None
    assert result.error.startswith(
        'Traceback (most recent call last):\n  File "<guest>", line 3, in <module>\n'
        '    host.fsread.read_file("../../etc/passwd")\n'
    )
    assert result.error.endswith(
        "HostCallError: host.call failed: host.fsread.read_file (plugin 'fs-read'): plugin "
        "'fs-read': fsread.read_file raised ValueError: paths must stay inside the root\n"
    )
    assert "caplet" not in result.error.replace("plugin", "")
    assert 'File "/' not in result.error
    assert result.error.count('File "') == 1


# -- what is forbidden ----------------------------------------------------------------------------


def test_opening_a_file_fails_even_one_the_plugin_may_read(
    host: PluginHost, notes: Path, state_dir: Path
) -> None:
    for path in ("/etc/passwd", str(notes / "notes.md"), str(state_dir / "caplet.db")):
        result = host.exec(f"open({path!r}).read()")
        assert result.status is GuestStatus.ERROR, path
        assert result.error_type == "FileNotFoundError", result.error
        assert result.error is not None
        assert f"No such file or directory: {path!r}" in result.error
    result = host.exec(f"open({str(notes / 'planted.txt')!r}, 'w')")
    assert result.error_type == "FileNotFoundError"
    assert not (notes / "planted.txt").exists()
    _survives(host)


def test_opening_a_socket_fails(host: PluginHost) -> None:
    result = host.exec(
        "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(('127.0.0.1', 9))"
    )
    assert result.error_type == "PermissionError"
    assert result.error is not None
    assert result.error.endswith("PermissionError: [Errno 1] Operation not permitted\n")
    _survives(host)


def test_a_process_ctypes_and_the_environment_are_out_of_reach(host: PluginHost) -> None:
    result = host.exec("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'])")
    assert result.error_type == "PermissionError", result.error
    result = host.exec(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "[libc.ptrace(16, 1, 0, 0), ctypes.get_errno()]"  # PTRACE_ATTACH to pid 1
    )
    assert result.value == [-1, 1], result.error  # EPERM from seccomp
    result = host.exec("import os\ndict(os.environ)")
    assert result.value == {}
    _survives(host)


def test_importing_a_module_of_a_plugin_that_is_not_enabled_fails(host: PluginHost) -> None:
    result = host.exec("import host.other")
    assert result.error_type == "ModuleNotFoundError"
    assert result.error is not None
    assert result.error.endswith(
        "ModuleNotFoundError: No module named 'host.other': plugin 'other-plugin' declares it "
        "but is not enabled (state: discovered); enable it in the host first "
        "(host.enable('other-plugin'), or caplet exec --enable other-plugin); importable host "
        "modules: fsread\n"
    )
    result = host.exec("import host.fsreed")
    assert result.error is not None
    assert "(did you mean 'fsread'?)" in result.error


def test_calling_an_undeclared_function_fails(host: PluginHost) -> None:
    result = host.exec("import host.fsread\nhost.fsread.write_file('x.md', 'data')")
    assert result.error_type == "AttributeError"
    assert result.error is not None
    assert result.error.endswith(
        "AttributeError: module 'host.fsread' has no function 'write_file'; plugin 'fs-read' "
        "declares: read_file, list_dir\n"
    )
    result = host.exec("import host.fsread\nhost.fsread.read_fil('notes.md')")
    assert result.error is not None
    assert "(did you mean 'read_file'?)" in result.error


def test_arguments_are_checked_against_the_declared_schema(host: PluginHost) -> None:
    result = host.exec("import host.fsread\nhost.fsread.read_file(42)")
    assert result.error_type == "ContextArgumentError"
    assert result.error is not None
    assert result.error.endswith(
        "ContextArgumentError: invalid arguments: the arguments of host.fsread.read_file do "
        "not match its schema: at $[0]: 42 is not of type 'string'\n"
    )


def test_reaching_the_channel_through_caplet_internals_gets_nothing(host: PluginHost) -> None:
    """Guest code shares its interpreter with the runner; the host checks every request."""
    forged = """
from caplet._sandbox import _context
from caplet._sandbox._protocol import ContextOp
transport = _context.context()._transport
outcomes = []
for op, args in [
    (ContextOp.KV_SET, {"key": "k", "value": 1}),
    (ContextOp.PLUGINS_CALL, {"target": "fsread.read_file", "args": ["notes.md"]}),
    (ContextOp.GUEST_CALL, {"module": "fsread", "function": "create_functions",
                            "args": [], "kwargs": {}}),
    (ContextOp.GUEST_CALL, {"module": "other", "function": "run", "args": [], "kwargs": {}}),
]:
    try:
        outcomes.append(["ok", transport.request(op, args)])
    except Exception as exc:
        outcomes.append([type(exc).__name__, str(exc)])
outcomes
"""
    result = host.exec(forged)
    assert result.ok, result.error
    assert isinstance(result.value, list)
    assert [kind for kind, _ in result.value] == ["NotGrantedError"] * 4
    assert "guest code has no ctx.kv.set" in result.value[0][1]
    assert "guest code has no ctx.plugins.call" in result.value[1][1]
    assert "has no function 'create_functions'" in result.value[2][1]
    assert "plugin 'other-plugin' declares it but is not enabled" in result.value[3][1]


def test_a_malformed_frame_kills_the_guest_and_the_host_survives(host: PluginHost) -> None:
    result = host.exec(
        "from caplet._sandbox import _context\n"
        "channel = _context.context()._transport\n"
        "channel.sock.sendall(b'\\x00\\x00\\x00\\x01\\xc1')\n"
        "channel.sock.recv(1)"
    )
    assert result.status is GuestStatus.CRASHED
    assert result.error_type == "SandboxCrashed"
    assert result.error is not None
    assert result.error.startswith(
        "SandboxCrashed: the snippet's sandbox broke the protocol and was killed ("
    )
    _survives(host)


def test_a_snippet_past_its_timeout_is_killed_and_the_host_survives(host: PluginHost) -> None:
    result = host.exec("while True:\n    pass", timeout=0.5)
    assert result.status is GuestStatus.TIMEOUT
    assert result.error == (
        "TimeoutError: the snippet did not finish within 500 ms; its sandbox was killed and "
        "its output is lost (make it faster, or pass a longer timeout)\n"
    )
    _survives(host)


def test_exit_memory_and_output_bombs_are_contained(
    plugins_dir: Path, state_dir: Path, launcher: CountingLauncher, make_plugin: PluginFactory
) -> None:
    with _host(plugins_dir, state_dir, launcher, max_output_kb=1) as host:
        result = host.exec("import os\nos._exit(0)")
        assert result.status is GuestStatus.CRASHED
        assert result.error is not None
        assert "the snippet's sandbox died before it finished" in result.error
        result = host.exec("b = bytearray(1024 ** 3)")
        assert result.error_type == "MemoryError"
        result = host.exec("while True:\n    print('x' * 1000)", timeout=2)
        assert result.status is GuestStatus.TIMEOUT  # the output stayed capped meanwhile
        result = host.exec("print('y' * 5000)\n'z' * 5000")
        assert result.ok
        assert (len(result.stdout), result.truncated) == (1024, True)
        assert result.value_repr is not None
        assert len(result.value_repr) == 1024
        assert result.value is None  # 5 KB encoded, over the 1 KiB a value may take


def test_a_bad_request_raises_guest_error(host: PluginHost) -> None:
    with pytest.raises(GuestError, match="timeout must be a positive number of seconds up to 60"):
        host.exec("1", timeout=0)
    with pytest.raises(GuestError, match="timeout must be"):
        host.exec("1", timeout=61)
    # attack14: an int past a float's range raised OverflowError out of host.exec
    # (math.isfinite converts it), and its repr past 4,300 digits a ValueError.
    for huge, digits in ((10**400, 401), (10**5000, 5001)):
        with pytest.raises(
            GuestError, match=rf"timeout must be .* got an integer of {digits} digits"
        ):
            host.exec("1", timeout=huge)
    with pytest.raises(GuestError, match="guest code must be a str of Python source, got bytes"):
        host.exec(b"1")  # type: ignore[arg-type]
    with pytest.raises(GuestError, match=r"guest code is 262145 bytes, over the limit of 262144"):
        host.exec("#" * (256 * 1024 + 1))


# -- the warm pool ----------------------------------------------------------------------------


def test_every_snippet_gets_a_fresh_worker_from_the_warm_pool(
    plugins_dir: Path, state_dir: Path, launcher: CountingLauncher
) -> None:
    with _host(plugins_dir, state_dir, launcher, pool_size=2) as host:
        assert host.warm_guests() == 2
        main = threading.current_thread().name
        assert launcher.guest_starts == [main, main]
        first = host.exec(
            "import builtins, sys\nbuiltins.LEAK = 'secret'\nsys.modules['leak'] = sys\n"
            "open('/tmp/leak.txt', 'w').write('x')\nLEFT = 1\n'set'"
        )
        assert first.value == "set", first.error
        second = host.exec(
            "import builtins, os, sys\n"
            "[hasattr(builtins, 'LEAK'), 'leak' in sys.modules, os.path.exists('/tmp/leak.txt'),"
            " 'LEFT' in globals()]"
        )
        assert second.value == [False, False, False, False], second.error
        # Both snippets ran on workers started ahead of them: the only starts in
        # this thread are the two of warm_guests.
        assert launcher.guest_starts.count(main) == 2


def test_close_tears_the_pool_down(
    plugins_dir: Path, state_dir: Path, launcher: CountingLauncher
) -> None:
    host = _host(plugins_dir, state_dir, launcher, pool_size=2)
    assert host.warm_guests() == 2
    runner = host._guests.runner
    assert runner is not None
    waiting = list(runner.pool._idle)
    assert all(guest.alive for guest in waiting)
    host.close()
    assert not any(guest.alive for guest in waiting)
    assert runner.pool._thread is None or not runner.pool._thread.is_alive()
    with pytest.raises(LifecycleError, match="the host is closed; guest code cannot run any more"):
        host.exec("1")


# -- a plugin may not pose as guest code --------------------------------------------------------


def test_a_plugin_sending_guest_call_is_refused(
    plugins_dir: Path, state_dir: Path, launcher: CountingLauncher, make_plugin: PluginFactory
) -> None:
    plugin(
        make_plugin,
        "poser",
        """
from caplet._sandbox._protocol import ContextOp

def create_functions(config):
    def run(ctx):
        try:
            return ctx._transport.request(
                ContextOp.GUEST_CALL,
                {"module": "fsread", "function": "list_dir", "args": [], "kwargs": {}},
            )
        except Exception as exc:
            return [type(exc).__name__, str(exc)]
    return {"main": {"run": run}}
""",
    )
    with _host(plugins_dir, state_dir, launcher) as host:
        host.discover()
        assert host.enable("poser", consent=True)
        name, message = host.call("poser", "main.run")
    assert name == "NotGrantedError"
    assert message.startswith(
        "not granted: plugin 'poser' sent guest.call, which only guest code may use"
    )


# -- guest code may not take a plugin out of service ---------------------------------------------

SLOW = """
import time

def create_functions(config):
    def wait(seconds):
        time.sleep(seconds)
        return "done"
    return {"slow": {"wait": wait}}
"""


def test_guest_code_cannot_quarantine_a_plugin_by_calling_it_out_of_time(
    plugins_dir: Path, state_dir: Path, launcher: CountingLauncher, make_plugin: PluginFactory
) -> None:
    # The plugin's own deadline is 30 s; each snippet has 0.3 s, and asks for
    # a wait of 20 s: the call is cut short by the *caller's* deadline. Run
    # through three cool-downs, that used to trip the breaker three times and
    # quarantine the plugin (persisted, until a person runs `caplet release`).
    plugin(
        make_plugin, "slow", SLOW, module="slow", functions=("wait",), limits="timeout_ms = 30000"
    )
    now = [1000.0]
    with make_host(
        plugins_dir,
        state_dir,
        launcher,  # type: ignore[arg-type]
        policy=Policy(guest=GuestLimits(pool_size=0)),
        clock=lambda: now[0],
    ) as host:
        host.discover()
        assert host.enable("slow", consent=True)
        for _ in range(3):
            for _ in range(3):
                result = host.exec("import host.slow\nhost.slow.wait(20)", timeout=0.3)
                assert not result.ok
            now[0] += 120  # past the breaker's cool-down
        assert host.manager.require_plugin("slow").quarantine is None
        assert host.call("slow", "slow.wait", 0) == "done"


PICKY = """
def create_functions(config):
    def parse(text):
        return int(text)  # an honest plugin: a ValueError for text that is no number
    return {"picky": {"parse": parse}}
"""


def test_guest_code_cannot_quarantine_a_plugin_by_feeding_it_input_it_rejects(
    plugins_dir: Path, state_dir: Path, launcher: CountingLauncher, make_plugin: PluginFactory
) -> None:
    """Red team, round 4: untrusted guest code called an honest plugin with text it
    cannot parse, three times, through three cool-downs: every exception counted
    toward its breaker and the plugin was quarantined (persisted, for every host,
    until a person runs `caplet release`). A caller's input may open this host's
    breaker; only the application's own calls quarantine."""
    plugin(make_plugin, "picky", PICKY, module="picky", functions=("parse",))
    now = [1000.0]
    with make_host(
        plugins_dir,
        state_dir,
        launcher,  # type: ignore[arg-type]
        policy=Policy(guest=GuestLimits(pool_size=0)),
        clock=lambda: now[0],
    ) as host:
        host.discover()
        assert host.enable("picky", consent=True)
        for _ in range(4):
            for _ in range(3):
                result = host.exec("import host.picky\nhost.picky.parse('x')")
                assert not result.ok
            # The breaker still does its job in this host: it is open.
            with pytest.raises(CircuitOpenError):
                host.call("picky", "picky.parse", "7")
            now[0] += 120  # past the breaker's cool-down
        assert host.manager.require_plugin("picky").quarantine is None
        assert host.call("picky", "picky.parse", "7") == 7


def test_output_with_lone_surrogates_crosses_escaped(host: PluginHost) -> None:
    # attack14: a name decoded with surrogateescape (os.fsdecode of a file name that is
    # not UTF-8) printed by guest code made the reply unencodable: "the snippet broke the
    # guest runner (TypeError); its output is lost", status CRASHED.
    printed = host.exec("import os\nname = os.fsdecode(b'caf\\xe9.txt')\nprint(name)\nname")
    assert printed.status is GuestStatus.OK, printed.error
    assert printed.stdout == "caf\\udce9.txt\n"
    assert printed.value_repr == "'caf\\udce9.txt'"
    raised = host.exec("import os, sys\nsys.stderr.write('\\ud800')\nraise ValueError('\\udcff')")
    assert raised.status is GuestStatus.ERROR
    assert raised.stderr == "\\ud800"
    assert raised.error is not None
    assert "ValueError: \\udcff" in raised.error
    # Escapes count toward the output limit; an exception class of a long name is cut to
    # the type's limit (it was refused by the host's decoder: the runner "crashed").
    limit = host.policy.guest.max_output_chars
    many = host.exec(
        f"print('\\udcff' * {limit // 2})\nraise type('E' * 300, (Exception,), {{}})()"
    )
    assert many.status is GuestStatus.ERROR, many.error
    assert (len(many.stdout), many.truncated) == (limit, True)
    assert many.error_type is not None
    assert many.error_type == "E" * 200
    # The near miss: text of any script crosses unchanged.
    plain = host.exec("print('Grüße, 東京 🌧')")
    assert plain.stdout == "Grüße, 東京 🌧\n"


BOUNDED_MANIFEST = """
name = "dimmer"
version = "1.0.0"
description = "Sets a light's level."

[modules.dimmer.functions.set_level]
description = "Set the level, 0 to 100."
args = { type = "array", prefixItems = [{ type = "number", minimum = 0, maximum = 100 }] }
"""
BOUNDED = """
def create_functions(config):
    def set_level(level):
        return "level " + repr(level)

    return {"dimmer": {"set_level": set_level}}
"""


def test_guest_code_cannot_pass_nan_through_a_declared_bound(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """attack18: NaN crosses the channel as a msgpack float, and every comparison with it
    is false, so the declared ``minimum = 0, maximum = 100`` let guest code hand the
    plugin ``nan`` as a level (jsonschema checks ``instance > maximum``)."""
    make_plugin("dimmer", manifest=BOUNDED_MANIFEST, source=BOUNDED)
    host.discover()
    assert host.enable("dimmer", consent=True)
    result = host.exec("import host.dimmer\nhost.dimmer.set_level(float('nan'))")
    assert result.error_type == "ContextArgumentError", (result.value, result.error)
    assert result.error is not None
    assert result.error.endswith(
        "ContextArgumentError: invalid arguments: the arguments of host.dimmer.set_level do "
        "not match its schema: at $[0]: nan is not a JSON number (NaN and infinity are not "
        "JSON)\n"
    )
    # Near miss: a level within the bound reaches the plugin.
    result = host.exec("import host.dimmer\nhost.dimmer.set_level(42.5)")
    assert result.ok, result.error
    assert result.value == "level 42.5"
