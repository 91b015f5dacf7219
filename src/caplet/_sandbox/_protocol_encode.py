"""The protocol's encoder: one message to one frame, arguments checked first.

Every ``encode_*`` builds the msgpack array of one message kind
(:mod:`caplet._sandbox._protocol` has the layout and the value rule), checks
what it is given (a value that cannot cross, a name over the text cap, a
request id out of range: :class:`~caplet._errors.ProtocolError`, naming
which) and frames it with its 4-byte length. The decoder is
:mod:`caplet._sandbox._protocol_decode`.

Runs inside every worker, so it imports only the standard library, msgpack
and the protocol's own modules.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import msgpack

from caplet._errors import ProtocolError
from caplet._sandbox._protocol import (
    ALLOWED_VALUES,
    CALL,
    CONTEXT_ERROR,
    CONTEXT_ERROR_NAMES,
    CONTEXT_REPLY,
    CONTEXT_REQUEST,
    DEFAULT_MAX_FRAME_BYTES,
    ERROR,
    FATAL,
    HEADER,
    INIT,
    MAX_HEADER_LENGTH,
    MAX_REQUEST_ID,
    MAX_TEXT_CHARS,
    PLAIN,
    READY,
    RESULT,
    SHUTDOWN,
    ContextGrants,
    ContextOp,
    UnsendableError,
    WireValue,
    _checked,
    check_nested,
    check_value,
    short_text,
    small_int,
)

__all__ = [
    "encode_call",
    "encode_context_error",
    "encode_context_reply",
    "encode_context_request",
    "encode_error",
    "encode_fatal",
    "encode_init",
    "encode_ready",
    "encode_result",
    "encode_shutdown",
]


def _text_arg(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{what} must be a str, got {type(value).__name__}")
    if len(value) > MAX_TEXT_CHARS:
        raise ProtocolError(f"{what} is {len(value)} characters, over the cap of {MAX_TEXT_CHARS}")
    return value


def _request_id_arg(request_id: object) -> int:
    if (
        not isinstance(request_id, int)
        or isinstance(request_id, bool)
        or not 0 <= request_id <= MAX_REQUEST_ID
    ):
        raise ProtocolError(f"request id must be an int in 0..2**63-1, got {request_id!r}")
    return request_id


_packers = threading.local()


def _frame(message: list[object]) -> bytes:
    # One Packer per thread: creating one per message (what packb does)
    # costs more than the packing itself, and a Packer is not thread-safe.
    try:
        packer = _packers.packer
    except AttributeError:
        packer = _packers.packer = msgpack.Packer()
    try:
        payload: bytes = packer.pack(message)
    except (TypeError, ValueError, OverflowError) as exc:  # pragma: no cover - values are checked
        raise ProtocolError(f"cannot encode message: {exc}") from exc
    if len(payload) > MAX_HEADER_LENGTH:
        raise ProtocolError(f"message of {len(payload)} bytes cannot be framed (4 GiB maximum)")
    return HEADER.pack(len(payload)) + payload


def encode_init(
    request_id: int,
    *,
    plugin: str,
    entry: str,
    snapshot: str,
    config: Mapping[str, WireValue],
    modules: Mapping[str, Sequence[str]],
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    env: Mapping[str, str] | None = None,
    context: ContextGrants | None = None,
) -> bytes:
    """The INIT frame (header included)."""
    grants = context if context is not None else ContextGrants()
    wire_context = {
        "http": bool(grants.http),
        "apps": [_text_arg(name, "app capability name") for name in grants.apps],
        "modules": [_text_arg(name, "host.call module") for name in grants.modules],
    }
    wire_env = {
        _text_arg(k, "environment variable name"): _text_arg(v, f"value of {k}")
        for k, v in (env or {}).items()
    }
    config_dict = dict(config)
    _checked(config_dict, "config")
    wire_modules: dict[str, list[str]] = {}
    for module, functions in modules.items():
        _text_arg(module, "module name")
        wire_modules[module] = [
            _text_arg(f, f"function name in module {module!r}") for f in functions
        ]
    if (
        not isinstance(max_frame_bytes, int)
        or isinstance(max_frame_bytes, bool)
        or not 0 < max_frame_bytes <= MAX_HEADER_LENGTH
    ):
        raise ProtocolError(
            f"max_frame_bytes must be an int in 1..2**32-1, got {max_frame_bytes!r}"
        )
    body = {
        "plugin": _text_arg(plugin, "plugin name"),
        "entry": _text_arg(entry, "entry"),
        "snapshot": _text_arg(snapshot, "snapshot"),
        "config": config_dict,
        "modules": wire_modules,
        "max_frame_bytes": max_frame_bytes,
        "env": wire_env,
        "context": wire_context,
    }
    return _frame([INIT, _request_id_arg(request_id), body])


def encode_call(
    request_id: int,
    module: str,
    function: str,
    args: Sequence[WireValue],
    kwargs: Mapping[str, WireValue],
) -> bytes:
    """The CALL frame; ProtocolError names the argument that cannot cross."""
    if type(args) is not tuple and not isinstance(args, (list, tuple)):
        raise ProtocolError(f"args must be a list or tuple, got {type(args).__name__}")
    if type(kwargs) is not dict:
        if not isinstance(kwargs, Mapping):
            raise ProtocolError(f"kwargs must be a mapping, got {type(kwargs).__name__}")
        kwargs = dict(kwargs)
    # Flat arguments of plain types (the common case) need no recursive walk;
    # plain loops, not all() over a generator: this runs on every call.
    for arg in args:
        if type(arg) not in PLAIN and not small_int(arg):
            _checked(args, "args")
            break
    for key, arg in kwargs.items():
        if type(key) is not str or (type(arg) not in PLAIN and not small_int(arg)):
            _checked(kwargs, "kwargs")
            break
    # The checks are inlined for the common case; the helpers raise.
    if type(request_id) is not int or not 0 <= request_id <= MAX_REQUEST_ID:
        _request_id_arg(request_id)
    if type(module) is not str or len(module) > MAX_TEXT_CHARS:
        _text_arg(module, "module name")
    if type(function) is not str or len(function) > MAX_TEXT_CHARS:
        _text_arg(function, "function name")
    return _frame([CALL, request_id, module, function, args, kwargs])


def encode_shutdown(request_id: int) -> bytes:
    """The SHUTDOWN frame."""
    return _frame([SHUTDOWN, _request_id_arg(request_id)])


def encode_ready(
    request_id: int, registered: Mapping[str, Sequence[str]], rejected: Sequence[str]
) -> bytes:
    """The READY frame."""
    table = {
        _text_arg(module, "module name"): [_text_arg(f, "function name") for f in functions]
        for module, functions in registered.items()
    }
    names = [_text_arg(name, "rejected name") for name in rejected]
    return _frame([READY, _request_id_arg(request_id), table, names])


def encode_result(request_id: int, value: WireValue, *, origin: str = "the function") -> bytes:
    """The RESULT frame, or ProtocolError when ``value`` cannot cross.

    The message reads "<origin> returned a value of type set that cannot
    cross the boundary (...)"; the worker sends it back as an ERROR. The
    frame-size limit is the caller's to check (it knows the limit).
    """
    if type(request_id) is not int or not 0 <= request_id <= MAX_REQUEST_ID:
        _request_id_arg(request_id)
    if type(value) not in PLAIN:
        try:
            check_nested(value, 0)
        except UnsendableError as exc:
            where = exc.where()
            at = f" (at {where})" if where else ""
            raise ProtocolError(
                f"{origin} returned {exc.reason}{at} that cannot cross the boundary "
                f"({ALLOWED_VALUES})"
            ) from None
    return _frame([RESULT, request_id, value])


def encode_error(request_id: int, exc_type: str, message: str) -> bytes:
    """The ERROR frame."""
    return _frame(
        [
            ERROR,
            _request_id_arg(request_id),
            _text_arg(exc_type, "exception type"),
            _text_arg(message, "error message"),
        ]
    )


def encode_fatal(request_id: int, message: str) -> bytes:
    """The FATAL frame."""
    return _frame([FATAL, _request_id_arg(request_id), _text_arg(message, "fatal message")])


def encode_context_request(
    request_id: int, call_id: int, op: ContextOp, args: Mapping[str, WireValue]
) -> bytes:
    """The CONTEXT_REQUEST frame; ProtocolError names an argument that cannot cross."""
    if not isinstance(op, ContextOp):
        raise ProtocolError(f"op must be a ContextOp, got {type(op).__name__}")
    body = dict(args)
    _checked(body, "arguments")
    return _frame(
        [CONTEXT_REQUEST, _request_id_arg(request_id), _request_id_arg(call_id), op.value, body]
    )


def encode_context_reply(request_id: int, value: WireValue) -> bytes:
    """The CONTEXT_REPLY frame; ProtocolError when ``value`` cannot cross."""
    check_value(value, "the ctx reply")
    return _frame([CONTEXT_REPLY, _request_id_arg(request_id), value])


def encode_context_error(request_id: int, error: str, category: str, message: str) -> bytes:
    """The CONTEXT_ERROR frame; ``error`` outside :data:`CONTEXT_ERROR_NAMES` is sent as
    ``ContextError`` and an over-long message is cut (it comes from a handler)."""
    name = error if error in CONTEXT_ERROR_NAMES else "ContextError"
    return _frame(
        [
            CONTEXT_ERROR,
            _request_id_arg(request_id),
            name,
            _text_arg(short_text(category, 200), "error category"),
            _text_arg(short_text(message, MAX_TEXT_CHARS), "error message"),
        ]
    )
