"""Only caplet errors cross the host's API (issue 13, point 6).

The red team's reproduction first: a granted server answering
``302 Location: http:x`` (or ``http:\\\\127.0.0.1/``) made ``host.call``
raise ``httpx.InvalidURL``, ``host.exec`` (documented never to raise for
what the code does) raise it from guest code, and the breaker did not count
it. Now the plugin gets a broker error, the call is a failure of the plugin
(counted), and the guest gets a result.

Then the host's nets for failures nobody foresaw (caplet/_host/_failures.py).
Such a failure is a bug, so there is none to trigger on purpose: these tests
inject one where it would surface (a function of the host's process made to
raise, or the host's run directory removed behind its back) and check what
the caller, the plugin and the guest see. Everything else is real: sandboxed
workers, a raw TCP server on 127.0.0.1, the SQLite store.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import (
    GuestLimits,
    GuestStatus,
    NetworkPolicy,
    PluginCallError,
    PluginHost,
    Policy,
    WorkerCrashedError,
    WorkerStartError,
)
from caplet._broker._http import HttpBroker
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._sandbox._subprocess import SubprocessWorker
from tests._broker.conftest import LOOPBACK, NAMES, CountingResolver
from tests._broker.rawkit import RawServer, raw_server
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

FETCHER = """
from caplet.plugin import BrokerError, ContextError

def create_functions(config):
    def unsafe(ctx, url):
        return ctx.http.get(url).status

    def safe(ctx, url):
        try:
            return ctx.http.get(url).status
        except (BrokerError, ContextError) as exc:
            return [type(exc).__name__, exc.category, str(exc)]

    def echo(value):
        return value

    return {"main": {"unsafe": unsafe, "safe": safe, "echo": echo}}
"""


class InjectedError(RuntimeError):
    """The fault a test injects: an exception no part of caplet expects."""


@pytest.fixture
def raw() -> Iterator[RawServer]:
    with raw_server() as server:
        yield server


@pytest.fixture
def host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    raw: RawServer,
) -> Iterator[PluginHost]:
    plugin(
        make_plugin,
        "fetcher",
        FETCHER,
        functions=("unsafe", "safe", "echo"),
        capabilities=(f"net.http:{_base(raw)}",),
    )
    with make_host(
        plugins_dir,
        state_dir,
        launcher,
        policy=Policy(
            network=NetworkPolicy(allowed_networks=(LOOPBACK,)), guest=GuestLimits(pool_size=0)
        ),
        resolver=CountingResolver(NAMES),
    ) as built:
        enable(built, "fetcher")
        yield built


def _base(raw: RawServer) -> str:
    return f"http://api.example.test:{raw.port}"


def _redirect(location: bytes) -> bytes:
    return b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n"


# -- the red team's reproduction ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "error"),
    [(b"http:x", "RedirectError"), (b"http:\\\\127.0.0.1/", "InvalidUrlError")],
)
def test_a_malformed_location_is_the_plugins_failure_not_a_foreign_error(
    host: PluginHost, raw: RawServer, location: bytes, error: str
) -> None:
    raw.answer(_redirect(location))
    url = _base(raw) + "/a"
    exc_type, category, message = host.call("fetcher", "main.safe", url)
    assert exc_type == error
    assert message.startswith(f"{category}: plugin 'fetcher', GET ")
    assert host.breaker("fetcher").failures == 0, "handled by the plugin: not a failure"
    with pytest.raises(PluginCallError) as caught:
        host.call("fetcher", "main.unsafe", url)
    assert caught.value.exc_type == error
    assert str(caught.value).startswith(f"plugin 'fetcher': main.unsafe raised {error}: ")
    assert host.breaker("fetcher").failures == 1, "the fetch target misbehaved: a failure"


def test_a_guest_calling_that_plugin_gets_a_result(host: PluginHost, raw: RawServer) -> None:
    raw.answer(_redirect(b"http:x"))
    result = host.exec(f"import host.main\nhost.main.unsafe({_base(raw) + '/a'!r})", timeout=20)
    assert result.status is GuestStatus.ERROR
    assert result.error_type == "HostCallError"
    assert result.error is not None
    assert "main.unsafe raised RedirectError: redirect loop: plugin 'fetcher'" in result.error


# -- the nets: a failure of the host's own ------------------------------------------------------


def test_a_ctx_request_the_host_fails_reaches_the_plugin_as_a_context_error(
    host: PluginHost,
    raw: RawServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise InjectedError("/secret/host/path")

    assert host.call("fetcher", "main.echo", 1) == 1
    pid = host.worker_pid("fetcher")
    monkeypatch.setattr(HttpBroker, "fetch", broken)
    with caplog.at_level(logging.ERROR, logger="caplet"):
        exc_type, category, message = host.call("fetcher", "main.safe", _base(raw) + "/a")
    assert (exc_type, category) == ("ContextError", "host error")
    assert message == (
        "host error: plugin 'fetcher': ctx.http.fetch failed in the host (InjectedError); try "
        "again; the host logged the details; report it as a caplet bug if it repeats"
    )
    assert "/secret/host/path" not in message
    assert host.worker_pid("fetcher") == pid, "the worker lives on"
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.getMessage() == "ctx.http.fetch of 'fetcher' failed in the host"
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], InjectedError)
    with pytest.raises(PluginCallError) as caught:
        host.call("fetcher", "main.unsafe", _base(raw) + "/a")
    assert caught.value.exc_type == "ContextError"
    assert host.breaker("fetcher").failures == 1


def _fail_once(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> None:
    """Make ``module.name`` raise InjectedError on its next call, then work again."""
    original = getattr(module, name)
    calls = {"n": 0}

    def once(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            raise InjectedError("/secret/host/path")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, once)


def _fail_next_exchange(monkeypatch: pytest.MonkeyPatch, plugin: str) -> None:
    """The next frame exchanged with ``plugin``'s worker fails in the host (the guest's
    worker and every later exchange are left alone)."""
    original = SubprocessWorker._exchange
    fired: list[bool] = []

    def failing(self: SubprocessWorker, frame: bytes, deadline: float) -> object:
        if self._spec.plugin == plugin and not fired:
            fired.append(True)
            raise InjectedError("/secret/host/path")
        return original(self, frame, deadline)

    monkeypatch.setattr(SubprocessWorker, "_exchange", failing)


def test_a_call_the_host_fails_is_a_counted_crash_and_the_next_call_works(
    host: PluginHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert host.call("fetcher", "main.echo", 1) == 1  # then the warm path
    pid = host.worker_pid("fetcher")
    _fail_next_exchange(monkeypatch, "fetcher")
    with caplog.at_level(logging.ERROR, logger="caplet"):
        with pytest.raises(WorkerCrashedError) as caught:
            host.call("fetcher", "main.echo", 2)
    assert str(caught.value) == (
        "plugin 'fetcher': main.echo failed in the host (InjectedError); the worker was "
        "stopped and the next call starts a new one; the host logged the details; report it "
        "as a caplet bug if it repeats"
    )
    assert isinstance(caught.value.__cause__, InjectedError)
    assert host.breaker("fetcher").failures == 1
    assert any(isinstance(r.exc_info[1], InjectedError) for r in caplog.records if r.exc_info)
    assert host.call("fetcher", "main.echo", 3) == 3
    assert host.worker_pid("fetcher") != pid


def test_a_worker_start_the_host_fails_is_a_counted_start_error(
    host: PluginHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(name: str, target: str, wait_s: float | None = None) -> None:
        raise InjectedError("/secret/host/path")

    monkeypatch.setattr(host._calls, "prepare_call", broken)
    with pytest.raises(WorkerStartError) as caught:
        host.call("fetcher", "main.echo", 1)
    assert str(caught.value) == (
        "plugin 'fetcher': main.echo was not called: its worker could not be started "
        "(InjectedError in the host); the host logged the details; report it as a caplet bug if "
        "it repeats"
    )
    assert host.breaker("fetcher").failures == 1


def test_a_guest_whose_plugin_call_the_host_fails_gets_a_result(
    host: PluginHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guest's calls take the guarded path (breaker first): its net, seen from guest code."""
    assert host.call("fetcher", "main.echo", 1) == 1
    _fail_next_exchange(monkeypatch, "fetcher")
    result = host.exec(
        "import host.main\ntry:\n    host.main.echo(5)\nexcept Exception as e:\n"
        "    print(type(e).__name__, e)\nhost.main.echo(6)",
        timeout=20,
    )
    assert result.status is GuestStatus.OK, result.error
    assert result.stdout.startswith(
        "HostCallError host.call failed: host.main.echo (plugin 'fetcher'): plugin 'fetcher': "
        "main.echo failed in the host (InjectedError); the worker was stopped"
    )
    assert "/secret/host/path" not in result.stdout
    assert result.value == 6, "the next call started a new worker"
    assert host.breaker("fetcher").failures == 0, "a success after the failure closes it"


def test_a_snippet_the_host_fails_is_a_crashed_result(
    host: PluginHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from caplet._host import _guest

    _fail_once(monkeypatch, _guest, "decode_reply")
    with caplog.at_level(logging.ERROR, logger="caplet"):
        result = host.exec("print('hi')\n6 * 7", timeout=20)
    assert result.status is GuestStatus.CRASHED
    assert result.error == (
        "SandboxCrashed: the host failed while the snippet ran (InjectedError); its output is "
        "lost; the host logged the details (report it as a caplet bug if it repeats)\n"
    )
    assert any(isinstance(r.exc_info[1], InjectedError) for r in caplog.records if r.exc_info)
    assert host.exec("6 * 7", timeout=20).value == 42


def test_exec_without_a_run_directory_is_a_worker_start_error(host: PluginHost) -> None:
    """A temporary-file cleaner removed the host's run directory: exec cannot start a
    sandbox. Before, FileNotFoundError escaped exec."""
    # Snapshots are sealed read-only: a cleaner running as root removes them anyway,
    # the host's own user must make the directories writable first.
    for directory, _, _ in os.walk(host._run_dir):
        os.chmod(directory, 0o700)
    shutil.rmtree(host._run_dir)
    with pytest.raises(WorkerStartError) as caught:
        host.exec("1", timeout=20)
    message = str(caught.value)
    assert message.startswith("guest code: no sandbox could be started (FileNotFoundError: ")
    assert message.endswith("check the host's temporary directory (free space, permissions)")
    assert isinstance(caught.value.__cause__, FileNotFoundError)


SURROGATE = """
import os

def create_functions(config):
    def check(raw):
        name = os.fsdecode(raw)  # a file name that is not UTF-8, as listdir gives it
        raise FileNotFoundError(f"no such note: {name}")

    def skip(ctx, raw):
        ctx.log.warning(f"skipping {os.fsdecode(raw)}")
        return "skipped"

    return {"main": {"check": check, "skip": skip}}
"""


def test_an_exception_quoting_a_name_that_is_not_utf8_is_the_plugins_error_not_a_crash(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # attack14: the message held a lone surrogate, the worker's ERROR frame could not be
    # encoded, and the worker died ("exited with code 71"): a crash, counted toward the
    # breaker and quarantine, for a plugin that only reported a file name it was given
    # (a file anyone can create in a folder the plugin reads).
    make_plugin(
        "notes", source=SURROGATE, modules='[modules.main]\nfunctions = ["check", "skip"]\n'
    )
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher) as host:
        host.discover()
        assert host.enable("notes", consent=True)
        pid = host.worker_pid("notes")
        with pytest.raises(PluginCallError) as caught:
            host.call("notes", "main.check", b"caf\xe9.md")
        assert "raised FileNotFoundError: no such note: caf\\udce9.md" in str(caught.value)
        assert host.worker_pid("notes") == pid, "the worker lives on"
        # The near miss: a name that is UTF-8 is quoted as it is.
        with pytest.raises(PluginCallError, match=r"no such note: café\.md"):
            host.call("notes", "main.check", "café.md".encode())
        # ctx.log of the same name raised "cannot encode message" in the plugin.
        with caplog.at_level(logging.WARNING, logger="caplet"):
            assert host.call("notes", "main.skip", b"caf\xe9.md") == "skipped"
        assert "[notes] skipping caf\\udce9.md" in caplog.text
