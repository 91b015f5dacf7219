"""The worker process: loads one plugin and serves calls to it.

Started by a launcher as ``python -I -c <bootstrap> <fd>`` (see
:func:`caplet._sandbox._subprocess.worker_command`), where ``<fd>`` is the
inherited end of the host's socketpair. Before any plugin byte is imported
the worker empties its environment (PEP 538 locale coercion may have added
``LC_CTYPE`` even though the host passed ``env={}``), closes every
descriptor but 0, 1, 2 and the channel, and stops writing bytecode; its
working directory is already the private workdir the launcher chose.

Then: read INIT, import the entry module from the snapshot as
``caplet_plugin.<stem>`` (the snapshot is the package's only search
location, and is also on ``sys.path`` so ``import helpers`` of a sibling
file works), call ``create_functions(config)`` and register only the
modules and functions INIT declares (:mod:`caplet._sandbox._plugin_load`);
the rest are reported as rejected and are never callable. Reply READY, or
FATAL and exit 1. Then serve CALLs until SHUTDOWN or end of stream (exit
0). A malformed or out-of-order frame from the host is exit 2: the worker
trusts nothing it did not check either.

While a CALL runs, the plugin's ``ctx`` (:mod:`caplet._sandbox._context`)
sends CONTEXT_REQUEST frames on the same channel and reads the host's
answer before the call continues (:class:`_Channel`). A function whose
first positional parameter is named ``ctx`` gets the context as its first
argument (bound once, when it is registered); the caller's arguments, and
the manifest's ``args`` schema, never see it.

This module runs in every worker, so it imports only the standard library,
msgpack (through the protocol) and the sandbox's protocol, context, plugin
loader, error and guest-runner modules; ``caplet/__init__.py`` is lazy (PEP
562), so importing it does not pull in the host's dependencies.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import socket
import sys
import threading
from typing import NoReturn, assert_never

from caplet._errors import (
    ContextArgumentError,
    ContextLimitError,
    ContextUnavailableError,
    ProtocolError,
)

# Not used here: imported so that the zygote, which imports this module
# before it forks (and before it stops writing bytecode), has the guest
# runner loaded; a guest worker then starts without importing it (measured:
# 20-30 ms per guest start on a loaded 2-core machine without a .pyc).
from caplet._sandbox import _guest  # noqa: F401
from caplet._sandbox._context import PluginContext, install, raise_failure
from caplet._sandbox._frames import (
    FrameReader,
    send_frame,
)
from caplet._sandbox._plugin_load import (
    _MAX_MESSAGE_CHARS,
    _awaited,
    _describe_exception,
    _load,
    _Loaded,
    _LoadError,
    _register,
    _shape,
    _truncate,
)
from caplet._sandbox._protocol import (
    HEADER_BYTES,
    Call,
    ContextFailure,
    ContextOp,
    ContextReply,
    Init,
    Shutdown,
    WireValue,
)
from caplet._sandbox._protocol_decode import (
    decode_host_message,
)
from caplet._sandbox._protocol_encode import (
    encode_context_request,
    encode_error,
    encode_fatal,
    encode_init,
    encode_ready,
    encode_result,
)
from caplet._sandbox._seccomp_policy import WORKER_UMASK_BITS

__all__ = [
    "EXIT_LOAD_FAILED",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "main",
    "warm_up",
]

#: SHUTDOWN, or the host closed the channel.
EXIT_OK = 0
#: The plugin could not be loaded (FATAL was sent).
EXIT_LOAD_FAILED = 1
#: Bad command line, or a malformed / unexpected frame from the host.
EXIT_PROTOCOL = 2


class _Channel:
    """The worker's end of the socket, shared by the serve loop and ``ctx``.

    Implements :class:`~caplet._sandbox._context_parts.ContextTransport`. One lock
    covers every write and every request's read of its answer, so a plugin's
    threads cannot interleave frames, and the RESULT of a call is sent (and
    the call marked finished) only when no request is half-way through. A
    request outside a call raises ContextUnavailableError without sending
    anything: the host would take it for a protocol violation.
    """

    __slots__ = ("_call_id", "_lock", "_next_id", "_plugin", "max_frame_bytes", "reader", "sock")

    def __init__(self, sock: socket.socket, reader: FrameReader, plugin: str) -> None:
        self.sock = sock
        self.reader = reader
        self.max_frame_bytes = reader.max_frame_bytes
        self._plugin = plugin
        self._lock = threading.Lock()
        self._call_id: int | None = None
        self._next_id = 1

    @property
    def in_call(self) -> bool:
        """True while a CALL is being served."""
        return self._call_id is not None

    def begin(self, call_id: int) -> None:
        """A CALL starts: requests are allowed, tagged with its id."""
        self._call_id = call_id

    def finish(self, frame: bytes) -> None:
        """Send the call's reply and end the call, with no request in between."""
        with self._lock:
            self._call_id = None
            send_frame(self.sock, frame, None)

    def request(self, op: ContextOp, args: dict[str, WireValue]) -> WireValue:
        """Send one CONTEXT_REQUEST and wait for its answer (raising a refusal)."""
        plugin = self._plugin
        with self._lock:
            call_id = self._call_id
            if call_id is None:
                raise ContextUnavailableError(
                    f"unavailable: plugin '{plugin}' used ctx.{op.value} while no call was "
                    "running (at import time, in create_functions, or from a thread whose "
                    "call has returned); use ctx only inside a plugin function's call",
                    plugin=plugin,
                )
            request_id = self._next_id
            self._next_id += 1
            try:
                frame = encode_context_request(request_id, call_id, op, args)
            except ProtocolError as exc:
                raise ContextArgumentError(
                    f"invalid arguments: plugin '{plugin}': ctx.{op.value}: {exc}",
                    plugin=plugin,
                ) from None
            if len(frame) - HEADER_BYTES > self.max_frame_bytes:
                # The host would refuse the frame from its header and kill us.
                raise ContextLimitError(
                    f"limit exceeded: plugin '{plugin}': ctx.{op.value}: the request encodes "
                    f"to {len(frame) - HEADER_BYTES} bytes, over the channel limit of "
                    f"{self.max_frame_bytes} bytes; send less data per request",
                    plugin=plugin,
                )
            send_frame(self.sock, frame, None)
            try:
                payload = self.reader.read_frame(None)
                if payload is None:
                    _exit(EXIT_OK, "the host closed the channel during a ctx request")
                answer = decode_host_message(payload)
            except ProtocolError as exc:
                _exit(EXIT_PROTOCOL, f"protocol error from the host: {exc}")
            if answer.request_id != request_id or not isinstance(
                answer, ContextReply | ContextFailure
            ):
                _exit(
                    EXIT_PROTOCOL,
                    f"protocol error from the host: {type(answer).__name__} "
                    f"(request {answer.request_id}) in answer to ctx request {request_id}",
                )
        if isinstance(answer, ContextFailure):
            raise_failure(answer.error, answer.category, answer.message, plugin)
        return answer.value


def _exit(code: int, why: str) -> NoReturn:
    """Leave at once from inside plugin code (which could catch an exception)."""
    _complain(why)
    os._exit(code)


def _complain(text: str) -> None:
    """Explain an exit on stderr (the host's private log of this worker)."""
    try:
        sys.stderr.write(f"caplet worker: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed or replaced
        pass


def _dispatch(loaded: _Loaded, call: Call, max_frame_bytes: int) -> bytes:
    """Run one call and return the reply frame (RESULT or ERROR)."""
    functions = loaded.table.get(call.module)
    function = None if functions is None else functions.get(call.function)
    if function is None:
        known = ", ".join(f"{m}.{f}" for m, fs in loaded.table.items() for f in fs) or "none"
        return encode_error(
            call.request_id,
            "LookupError",
            _truncate(
                f"unknown function {call.module}.{call.function}; registered: {known}",
                _MAX_MESSAGE_CHARS,
            ),
        )
    try:
        value = function(*call.args, **call.kwargs)
        if hasattr(type(value), "__await__"):
            value = _awaited(value)
    except Exception as exc:
        return encode_error(call.request_id, *_describe_exception(exc))
    try:
        frame = encode_result(call.request_id, value)
    except ProtocolError:
        return _unsendable(call, value)
    if len(frame) - HEADER_BYTES > max_frame_bytes:
        # SizeLimitError: a size limit refused it; the host does not count it as
        # the plugin failing (issue 15).
        return encode_error(
            call.request_id,
            "SizeLimitError",
            f"{call.module}.{call.function} returned a value that encodes to "
            f"{len(frame) - HEADER_BYTES} bytes, over the frame limit of {max_frame_bytes} "
            "bytes; return less data per call",
        )
    return frame


def _unsendable(call: Call, value: object) -> bytes:
    """ERROR for a return value that cannot cross, naming the function.

    The value is checked a second time only to word the message: the success
    path does not build the name.
    """
    try:
        encode_result(call.request_id, value, origin=f"{call.module}.{call.function}")
    except ProtocolError as exc:
        message = str(exc)
    else:  # pragma: no cover - the first attempt failed on the same value
        message = f"{call.module}.{call.function} returned a value that cannot cross the boundary"
    return encode_error(call.request_id, "TypeError", _truncate(message, _MAX_MESSAGE_CHARS))


def _serve(sock: socket.socket) -> int:
    reader = FrameReader(sock)
    try:
        payload = reader.read_frame(None)
        if payload is None:
            return EXIT_OK
        init = decode_host_message(payload)
        if not isinstance(init, Init):
            raise ProtocolError(f"expected INIT as the first frame, got {type(init).__name__}")
    except ProtocolError as exc:
        _complain(f"protocol error from the host: {exc}")
        return EXIT_PROTOCOL
    reader.max_frame_bytes = init.max_frame_bytes
    # The environment was emptied at start; now it holds exactly the approved
    # env.read variables (the host never sends LD_* or PYTHON* names).
    os.environ.update(init.env)
    channel = _Channel(sock, reader, init.plugin)
    context = PluginContext(init.plugin, init.context, channel)
    install(context)
    try:
        loaded = _load(init, context)
    except _LoadError as exc:
        send_frame(
            sock, encode_fatal(init.request_id, _truncate(str(exc), _MAX_MESSAGE_CHARS)), None
        )
        return EXIT_LOAD_FAILED
    registered = {module: list(functions) for module, functions in loaded.table.items()}
    send_frame(sock, encode_ready(init.request_id, registered, loaded.rejected), None)
    while True:
        try:
            payload = reader.read_frame(None)
            if payload is None:
                return EXIT_OK
            message = decode_host_message(payload)
        except ProtocolError as exc:
            _complain(f"protocol error from the host: {exc}")
            return EXIT_PROTOCOL
        if isinstance(message, Call):
            channel.begin(message.request_id)
            channel.finish(_dispatch(loaded, message, init.max_frame_bytes))
        elif isinstance(message, Shutdown):
            return EXIT_OK
        elif isinstance(message, Init):
            _complain("protocol error from the host: a second INIT")
            return EXIT_PROTOCOL
        elif isinstance(message, ContextReply | ContextFailure):
            _complain(
                f"protocol error from the host: {type(message).__name__} "
                f"{message.request_id} while no ctx request was waiting"
            )
            return EXIT_PROTOCOL
        else:
            assert_never(message)


def _close_other_descriptors(*keep: int) -> None:
    """Close every fd but 0, 1, 2 and ``keep`` (sorted, each >= 3).

    The launcher already passes only the channel (close_fds/pass_fds), but a
    different launcher (the fork-server zygote) may not, and a plugin must
    not find a stray descriptor of the host. ``os.closerange`` uses
    close_range(2) where the kernel has it.
    """
    limit = os.sysconf("SC_OPEN_MAX")
    low = 3
    for fd in keep:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(limit, low))


#: The module :func:`warm_up` imports: never a plugin's (not under PLUGIN_PACKAGE).
_WARM_MODULE = "_caplet_warm_up"
_WARM_SOURCE = """
def create_functions(config):
    def echo(value):
        return value

    return {"main": {"echo": echo}}
"""


def warm_up(scratch_dir: str) -> None:
    """Run a worker's start-up paths once on dummy data, in a spare before its request.

    A forked interpreter pays a copy-on-write page fault for every page its
    code first writes to (a reference count is enough); a worker's start
    touches thousands (decoding INIT, the import system, compiling and
    running the entry module). Done here they are off the start's critical
    path and cost no memory the worker would not use anyway. Leaves
    nothing behind: the scratch file and the module are removed. Best
    effort: any failure is ignored, the start then only pays the faults.
    """
    path = os.path.join(scratch_dir, f"{_WARM_MODULE}.py")  # noqa: PTH118 - see _entry_parts
    # The zygote never writes bytecode; a caller that does would leave a
    # __pycache__ of the scratch module behind.
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        init = encode_init(
            0,
            plugin="warm-up",
            entry="plugin.py",
            snapshot=scratch_dir,
            config={"key": "value"},
            modules={"main": ["echo"]},
        )
        decode_host_message(init[HEADER_BYTES:])
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(_WARM_SOURCE)
        # The jail hashes its copy of the snapshot before the worker loads it
        # (_jail_copy.copy_grant): ~0.2 ms of first-touch faults of its own. Both
        # modules are the zygote's already; a plain worker never warms up.
        from caplet._sandbox._jail_copy import copy_hash

        copy_hash(scratch_dir)
        spec = importlib.util.spec_from_file_location(_WARM_MODULE, path)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            loaded = _register(_shape(module.create_functions({}), "warm-up"), {"main": ("echo",)})
            encode_ready(0, {m: list(f) for m, f in loaded.table.items()}, loaded.rejected)
            encode_result(0, loaded.table["main"]["echo"]("x"))
    except Exception:  # noqa: S110 - an optimisation only
        pass
    finally:
        sys.dont_write_bytecode = writes_bytecode
        sys.modules.pop(_WARM_MODULE, None)
        try:
            os.unlink(path)  # noqa: PTH108
        except OSError:
            pass


def _access_for_the_worker_uid() -> None:
    """Make ``os.access`` answer for the uid the worker's files are reached with.

    access(2) checks the *real* uid, and on a root host that is the worker's
    own (``REAL_UID_BASE`` + its monitor's pid, :mod:`._identity`) while
    every file is opened with the shared effective and filesystem uid: a
    writable grant the worker uid owns read as unwritable (0700: unreadable)
    to ``os.access``, ``shutil.which`` and the libraries that probe a cache
    directory with it, though writing there worked (attack12). The default
    becomes faccessat(AT_EACCESS), the answer an open() would give; a caller
    passing ``effective_ids`` keeps its choice. A worker whose real and
    effective uids agree (no real uid of its own) is left alone.
    """
    if os.getuid() == os.geteuid() or os.access not in os.supports_effective_ids:
        return
    real_access = os.access

    @functools.wraps(real_access)
    def access(
        path: int | str | bytes | os.PathLike[str] | os.PathLike[bytes],
        mode: int,
        *,
        dir_fd: int | None = None,
        effective_ids: bool = True,
        follow_symlinks: bool = True,
    ) -> bool:
        return real_access(
            path,
            mode,
            dir_fd=dir_fd,
            effective_ids=effective_ids,
            follow_symlinks=follow_symlinks,
        )

    os.access = access
    # What the original answers to (shutil and others ask before passing effective_ids).
    os.supports_effective_ids.add(access)


def _umask_keeping_others_write() -> None:
    """Make ``os.umask`` keep the bit seccomp requires instead of failing.

    The filter refuses a ``umask`` that clears others' write bit (attack34), and
    glibc's ``umask()`` turns that refusal into -1 without errno, so Python raised
    ``OSError: [Errno 0] Error`` at the common idiom that *reads* the umask,
    ``old = os.umask(0); os.umask(old)`` (``dbm.dumb``, so ``shelve``; pip). The bit is
    added here instead: the idiom returns the true old mask and leaves the mask as it
    was. The wrapper is a convenience, not the defence: a direct system call
    (ctypes) still meets the filter.
    """
    real_umask = os.umask

    @functools.wraps(real_umask)
    def umask(mask: int, /) -> int:
        return real_umask(mask | WORKER_UMASK_BITS)

    os.umask = umask


def main(argv: list[str] | None = None) -> int:
    """Run the worker on the channel whose fd number is ``argv[0]``.

    ``argv[1]``, when given, is one more descriptor to keep open: the
    snapshot's, when the worker reads it through ``/proc/self/fd``.
    """
    args = sys.argv[1:] if argv is None else argv
    if (
        len(args) not in (1, 2)
        or not all(arg.isdigit() and int(arg) >= 3 for arg in args)
        or len(set(args)) != len(args)
    ):
        _complain(f"usage: worker <channel fd (>= 3)> [<snapshot fd>], got {args!r}")
        return EXIT_PROTOCOL
    fd = int(args[0])
    os.environ.clear()
    _access_for_the_worker_uid()
    _umask_keeping_others_write()
    _close_other_descriptors(*sorted(int(arg) for arg in args))
    sys.dont_write_bytecode = True
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        _complain(f"fd {fd} is not a usable socket: {exc}")
        return EXIT_PROTOCOL
    sock.setblocking(True)
    try:
        with sock:
            return _serve(sock)
    except OSError as exc:  # the host went away mid-send; nobody is left to tell
        _complain(f"channel error: {exc}")
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - the launcher uses -c, this is for debugging
    raise SystemExit(main())
