"""SubprocessWorker: calls over a worker's channel, end to end with real child processes.

Each worker is started by the plain launcher (tests/_sandbox/test_subprocess.py
tests starting one); these tests are about what happens after: results and
errors, deadlines, crashes, closing, interrupting, and a worker that breaks
the protocol.
"""

from __future__ import annotations

import os
import select
import signal

import pytest

from caplet._errors import (
    CallCancelledError,
    CallTimeoutError,
    PluginCallError,
    ProtocolError,
    SandboxError,
    WorkerCrashedError,
    WorkerGoneError,
)
from caplet._sandbox._channel_worker import SubprocessWorker
from caplet._sandbox._subprocess import SubprocessLauncher
from tests._sandbox.workerkit import VALUES
from tests.conftest import own_identity

from .conftest import Launch


def _group_is_gone(pid: int) -> bool:
    """True when no process is left in the worker's process group (and it is reaped)."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        pass
    else:
        return False
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return True


def test_call_returns_the_plugins_value(launch: Launch) -> None:
    worker = launch(VALUES)
    expected = {
        "str": "héllo",
        "nested": {"a": [1, 2.5, {"b": None}], "t": [True, False]},
        "bytes": b"\x00\xff",
        "none": None,
        "bigint": 2**63,
        "negative": -(2**63),
    }
    for kind, value in expected.items():
        assert worker.call("demo", "run", [kind], {}, timeout_s=30) == value


def test_kwargs_and_config_reach_the_function(launch: Launch) -> None:
    worker = launch(
        """
        def create_functions(config):
            def run(a, b=0, *, c):
                return {"sum": a + b + c, "config": config, "type": type(config).__name__}
            return {"demo": {"run": run}}
        """,
        config={"root": "/data", "names": ("x", "y"), "n": 3},
    )
    result = worker.call("demo", "run", [1], {"b": 10, "c": 100}, timeout_s=30)
    assert result == {
        "sum": 111,
        "config": {"root": "/data", "names": ["x", "y"], "n": 3},
        "type": "dict",
    }


def test_plugin_exception_comes_back_with_type_and_message(launch: Launch) -> None:
    worker = launch(
        """
        def create_functions(config):
            def run(n):
                if n < 0:
                    raise ValueError(f"n must be positive, got {n}")
                return n
            return {"demo": {"run": run}}
        """
    )
    with pytest.raises(PluginCallError) as caught:
        worker.call("demo", "run", [-4], {}, timeout_s=30)
    assert str(caught.value) == (
        "plugin 'demo': demo.run raised ValueError: n must be positive, got -4"
    )
    assert caught.value.exc_type == "ValueError"
    assert worker.alive
    assert worker.call("demo", "run", [4], {}, timeout_s=30) == 4


def test_wrong_arguments_are_the_plugins_type_error(launch: Launch) -> None:
    worker = launch(VALUES)
    with pytest.raises(PluginCallError) as caught:
        worker.call("demo", "run", [], {"nope": 1}, timeout_s=30)
    assert caught.value.exc_type == "TypeError"
    assert "unexpected keyword argument 'nope'" in str(caught.value)


def test_timeout_kills_the_worker_and_the_host_carries_on(launch: Launch) -> None:
    source = """
        def create_functions(config):
            def run():
                while True:
                    pass
            return {"demo": {"run": run}}
    """
    worker = launch(source)
    pid = worker.pid
    with pytest.raises(CallTimeoutError) as caught:
        worker.call("demo", "run", [], {}, timeout_s=0.5)
    assert str(caught.value).startswith(
        "plugin 'demo': demo.run timed out after 500 ms; the worker was killed"
    )
    assert not worker.alive
    assert _group_is_gone(pid)
    # Nothing of this call ran (a caller that queued behind the timed-out one
    # must not count as another failure): WorkerGoneError, a WorkerCrashedError.
    with pytest.raises(WorkerGoneError, match="no longer running"):
        worker.call("demo", "run", [], {}, timeout_s=0.5)
    again = launch(VALUES)
    assert again.call("demo", "run", ["str"], {}, timeout_s=30) == "héllo"


def test_timeout_kills_what_the_plugin_spawned(launch: Launch) -> None:
    worker = launch(
        """
        import os
        def create_functions(config):
            def spawn():
                child = os.fork()
                if child == 0:
                    while True:
                        pass
                return child
            def spin():
                while True:
                    pass
            return {"demo": {"spawn": spawn, "spin": spin}}
        """,
        modules={"demo": ("spawn", "spin")},
    )
    child = worker.call("demo", "spawn", [], {}, timeout_s=30)
    assert isinstance(child, int)
    pidfd = os.pidfd_open(child)  # readable once that process has exited
    try:
        with pytest.raises(CallTimeoutError):
            worker.call("demo", "spin", [], {}, timeout_s=0.5)
        # An upper bound so a failure cannot hang the suite; not a timing check.
        readable, _, _ = select.select([pidfd], [], [], 30)
        assert readable == [pidfd]
    finally:
        os.close(pidfd)


def test_exit_in_the_plugin_is_a_crash_with_its_code(launch: Launch) -> None:
    worker = launch(
        """
        import os, sys
        def create_functions(config):
            def run():
                sys.stderr.write("last words before exiting\\n")
                sys.stderr.flush()
                os._exit(3)
            return {"demo": {"run": run}}
        """
    )
    pid = worker.pid
    with pytest.raises(WorkerCrashedError) as caught:
        worker.call("demo", "run", [], {}, timeout_s=30)
    message = str(caught.value)
    assert message.startswith(f"plugin 'demo': the worker (pid {pid}) died during demo.run")
    assert "exited with code 3" in message
    assert "last words before exiting" in message
    assert not worker.alive
    assert _group_is_gone(pid)
    with pytest.raises(WorkerGoneError) as again:
        worker.call("demo", "run", [], {}, timeout_s=30)
    assert "is no longer running (it exited with code 3); start a new worker" in str(again.value)


def test_death_by_signal_is_named(launch: Launch) -> None:
    worker = launch(
        """
        import os, signal
        def create_functions(config):
            return {"demo": {"run": lambda: os.kill(os.getpid(), signal.SIGKILL)}}
        """
    )
    with pytest.raises(WorkerCrashedError, match=r"was killed by signal 9 \(SIGKILL\)"):
        worker.call("demo", "run", [], {}, timeout_s=30)


def test_print_does_not_corrupt_the_channel(launch: Launch) -> None:
    worker = launch(
        """
        import sys
        def create_functions(config):
            def run(n):
                print("x" * 100_000)
                print("\\x00\\x00\\x00\\x05garbage", flush=True)
                sys.stdout.write("more")
                return n
            return {"demo": {"run": run}}
        """
    )
    assert worker.call("demo", "run", [1], {}, timeout_s=30) == 1
    assert worker.call("demo", "run", [2], {}, timeout_s=30) == 2


def test_unsendable_return_value_is_an_error_and_the_worker_survives(launch: Launch) -> None:
    worker = launch(
        """
        def create_functions(config):
            def run(kind):
                if kind == "set":
                    return {1, 2}
                if kind == "nested":
                    return {"a": [1, object()]}
                if kind == "key":
                    return {1: "x"}
                return "fine"
            return {"demo": {"run": run}}
        """
    )
    with pytest.raises(PluginCallError) as caught:
        worker.call("demo", "run", ["set"], {}, timeout_s=30)
    assert str(caught.value) == (
        "plugin 'demo': demo.run raised TypeError: demo.run returned a value of type set "
        "that cannot cross the boundary "
        "(JSON-like values, bytes, lists and dicts with string keys only)"
    )
    with pytest.raises(PluginCallError, match=r"a value of type object \(at \['a'\]\[1\]\)"):
        worker.call("demo", "run", ["nested"], {}, timeout_s=30)
    with pytest.raises(PluginCallError, match="a dict key of type int"):
        worker.call("demo", "run", ["key"], {}, timeout_s=30)
    assert worker.call("demo", "run", ["ok"], {}, timeout_s=30) == "fine"


def test_arguments_that_cannot_cross_leave_the_worker_running(launch: Launch) -> None:
    worker = launch(VALUES)
    with pytest.raises(ProtocolError) as caught:
        worker.call("demo", "run", [{"x", "y"}], {}, timeout_s=30)
    assert str(caught.value).startswith(
        "plugin 'demo': cannot call demo.run: args[0] is a value of type set, "
        "which cannot cross the boundary"
    )
    with pytest.raises(ProtocolError, match=r"kwargs\['k'\]\[0\] is a value of type object"):
        worker.call("demo", "run", [], {"k": [object()]}, timeout_s=30)
    assert worker.alive
    assert worker.call("demo", "run", ["none"], {}, timeout_s=30) is None


def test_frame_limit_applies_both_ways(launch: Launch) -> None:
    worker = launch(
        """
        def create_functions(config):
            return {"demo": {"run": lambda n: "x" * n}}
        """,
        max_frame_bytes=1024,
    )
    with pytest.raises(ProtocolError) as caught:
        worker.call("demo", "run", ["y" * 2000], {}, timeout_s=30)
    assert "over the frame limit of 1024 bytes; pass less data per call" in str(caught.value)
    with pytest.raises(PluginCallError) as result:
        worker.call("demo", "run", [5000], {}, timeout_s=30)
    # A size limit's refusal, which the host never counts as the plugin failing (issue 15).
    assert result.value.exc_type == "SizeLimitError"
    assert "over the frame limit of 1024 bytes; return less data per call" in str(result.value)
    assert worker.call("demo", "run", [3], {}, timeout_s=30) == "xxx"


def test_non_positive_timeout_is_refused_without_killing(launch: Launch) -> None:
    worker = launch(VALUES)
    with pytest.raises(SandboxError, match="timeout_s must be a positive number of seconds"):
        worker.call("demo", "run", ["str"], {}, timeout_s=0)
    assert worker.alive


def test_close_is_idempotent_and_final(launch: Launch) -> None:
    worker = launch(VALUES)
    pid = worker.pid
    worker.close()
    worker.close()
    assert not worker.alive
    assert _group_is_gone(pid)
    with pytest.raises(WorkerGoneError, match=r"no longer running \(it was closed\)"):
        worker.call("demo", "run", ["str"], {}, timeout_s=30)


def test_close_after_a_crash_does_not_raise(launch: Launch) -> None:
    worker = launch(
        """
        import os
        def create_functions(config):
            return {"demo": {"run": lambda: os._exit(7)}}
        """
    )
    with pytest.raises(WorkerCrashedError):
        worker.call("demo", "run", [], {}, timeout_s=30)
    worker.close()
    worker.close()


def test_close_kills_a_worker_that_ignores_shutdown(launch: Launch) -> None:
    worker = launch(
        """
        import signal
        def create_functions(config):
            return {"demo": {"run": lambda: "ok"}}
        """
    )
    pid = worker.pid
    os.kill(pid, signal.SIGSTOP)  # a stopped worker cannot read SHUTDOWN
    worker.close()
    assert _group_is_gone(pid)


def test_worker_dying_while_idle_is_reported_on_the_next_call(launch: Launch) -> None:
    worker = launch(VALUES)
    os.kill(worker.pid, signal.SIGKILL)
    os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOWAIT)  # wait without reaping
    assert not worker.alive
    with pytest.raises(WorkerCrashedError, match=r"was killed by signal 9 \(SIGKILL\)"):
        worker.call("demo", "run", ["str"], {}, timeout_s=30)


def test_context_manager_closes(launch: Launch) -> None:
    spec = launch.spec(VALUES)
    with SubprocessLauncher(identity=own_identity()).start(spec) as worker:
        assert worker.call("demo", "run", ["str"], {}, timeout_s=30) == "héllo"
    assert not worker.alive


# -- a worker that breaks the protocol ------------------------------------------------
#
# Plugin code runs in the worker and can write to the channel itself (its fd is
# sys.argv[1]); these plugins do exactly that before returning normally.

HOSTILE = """
import os, struct, sys
import msgpack
from caplet._sandbox._protocol_encode import encode_ready, encode_result

def create_functions(config):
    def run(kind):
        fd = int(sys.argv[1])
        if kind == "oversized":
            os.write(fd, struct.pack(">I", 0xFFFFFFFF))
        elif kind == "garbage":
            os.write(fd, struct.pack(">I", 1) + b"\\xc1")
        elif kind == "wrong-id":
            os.write(fd, encode_result(999, "forged"))
        elif kind == "ready":
            os.write(fd, encode_ready(1, {}, []))
        elif kind == "extension":
            payload = msgpack.packb([11, 1, msgpack.ExtType(3, b"x")])
            os.write(fd, struct.pack(">I", len(payload)) + payload)
        return "honest"
    return {"demo": {"run": run}}
"""


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("oversized", "frame of 4294967295 bytes exceeds the limit of 8388608 bytes"),
        ("garbage", "malformed msgpack"),
        ("wrong-id", "the worker replied to request 999 while request 1 was waiting"),
        ("ready", "the worker sent READY in reply to a call"),
        ("extension", "msgpack extension types (timestamps included) are not allowed"),
    ],
)
def test_protocol_violations_kill_the_worker_not_the_host(
    launch: Launch, kind: str, expected: str
) -> None:
    worker = launch(HOSTILE)
    pid = worker.pid
    with pytest.raises(ProtocolError) as caught:
        worker.call("demo", "run", [kind], {}, timeout_s=30)
    assert str(caught.value).startswith("plugin 'demo': demo.run")
    assert expected in str(caught.value)
    assert "the worker was killed" in str(caught.value)
    assert not worker.alive
    assert _group_is_gone(pid)


def test_workers_are_independent(launch: Launch) -> None:
    first = launch(VALUES)
    second = launch(VALUES)
    assert first.pid != second.pid
    with pytest.raises(PluginCallError):
        first.call("demo", "run", ["missing"], {}, timeout_s=30)
    second.close()
    assert first.call("demo", "run", ["str"], {}, timeout_s=30) == "héllo"
    assert isinstance(first, SubprocessWorker)


def test_an_infinite_timeout_is_allowed(launch: Launch) -> None:
    worker = launch(VALUES)
    assert worker.call("demo", "run", ["none"], {}, timeout_s=float("inf")) is None
    with pytest.raises(SandboxError, match="got nan"):
        worker.call("demo", "run", ["none"], {}, timeout_s=float("nan"))
    assert worker.alive


SPIN = """
def create_functions(config):
    def spin():
        while True:
            pass

    def echo(value):
        return value

    return {"demo": {"spin": spin, "echo": echo}}
"""


def test_interrupt_stops_the_call_of_that_thread_only(launch: Launch) -> None:
    """An asyncio caller's cancellation (issue 15): the call raises CallCancelledError
    in its thread at once, the worker is stopped; another thread is never interrupted."""
    import threading

    worker = launch(SPIN, modules={"demo": ("spin", "echo")})
    assert worker.interrupt(threading.get_ident()) is False, "this thread has no call here"
    outcome: list[BaseException] = []
    ident: list[int] = []

    def call() -> None:
        ident.append(threading.get_ident())
        try:
            worker.call("demo", "spin", [], {}, timeout_s=600)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    while worker._owner is None:
        select.select([], [], [], 0.001)
    assert worker.interrupt(threading.get_ident()) is False, "not the calling thread"
    assert worker.interrupt(ident[0]) is True
    thread.join(60)
    assert not thread.is_alive()
    (error,) = outcome
    assert isinstance(error, CallCancelledError)
    assert "was cancelled by its caller while it ran; the worker" in str(error)
    assert not worker.alive
    with pytest.raises(WorkerGoneError):
        worker.call("demo", "echo", [1], {}, timeout_s=30)


def test_a_set_cancel_event_drops_the_call_unsent(launch: Launch) -> None:
    import threading

    worker = launch(SPIN, modules={"demo": ("spin", "echo")})
    event = threading.Event()
    event.set()
    with pytest.raises(CallCancelledError, match="before it was sent; nothing ran"):
        worker.call("demo", "echo", [1], {}, timeout_s=30, cancel=event)
    assert worker.alive
    assert worker.call("demo", "echo", [2], {}, timeout_s=30) == 2
