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
modules and functions INIT declares; the rest are reported as rejected and
are never callable. Reply READY, or FATAL and exit 1. Then serve CALLs until
SHUTDOWN or end of stream (exit 0). A malformed or out-of-order frame from
the host is exit 2: the worker trusts nothing it did not check either.

While a CALL runs, the plugin's ``ctx`` (:mod:`caplet._sandbox._context`)
sends CONTEXT_REQUEST frames on the same channel and reads the host's
answer before the call continues (:class:`_Channel`). A function whose
first positional parameter is named ``ctx`` gets the context as its first
argument (bound once, when it is registered); the caller's arguments, and
the manifest's ``args`` schema, never see it.

This module runs in every worker, so it imports only the standard library,
msgpack (through the protocol) and the sandbox's protocol, context, error
and guest-runner modules; ``caplet/__init__.py`` is lazy (PEP 562), so importing it does not
pull in the host's dependencies.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import os
import socket
import sys
import threading
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, assert_never

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
from caplet._sandbox._protocol import (
    HEADER_BYTES,
    Call,
    ContextFailure,
    ContextOp,
    ContextReply,
    Init,
    Shutdown,
    WireValue,
    encode_context_request,
    encode_error,
    encode_fatal,
    encode_init,
    encode_ready,
    encode_result,
)
from caplet._sandbox._protocol_decode import (
    decode_host_message,
)

__all__ = [
    "EXIT_LOAD_FAILED",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "PLUGIN_PACKAGE",
    "main",
    "wants_context",
    "warm_up",
]

#: SHUTDOWN, or the host closed the channel.
EXIT_OK = 0
#: The plugin could not be loaded (FATAL was sent).
EXIT_LOAD_FAILED = 1
#: Bad command line, or a malformed / unexpected frame from the host.
EXIT_PROTOCOL = 2

#: The package the snapshot is imported as.
PLUGIN_PACKAGE = "caplet_plugin"

# Messages coming from plugin code are cut to this many characters: enough to
# read, small enough that a hostile exception message costs nothing.
_MAX_MESSAGE_CHARS = 4096
_MAX_TYPE_CHARS = 200

_Function = Callable[..., object]


@dataclass(frozen=True, slots=True)
class _Loaded:
    """A loaded plugin: the dispatch table and what was rejected."""

    table: Mapping[str, Mapping[str, _Function]]
    rejected: tuple[str, ...]


class _LoadError(Exception):
    """The plugin cannot be loaded; the message is sent as FATAL."""


class _Channel:
    """The worker's end of the socket, shared by the serve loop and ``ctx``.

    Implements :class:`~caplet._sandbox._context.ContextTransport`. One lock
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


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"


def _describe_exception(exc: BaseException) -> tuple[str, str]:
    """(type name, message) of a plugin exception, both bounded, never raising."""
    exc_type = _truncate(type(exc).__name__, _MAX_TYPE_CHARS)
    try:
        message = str(exc)
    except Exception:  # a hostile __str__ must not take the worker down
        message = f"<unprintable {exc_type}>"
    return exc_type, _truncate(message, _MAX_MESSAGE_CHARS)


def _complain(text: str) -> None:
    """Explain an exit on stderr (the host's private log of this worker)."""
    try:
        sys.stderr.write(f"caplet worker: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed or replaced
        pass


def _print_traceback() -> None:
    """Put the full traceback in the worker's log; only the summary crosses."""
    import contextlib
    import traceback  # only on this error path: keeps worker start-up lean

    with contextlib.suppress(Exception):  # stderr closed or replaced by the plugin
        traceback.print_exc()


def _entry_parts(entry: str) -> tuple[str, ...]:
    """``"sub/plugin.py"`` -> ``("sub", "plugin")``; _LoadError if it escapes.

    Plain string work rather than pathlib: this runs in every worker, and
    pathlib's import is not free.
    """
    parts = entry.split("/")
    if (
        not entry.endswith(".py")
        or entry.startswith("/")
        or "\\" in entry
        or "\0" in entry
        or any(part in ("", ".", "..") for part in parts)
        or parts[-1] == ".py"
    ):
        raise _LoadError(
            f"entry {entry!r} must be a relative path to a .py file inside the plugin "
            "(for example 'plugin.py')"
        )
    *packages, leaf = parts
    for part in packages:
        if not part.isidentifier():
            raise _LoadError(f"entry {entry!r}: directory {part!r} is not a Python package name")
    return (*packages, leaf[: -len(".py")])


def _no_zip_imports() -> None:
    """Import only from directories: drop ``zipimport`` from the path hooks.

    The static scan reads a plugin's ``.py`` files; a zip archive in the
    plugin (any name: zipimport finds a zip by its trailing directory) put on
    ``sys.path`` would import code it never read: `import ctypes` inside
    ``lib.zip`` passed the danger gate that way. Code that puts the hook back
    names ``zipimport``, ``sys.path_hooks`` or ``sys.meta_path``, which the
    scanner refuses (CPL-DYN-002).

    The importer cache loses only its zip importers: a path the hook
    served then finds no importer. A directory's finder stays cached;
    clearing them all (as first done) made the plugin's imports list every
    directory on ``sys.path`` again and free the zygote's cached listings,
    copy-on-write faults included: ~0.3 ms of every worker start.
    """
    import zipimport

    sys.path_hooks[:] = [hook for hook in sys.path_hooks if hook is not zipimport.zipimporter]
    cache = sys.path_importer_cache
    for path, finder in list(cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del cache[path]


def _import_entry(snapshot: str, entry: str) -> object:
    """Import the entry file as ``caplet_plugin.<stem>`` from the snapshot."""
    parts = _entry_parts(entry)
    # os.path rather than pathlib: see _entry_parts.
    path = os.path.join(snapshot, entry)  # noqa: PTH118
    if not os.path.isfile(path):  # noqa: PTH113
        raise _LoadError(f"entry file {entry} not found in the plugin snapshot {snapshot}")
    _no_zip_imports()
    sys.path.insert(0, snapshot)
    package_spec = importlib.machinery.ModuleSpec(PLUGIN_PACKAGE, None, is_package=True)
    package_spec.submodule_search_locations = [snapshot]
    sys.modules[PLUGIN_PACKAGE] = importlib.util.module_from_spec(package_spec)
    name = PLUGIN_PACKAGE
    for package in parts[:-1]:
        name = f"{name}.{package}"
        importlib.import_module(name)
    name = f"{name}.{parts[-1]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise _LoadError(f"entry file {entry} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _shape(result: object, entry: str) -> dict[str, dict[str, _Function]]:
    """Check ``create_functions``' result is {str: {str: callable}}; copy it."""
    expected = "expected a dict mapping module names to dicts of function name -> callable"
    where = f"create_functions in {entry}"
    if not isinstance(result, Mapping):
        raise _LoadError(f"{where} returned {type(result).__name__}, {expected}")
    shaped: dict[str, dict[str, _Function]] = {}
    for module, functions in result.items():
        if not isinstance(module, str):
            raise _LoadError(
                f"{where} returned a module name of type {type(module).__name__}, {expected}"
            )
        if not isinstance(functions, Mapping):
            raise _LoadError(
                f"{where} returned {type(functions).__name__} for module {module!r}, {expected}"
            )
        table: dict[str, _Function] = {}
        for name, function in functions.items():
            if not isinstance(name, str):
                raise _LoadError(
                    f"{where} returned a function name of type {type(name).__name__} "
                    f"in module {module!r}, {expected}"
                )
            if not callable(function):
                raise _LoadError(
                    f"{where} returned {type(function).__name__} for {module}.{name}, "
                    "which is not callable"
                )
            table[name] = function
        shaped[module] = table
    return shaped


def wants_context(function: object) -> bool:
    """True when ``function``'s first positional parameter is named ``ctx``.

    The rule (docs/architecture.md, "the plugin context"): a plain function
    or lambda whose first positional parameter is ``ctx``, or a bound method
    whose first one after ``self`` is. Read from the code object, without
    ``inspect`` (an import every worker would pay for); anything else (a
    ``functools.partial``, a callable object) gets no ``ctx`` argument and
    uses ``caplet.plugin.context()``.
    """
    try:
        skip = 1 if isinstance(function, types.MethodType) else 0
        code = getattr(function, "__code__", None)
        if not isinstance(code, types.CodeType):
            return False
        return code.co_argcount > skip and code.co_varnames[skip] == "ctx"
    except Exception:  # a hostile __getattr__ on a callable object
        return False


def _register(
    provided: Mapping[str, Mapping[str, _Function]],
    declared: Mapping[str, tuple[str, ...]],
    context: PluginContext | None = None,
) -> _Loaded:
    """Keep only declared modules and functions (design.md section 4, layer 11).

    With a ``context``, functions that take ``ctx`` first get it bound here,
    once, so the call path stays one plain call.
    """
    table: dict[str, dict[str, _Function]] = {}
    rejected: list[str] = []
    for module, functions in provided.items():
        allowed = declared.get(module)
        if allowed is None:
            rejected.append(module)
            continue
        for name, function in functions.items():
            if name in allowed:
                bound = (
                    functools.partial(function, context)
                    if context is not None and wants_context(function)
                    else function
                )
                table.setdefault(module, {})[name] = bound
            else:
                rejected.append(f"{module}.{name}")
    return _Loaded(table, tuple(rejected))


def _load(init: Init, context: PluginContext | None = None) -> _Loaded:
    """Import the plugin and call ``create_functions``; _LoadError on failure."""
    try:
        module = _import_entry(init.snapshot, init.entry)
    except _LoadError:
        raise
    except BaseException as exc:  # SystemExit at import time is a load failure too
        _print_traceback()
        exc_type, message = _describe_exception(exc)
        raise _LoadError(f"{exc_type}: {message} (while importing {init.entry})") from None
    create = getattr(module, "create_functions", None)
    if not callable(create):
        raise _LoadError(
            f"{init.entry} does not define create_functions(config); add it and return "
            "{module: {function: callable}}"
        )
    try:
        made = create(dict(init.config))
        if hasattr(type(made), "__await__"):
            made = _awaited(made)
        provided = _shape(made, init.entry)
    except _LoadError:
        raise
    except BaseException as exc:
        _print_traceback()
        exc_type, message = _describe_exception(exc)
        raise _LoadError(f"{exc_type}: {message} (in create_functions)") from None
    return _register(provided, init.modules, context)


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


class _Loop:
    """The worker's own event loop, made at the first ``async def`` a plugin returns."""

    runner: Any = None


def _awaited(value: object) -> object:
    """Run an awaitable a plugin function (or ``create_functions``) returned to completion.

    ``async def`` functions and hooks run on one event loop per worker (an
    ``asyncio.Runner``, kept across calls, so a client the plugin made on it
    stays usable), in the thread that serves the call: ``ctx`` works from
    them as from any function of the call, and the call ends when the
    coroutine does. asyncio is imported only then (its import is not free,
    and most plugins never need it); the seccomp allowlist has what its loop
    needs (docs/architecture.md). What the coroutine leaves running is not
    awaited: it runs only while a later call runs the loop again.
    """
    if _Loop.runner is None:
        import asyncio

        _Loop.runner = asyncio.Runner()

    async def wait() -> object:
        return await value  # type: ignore[misc]

    return _Loop.runner.run(wait())


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
        # (_jail_fs.copy_grant): ~0.2 ms of first-touch faults of its own. Both
        # modules are the zygote's already; a plain worker never warms up.
        from caplet._sandbox._jail_fs import copy_hash

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
