"""The wire protocol between the host and a worker: length-prefixed msgpack.

Frame
    A 4-byte big-endian unsigned payload length, then that many bytes of
    msgpack. A frame is written with one ``send`` (header and payload in one
    buffer) and a frame whose declared length exceeds the limit
    (:data:`DEFAULT_MAX_FRAME_BYTES`, 8 MiB, unless the host says otherwise
    in INIT) is refused from its header, before any payload is read.

Messages
    Every payload is a msgpack array ``[kind, request_id, ...]``; ``kind`` is
    one of the integers below, ``request_id`` a non-negative int the reply
    repeats.

    Host -> worker:

    - INIT ``[0, id, {"plugin": str, "entry": str, "snapshot": str,
      "config": {str: value}, "modules": {str: [str, ...]},
      "max_frame_bytes": int, "env": {str: str}, "context": {"http": bool,
      "apps": [str, ...], "modules": [str, ...]}}]`` -- exactly these keys;
      the first frame. ``context`` says which optional ``ctx`` attributes
      the plugin gets (:class:`ContextGrants`).
    - CALL ``[1, id, module: str, function: str, args: [value, ...],
      kwargs: {str: value}]``
    - SHUTDOWN ``[2, id]`` -- no reply; the worker exits 0.
    - CONTEXT_REPLY ``[3, id, value]`` -- the answer to CONTEXT_REQUEST ``id``.
    - CONTEXT_ERROR ``[4, id, error: str, category: str, message: str]`` --
      the request was refused or failed; ``error`` names the
      :class:`~caplet._errors.CapletError` class the worker raises in the
      plugin (one of :data:`CONTEXT_ERROR_NAMES`).

    Worker -> host:

    - READY ``[10, id, registered: {module: [function, ...]},
      rejected: [str, ...]]`` -- the reply to INIT.
    - RESULT ``[11, id, value]``
    - ERROR ``[12, id, exc_type: str, message: str]`` -- the function raised
      (or its return value could not be sent: ``TypeError`` for a value that
      cannot cross, ``ValueError`` for one over the frame limit).
    - FATAL ``[13, id, message: str]`` -- the reply to INIT when the plugin
      could not be loaded; the worker then exits 1.
    - CONTEXT_REQUEST ``[14, id, call_id: int, op: str, args: {str: value}]``
      -- a ``ctx`` call of the plugin (``op`` is a :class:`ContextOp`
      value), sent only while CALL ``call_id`` is in flight; the host
      answers with CONTEXT_REPLY or CONTEXT_ERROR and the call continues.
      ``id`` is the worker's own counter, echoed in the answer.

Values
    Only None, bool, int (msgpack's 64-bit range), float, str, bytes,
    lists/tuples (received as lists) and dicts with str keys cross, nested at
    most :data:`MAX_DEPTH` containers deep. Names and messages are at most
    :data:`MAX_TEXT_CHARS` characters.

Decoding is the host's defence against a hostile worker (and the worker's
against anything that is not its host): msgpack extension types (including
timestamps) are refused, every length is bounded by the payload size, and
the decoded array is shape-checked into one frozen dataclass per message
kind. Any malformed input raises :class:`~caplet._errors.ProtocolError` and
nothing else.

This module runs inside every worker, so it imports only the standard
library, msgpack and :mod:`caplet._errors`.
"""

from __future__ import annotations

import enum
import math
import select
import socket
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

import msgpack

from caplet._errors import ProtocolError

__all__ = [
    "ALLOWED_VALUES",
    "CALL",
    "CONTEXT_ERROR",
    "CONTEXT_ERROR_NAMES",
    "CONTEXT_REPLY",
    "CONTEXT_REQUEST",
    "DEFAULT_MAX_FRAME_BYTES",
    "ERROR",
    "FATAL",
    "HEADER_BYTES",
    "INIT",
    "MAX_DEPTH",
    "MAX_TEXT_CHARS",
    "READY",
    "RESULT",
    "SHUTDOWN",
    "Call",
    "ContextFailure",
    "ContextGrants",
    "ContextOp",
    "ContextReply",
    "ContextRequest",
    "Error",
    "Fatal",
    "FrameReader",
    "HostMessage",
    "Init",
    "Ready",
    "Result",
    "Shutdown",
    "UnsentFrameError",
    "WireValue",
    "WorkerMessage",
    "check_value",
    "decode_host_message",
    "decode_worker_message",
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
    "send_frame",
]

#: What may cross the channel; checked at run time, see the module docstring.
WireValue = object

DEFAULT_MAX_FRAME_BYTES: Final = 8 * 1024 * 1024
HEADER_BYTES: Final = 4
#: Containers nested deeper than this are refused (bounds recursion on both sides).
MAX_DEPTH: Final = 64
#: Cap on names, exception type names and messages.
MAX_TEXT_CHARS: Final = 64 * 1024
#: The phrase every "cannot cross" message ends with.
ALLOWED_VALUES: Final = "JSON-like values, bytes, lists and dicts with string keys only"

# Message kinds. Plain ints rather than an IntEnum: the decoder compares them
# on every call, and an enum lookup would cost more than the comparison.
INIT: Final = 0
CALL: Final = 1
SHUTDOWN: Final = 2
CONTEXT_REPLY: Final = 3
CONTEXT_ERROR: Final = 4
READY: Final = 10
RESULT: Final = 11
ERROR: Final = 12
FATAL: Final = 13
CONTEXT_REQUEST: Final = 14

#: The exception classes a CONTEXT_ERROR may name (all in caplet._errors): the
#: worker raises exactly these in the plugin, anything else as ContextError.
CONTEXT_ERROR_NAMES: Final = frozenset(
    {
        "AppError",
        "AppHandlerError",
        "BlockedByPolicyError",
        "BrokerError",
        "CallCycleError",
        "ConnectionFailedError",
        "ContextArgumentError",
        "ContextError",
        "ContextLimitError",
        "ContextUnavailableError",
        "DnsError",
        "FetchTimeoutError",
        "HostCallError",
        "InvalidUrlError",
        "NotGrantedError",
        "RateLimitError",
        "RedirectError",
        "ResponseError",
        "SizeLimitError",
        "TlsError",
    }
)

_HEADER = struct.Struct(">I")
_MAX_HEADER_LENGTH = 0xFFFFFFFF
# msgpack's integer range: int64 minimum to uint64 maximum.
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_MAX_REQUEST_ID = 2**63 - 1
# Exact types that cross as they are (bool is not an int here: it is final).
_PLAIN: frozenset[type] = frozenset({str, bytes, float, bool, type(None)})
_INIT_KEYS = frozenset(
    {"plugin", "entry", "snapshot", "config", "modules", "max_frame_bytes", "env", "context"}
)
_GRANT_KEYS = frozenset({"http", "apps", "modules"})


#: ``tuple.__new__(Result, (id, value))`` builds a NamedTuple without running its
#: Python-level ``__new__`` (half the cost); used on the two hot paths only.
_new_tuple = tuple.__new__


def _small_int(value: object) -> bool:
    """An int (not a bool) msgpack can carry: the fast-path test for flat values."""
    return type(value) is int and _INT_MIN <= value <= _INT_MAX


# -- messages ---------------------------------------------------------------------


class ContextOp(enum.Enum):
    """What a CONTEXT_REQUEST asks the host for (the ``op`` string on the wire).

    A closed set: an op the host does not know is a protocol violation, not
    a request to refuse politely, because the worker's own API never sends one.
    """

    LOG = "log"
    KV_GET = "kv.get"
    KV_SET = "kv.set"
    KV_DELETE = "kv.delete"
    KV_KEYS = "kv.keys"
    HTTP_FETCH = "http.fetch"
    #: The next piece of a fetched body too large for one reply on the channel
    #: (``handle`` and ``offset`` from the answer to HTTP_FETCH; issue 15).
    HTTP_BODY = "http.body"
    APP = "app"
    PLUGINS_CALL = "plugins.call"
    #: A guest snippet calling ``host.<module>.<function>`` (only a guest
    #: worker's handler serves it; a plugin's refuses it).
    GUEST_CALL = "guest.call"


_OPS: Final = {op.value: op for op in ContextOp}


@dataclass(frozen=True, slots=True)
class ContextGrants:
    """The optional ``ctx`` attributes a plugin gets (design.md section 3).

    ``http``: some approved ``net.http`` capability (``ctx.http``); ``apps``:
    the approved ``app:`` names (``ctx.app``); ``modules``: the approved
    ``host.call:`` modules (``ctx.plugins``). ``ctx.log`` and ``ctx.kv`` are
    always there. The worker only uses this to decide which attributes
    exist; the host checks every request against the grants again.
    """

    http: bool = False
    apps: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Init:
    """INIT: load this plugin from this snapshot, registering only ``modules``."""

    request_id: int
    plugin: str
    entry: str
    snapshot: str
    config: Mapping[str, WireValue]
    modules: Mapping[str, tuple[str, ...]]
    max_frame_bytes: int
    #: The approved ``env.read`` variables and their values: the worker's
    #: whole environment.
    env: Mapping[str, str]
    #: Which optional ``ctx`` attributes the plugin gets.
    context: ContextGrants = ContextGrants()


class Call(NamedTuple):
    """CALL: run ``module.function(*args, **kwargs)``.

    CALL and RESULT are typed NamedTuples rather than frozen dataclasses
    because they are built once per call on each side: a frozen slotted
    dataclass costs ~2.7 µs to construct (one object.__setattr__ per field),
    a NamedTuple ~0.3 µs, against a 30 µs round-trip budget. Both are
    immutable records; the other messages stay dataclasses.
    """

    request_id: int
    module: str
    function: str
    args: Sequence[WireValue]
    kwargs: Mapping[str, WireValue]


@dataclass(frozen=True, slots=True)
class Shutdown:
    """SHUTDOWN: exit cleanly; no reply."""

    request_id: int


@dataclass(frozen=True, slots=True)
class Ready:
    """READY: the plugin loaded; what it registered and what was rejected."""

    request_id: int
    registered: Mapping[str, tuple[str, ...]]
    rejected: tuple[str, ...]


class Result(NamedTuple):
    """RESULT: the function's return value (a NamedTuple for speed, see :class:`Call`)."""

    request_id: int
    value: WireValue


@dataclass(frozen=True, slots=True)
class Error:
    """ERROR: the function raised ``exc_type`` with ``message``."""

    request_id: int
    exc_type: str
    message: str


@dataclass(frozen=True, slots=True)
class Fatal:
    """FATAL: the plugin could not be loaded (sent instead of READY)."""

    request_id: int
    message: str


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """CONTEXT_REQUEST: the plugin's ``ctx`` call ``op(**args)`` during CALL ``call_id``."""

    request_id: int
    call_id: int
    op: ContextOp
    args: Mapping[str, WireValue]


@dataclass(frozen=True, slots=True)
class ContextReply:
    """CONTEXT_REPLY: the host's answer to a CONTEXT_REQUEST."""

    request_id: int
    value: WireValue


@dataclass(frozen=True, slots=True)
class ContextFailure:
    """CONTEXT_ERROR: the request was refused or failed; raise ``error`` in the plugin."""

    request_id: int
    error: str
    category: str
    message: str


HostMessage = Init | Call | Shutdown | ContextReply | ContextFailure
WorkerMessage = Ready | Result | Error | Fatal | ContextRequest


# -- values -----------------------------------------------------------------------


class _UnsendableError(Exception):
    """A value that cannot cross; ``path`` is collected innermost first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    def where(self) -> str:
        return "".join(reversed(self.path))


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check(value: object, depth: int) -> None:
    """Raise :class:`_UnsendableError` unless ``value`` may cross the boundary.

    Written by hand rather than left to msgpack: msgpack would happily pack
    int or bytes dict keys and nesting hundreds of levels deep, and raise
    TypeError/OverflowError for the rest; this walk gives one rule for both
    directions and a message that says where the bad value is. It is on the
    call path, so the common case (an exact scalar type) is one set lookup.
    """
    if type(value) in _PLAIN:
        return
    if type(value) is int and _INT_MIN <= value <= _INT_MAX:
        return
    if isinstance(value, int):  # int subclasses, and the out-of-range error
        if _INT_MIN <= value <= _INT_MAX:
            return
        raise _UnsendableError("an int outside the 64-bit range")
    # msgpack.ExtType is a namedtuple that msgpack packs as an extension, not
    # an array: it is the one tuple that must not cross.
    if isinstance(value, (list, tuple)) and not isinstance(value, msgpack.ExtType):
        if depth >= MAX_DEPTH:
            raise _UnsendableError(f"containers nested deeper than {MAX_DEPTH} levels")
        for index, item in enumerate(value):
            if type(item) in _PLAIN or (type(item) is int and _INT_MIN <= item <= _INT_MAX):
                continue
            try:
                _check(item, depth + 1)
            except _UnsendableError as exc:
                exc.path.append(f"[{index}]")
                raise
        return
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise _UnsendableError(f"containers nested deeper than {MAX_DEPTH} levels")
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise _UnsendableError(f"a dict key of type {type(key).__name__}")
            if type(item) in _PLAIN or (type(item) is int and _INT_MIN <= item <= _INT_MAX):
                continue
            try:
                _check(item, depth + 1)
            except _UnsendableError as exc:
                exc.path.append(f"[{_short(repr(key))}]")
                raise
        return
    if isinstance(value, (str, bytes, float)):  # subclasses of the plain types
        return
    raise _UnsendableError(f"a value of type {type(value).__name__}")


def _checked(value: object, root: str) -> None:
    """Check a value about to be encoded; ProtocolError names where it failed."""
    try:
        _check(value, 0)
    except _UnsendableError as exc:
        raise ProtocolError(
            f"{root}{exc.where()} is {exc.reason}, which cannot cross the boundary "
            f"({ALLOWED_VALUES})"
        ) from None


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
        or not 0 <= request_id <= _MAX_REQUEST_ID
    ):
        raise ProtocolError(f"request id must be an int in 0..2**63-1, got {request_id!r}")
    return request_id


# -- encoding ---------------------------------------------------------------------


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
    if len(payload) > _MAX_HEADER_LENGTH:
        raise ProtocolError(f"message of {len(payload)} bytes cannot be framed (4 GiB maximum)")
    return _HEADER.pack(len(payload)) + payload


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
        or not 0 < max_frame_bytes <= _MAX_HEADER_LENGTH
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
        if type(arg) not in _PLAIN and not _small_int(arg):
            _checked(args, "args")
            break
    for key, arg in kwargs.items():
        if type(key) is not str or (type(arg) not in _PLAIN and not _small_int(arg)):
            _checked(kwargs, "kwargs")
            break
    # The checks are inlined for the common case; the helpers raise.
    if type(request_id) is not int or not 0 <= request_id <= _MAX_REQUEST_ID:
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
    if type(request_id) is not int or not 0 <= request_id <= _MAX_REQUEST_ID:
        _request_id_arg(request_id)
    if type(value) not in _PLAIN:
        try:
            _check(value, 0)
        except _UnsendableError as exc:
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


def check_value(value: object, what: str) -> None:
    """ProtocolError (naming where, under ``what``) unless ``value`` may cross the channel."""
    if type(value) in _PLAIN or _small_int(value):
        return
    _checked(value, what)


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
            _text_arg(_short(category, 200), "error category"),
            _text_arg(_short(message, MAX_TEXT_CHARS), "error message"),
        ]
    )


# -- decoding ---------------------------------------------------------------------


def _refuse_extension(code: int, data: bytes) -> object:
    raise ProtocolError(f"msgpack extension type {code} is not allowed")


def _unpack(payload: bytes) -> object:
    try:
        # max_str/bin/array/map_len default to len(payload) in unpackb, so
        # a tiny frame cannot make msgpack preallocate a huge list or map.
        return msgpack.unpackb(
            payload,
            raw=False,
            strict_map_key=True,
            ext_hook=_refuse_extension,
            # 0 refuses every extension, timestamps (type -1) included: those
            # are decoded by msgpack itself and never reach ext_hook.
            max_ext_len=0,
        )
    except ProtocolError:  # from _refuse_extension
        raise
    except Exception as exc:
        # The C unpacker raises ValueError and its subclasses (ExtraData,
        # FormatError, StackError, UnicodeDecodeError), TypeError,
        # MemoryError ... and whatever a hook raises; every one of them means
        # "malformed", and none may escape as anything but ProtocolError.
        if "max_ext_len" in str(exc):  # msgpack's wording for max_ext_len=0
            raise ProtocolError(
                "msgpack extension types (timestamps included) are not allowed"
            ) from exc
        raise ProtocolError(
            f"malformed msgpack ({type(exc).__name__}: {_short(str(exc), 200)})"
        ) from exc


def _kind_and_id(message: object, sender: str) -> tuple[list[object], int, int]:
    if type(message) is not list or len(message) < 2:
        raise ProtocolError(
            f"a message from the {sender} must be an array [kind, request_id, ...], "
            f"got {_describe(message)}"
        )
    kind = message[0]
    if type(kind) is not int:
        raise ProtocolError(f"message kind must be an int, got {type(kind).__name__}")
    request_id = message[1]
    if type(request_id) is not int or not 0 <= request_id <= _MAX_REQUEST_ID:
        raise ProtocolError(f"request id must be an int in 0..2**63-1, got {_describe(request_id)}")
    return message, kind, request_id


def _describe(value: object) -> str:
    if type(value) is list:
        return f"an array of {len(value)}"
    if type(value) is int:
        return str(value)
    return f"a value of type {type(value).__name__}"


def _arity(message: list[object], count: int, name: str) -> None:
    if len(message) != count:
        raise ProtocolError(f"{name} must have {count} elements, got {len(message)}")


def _text(value: object, what: str) -> str:
    if type(value) is not str:
        raise ProtocolError(f"{what} must be a str, got {type(value).__name__}")
    if len(value) > MAX_TEXT_CHARS:
        raise ProtocolError(f"{what} is {len(value)} characters, over the cap of {MAX_TEXT_CHARS}")
    return value


def _names(value: object, what: str) -> tuple[str, ...]:
    if type(value) is not list:
        raise ProtocolError(f"{what} must be an array of str, got {type(value).__name__}")
    return tuple(_text(item, f"an element of {what}") for item in value)


def _name_table(value: object, what: str) -> dict[str, tuple[str, ...]]:
    if type(value) is not dict:
        raise ProtocolError(
            f"{what} must be a map of str to arrays of str, got {type(value).__name__}"
        )
    return {
        _text(key, f"a key of {what}"): _names(item, f"{what}[{_short(repr(key))}]")
        for key, item in value.items()
    }


def _wire(value: object, what: str) -> None:
    try:
        _check(value, 0)
    except _UnsendableError as exc:
        raise ProtocolError(f"{what}{exc.where()} is {exc.reason}, which is not allowed") from None


def _str_map(value: object, what: str) -> dict[str, object]:
    if type(value) is not dict:
        raise ProtocolError(f"{what} must be a map, got {type(value).__name__}")
    if value:
        _wire(value, what)  # also refuses bytes keys, which strict_map_key lets through
    return value


def decode_worker_message(payload: bytes) -> WorkerMessage:
    """Decode one payload sent by a worker (the host's side)."""
    message = _unpack(payload)
    # RESULT is the hot path: checked inline, the helpers explain failures.
    if (
        type(message) is list
        and len(message) == 3
        and message[0] == RESULT
        and type(message[0]) is int
        and type(message[1]) is int
        and 0 <= message[1] <= _MAX_REQUEST_ID
    ):
        value = message[2]
        if type(value) not in _PLAIN:
            _wire(value, "RESULT value")
        return _new_tuple(Result, (message[1], value))
    message, kind, request_id = _kind_and_id(message, "worker")
    if kind == RESULT:
        _arity(message, 3, "RESULT")
        _wire(message[2], "RESULT value")
        return Result(request_id, message[2])
    if kind == ERROR:
        _arity(message, 4, "ERROR")
        return Error(
            request_id,
            _text(message[2], "ERROR exception type"),
            _text(message[3], "ERROR message"),
        )
    if kind == READY:
        _arity(message, 4, "READY")
        return Ready(
            request_id,
            _name_table(message[2], "READY registered"),
            _names(message[3], "READY rejected"),
        )
    if kind == FATAL:
        _arity(message, 3, "FATAL")
        return Fatal(request_id, _text(message[2], "FATAL message"))
    if kind == CONTEXT_REQUEST:
        return _context_request(message, request_id)
    raise ProtocolError(
        f"unknown message kind {kind} from the worker "
        f"(expected READY={READY}, RESULT={RESULT}, ERROR={ERROR}, FATAL={FATAL} "
        f"or CONTEXT_REQUEST={CONTEXT_REQUEST})"
    )


def _context_request(message: list[object], request_id: int) -> ContextRequest:
    _arity(message, 5, "CONTEXT_REQUEST")
    _, _, call_id, op, args = message
    if type(call_id) is not int or not 0 <= call_id <= _MAX_REQUEST_ID:
        raise ProtocolError(
            f"CONTEXT_REQUEST call id must be an int in 0..2**63-1, got {_describe(call_id)}"
        )
    name = _text(op, "CONTEXT_REQUEST op")
    known = _OPS.get(name)
    if known is None:
        raise ProtocolError(
            f"unknown ctx op {_short(repr(name))} (expected one of {', '.join(sorted(_OPS))})"
        )
    return ContextRequest(request_id, call_id, known, _str_map(args, "CONTEXT_REQUEST args"))


def _call(message: list[object], request_id: int) -> Call:
    _arity(message, 6, "CALL")
    _, _, module, function, args, kwargs = message
    if type(module) is not str or len(module) > MAX_TEXT_CHARS:
        module = _text(module, "CALL module")
    if type(function) is not str or len(function) > MAX_TEXT_CHARS:
        function = _text(function, "CALL function")
    if type(args) is not list:
        raise ProtocolError(f"CALL args must be an array, got {type(args).__name__}")
    if args and not all(type(a) in _PLAIN or _small_int(a) for a in args):
        _wire(args, "CALL args")
    if type(kwargs) is not dict:
        raise ProtocolError(f"CALL kwargs must be a map, got {type(kwargs).__name__}")
    if kwargs and not all(
        type(k) is str and (type(v) in _PLAIN or _small_int(v)) for k, v in kwargs.items()
    ):
        _wire(kwargs, "CALL kwargs")  # also refuses bytes keys, which msgpack lets through
    return Call(request_id, module, function, args, kwargs)


def decode_host_message(payload: bytes) -> HostMessage:
    """Decode one payload sent by the host (the worker's side)."""
    message = _unpack(payload)
    # CALL is the hot path: checked inline, the helpers explain failures.
    if type(message) is list and len(message) == 6 and type(message[0]) is int:
        _, request_id, module, function, args, kwargs = message
        if (
            message[0] == CALL
            and type(request_id) is int
            and 0 <= request_id <= _MAX_REQUEST_ID
            and type(module) is str
            and len(module) <= MAX_TEXT_CHARS
            and type(function) is str
            and len(function) <= MAX_TEXT_CHARS
            and type(args) is list
            and type(kwargs) is dict
        ):
            for arg in args:
                if type(arg) not in _PLAIN and not _small_int(arg):
                    _wire(args, "CALL args")
                    break
            for key, arg in kwargs.items():
                if type(key) is not str or (type(arg) not in _PLAIN and not _small_int(arg)):
                    _wire(kwargs, "CALL kwargs")  # also refuses bytes keys
                    break
            return _new_tuple(Call, (request_id, module, function, args, kwargs))
    message, kind, request_id = _kind_and_id(message, "host")
    if kind == CALL:
        return _call(message, request_id)
    if kind == SHUTDOWN:
        _arity(message, 2, "SHUTDOWN")
        return Shutdown(request_id)
    if kind == CONTEXT_REPLY:
        _arity(message, 3, "CONTEXT_REPLY")
        _wire(message[2], "CONTEXT_REPLY value")
        return ContextReply(request_id, message[2])
    if kind == CONTEXT_ERROR:
        _arity(message, 5, "CONTEXT_ERROR")
        error = _text(message[2], "CONTEXT_ERROR error")
        if error not in CONTEXT_ERROR_NAMES:
            raise ProtocolError(f"CONTEXT_ERROR names an unknown error {_short(repr(error))}")
        return ContextFailure(
            request_id,
            error,
            _text(message[3], "CONTEXT_ERROR category"),
            _text(message[4], "CONTEXT_ERROR message"),
        )
    if kind == INIT:
        _arity(message, 3, "INIT")
        return _init(message[2], request_id)
    raise ProtocolError(
        f"unknown message kind {kind} from the host "
        f"(expected INIT={INIT}, CALL={CALL}, SHUTDOWN={SHUTDOWN}, "
        f"CONTEXT_REPLY={CONTEXT_REPLY} or CONTEXT_ERROR={CONTEXT_ERROR})"
    )


def _init(body: object, request_id: int) -> Init:
    if type(body) is not dict:
        raise ProtocolError(f"INIT body must be a map, got {type(body).__name__}")
    keys = set(body)
    if keys != _INIT_KEYS:
        missing = sorted(_INIT_KEYS - keys)
        extra = sorted(_short(repr(k)) for k in keys - _INIT_KEYS)
        raise ProtocolError(f"INIT body keys are wrong (missing: {missing}, unexpected: {extra})")
    max_frame_bytes = body["max_frame_bytes"]
    if type(max_frame_bytes) is not int or not 0 < max_frame_bytes <= _MAX_HEADER_LENGTH:
        raise ProtocolError(
            f"INIT max_frame_bytes must be an int in 1..2**32-1, got {_describe(max_frame_bytes)}"
        )
    return Init(
        request_id,
        _text(body["plugin"], "INIT plugin"),
        _text(body["entry"], "INIT entry"),
        _text(body["snapshot"], "INIT snapshot"),
        _str_map(body["config"], "INIT config"),
        _name_table(body["modules"], "INIT modules"),
        max_frame_bytes,
        _env(body["env"]),
        _grants(body["context"]),
    )


def _grants(value: object) -> ContextGrants:
    if type(value) is not dict:
        raise ProtocolError(f"INIT context must be a map, got {_describe(value)}")
    if set(value) != _GRANT_KEYS:
        raise ProtocolError(
            f"INIT context keys must be {sorted(_GRANT_KEYS)}, got "
            f"{sorted(_short(repr(k)) for k in value)}"
        )
    http = value["http"]
    if type(http) is not bool:
        raise ProtocolError(f"INIT context http must be a bool, got {_describe(http)}")
    return ContextGrants(
        http,
        _names(value["apps"], "INIT context apps"),
        _names(value["modules"], "INIT context modules"),
    )


def _env(value: object) -> Mapping[str, str]:
    if type(value) is not dict:
        raise ProtocolError(f"INIT env must be a map, got {_describe(value)}")
    return {_text(k, "INIT env name"): _text(v, "INIT env value") for k, v in value.items()}


# -- the socket side --------------------------------------------------------------


# MSG_NOSIGNAL (send(2)): a peer that has gone away is EPIPE, never SIGPIPE,
# even in a host application that restored SIGPIPE's default action.
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)


# poll(2) takes a C int of milliseconds; longer waits (or an infinite
# deadline) are cut to this and simply poll again.
_MAX_POLL_MS = 2**31 - 1


def _poll_ms(deadline: float) -> int:
    remaining_ms = (deadline - time.monotonic()) * 1000
    if remaining_ms <= 0:
        raise TimeoutError("deadline exceeded")
    return _MAX_POLL_MS if remaining_ms >= _MAX_POLL_MS else math.ceil(remaining_ms)


class UnsentFrameError(BrokenPipeError):
    """The peer was gone before any byte of the frame was sent (EPIPE or
    ECONNRESET on the first send): the peer cannot have acted on it."""


def send_frame(sock: socket.socket, frame: bytes, deadline: float | None) -> None:
    """Write a whole frame, normally with a single ``send``.

    On a non-blocking socket a full buffer waits in ``poll`` until
    ``deadline`` (``time.monotonic()`` seconds), then raises TimeoutError, so
    a peer that stops reading cannot hang the writer. ``deadline=None`` waits
    for ever. OSError (EPIPE, ECONNRESET) propagates: the peer is gone; when
    not a byte went out, as :class:`UnsentFrameError` (a BrokenPipeError).
    """
    try:
        sent = sock.send(frame, _SEND_FLAGS)
    except BlockingIOError:
        sent = 0
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise UnsentFrameError(exc.errno, exc.strerror) from exc
    if sent == len(frame):
        return
    view = memoryview(frame)
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    while sent < len(frame):
        if deadline is None:
            poller.poll()
        elif not poller.poll(_poll_ms(deadline)):
            continue  # the next _poll_ms raises once the deadline has passed
        try:
            sent += sock.send(view[sent:], _SEND_FLAGS)
        except BlockingIOError:
            continue


class FrameReader:
    """Reads whole frames from a stream socket through one reusable buffer.

    Small frames are parsed out of a preallocated ``bytearray`` filled with
    ``recv_into`` (several frames may arrive in one read); a frame larger than
    the buffer gets its own exact-size buffer so nothing past it is consumed.
    ``max_frame_bytes`` may be changed between reads (the worker learns it
    from INIT).
    """

    __slots__ = ("_buffer", "_end", "_poller", "_sock", "_start", "_view", "max_frame_bytes")

    def __init__(
        self,
        sock: socket.socket,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        buffer_bytes: int = 64 * 1024,
    ) -> None:
        self._sock = sock
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray(max(buffer_bytes, HEADER_BYTES))
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)

    def read_frame(self, deadline: float | None) -> bytes | None:
        """The next frame's payload, or None at end of stream.

        ``deadline`` is a ``time.monotonic()`` instant; past it, TimeoutError.
        A timeout in the middle of a frame leaves the stream position
        undefined, so callers give up on the peer (the host kills the
        worker). None waits for ever (the worker waiting for its next call).
        A declared length over ``max_frame_bytes`` raises ProtocolError
        before the payload is read. End of stream in the middle
        of a frame is also None: the peer is gone either way, and the caller
        learns why from the process, not from the stream.
        """
        while True:
            available = self._end - self._start
            if available >= HEADER_BYTES:
                (length,) = _HEADER.unpack_from(self._buffer, self._start)
                if length > self.max_frame_bytes:
                    raise ProtocolError(
                        f"frame of {length} bytes exceeds the limit of {self.max_frame_bytes} bytes"
                    )
                total = HEADER_BYTES + length
                if available >= total:
                    begin = self._start + HEADER_BYTES
                    payload = self._view[begin : begin + length].tobytes()
                    self._start += total
                    if self._start == self._end:
                        self._start = self._end = 0
                    return payload
                if total > len(self._buffer):
                    return self._read_large(length, deadline)
                if self._start + total > len(self._buffer):
                    self._compact()
            elif self._start and len(self._buffer) - self._start < HEADER_BYTES:
                self._compact()
            target = self._view if self._end == 0 else self._view[self._end :]
            received = self._receive(target, deadline)
            if received == 0:
                return None
            self._end += received

    def _compact(self) -> None:
        available = self._end - self._start
        self._buffer[:available] = self._buffer[self._start : self._end]
        self._start = 0
        self._end = available

    def _read_large(self, length: int, deadline: float | None) -> bytes | None:
        payload = bytearray(length)
        view = memoryview(payload)
        have = self._end - self._start - HEADER_BYTES
        begin = self._start + HEADER_BYTES
        view[:have] = self._view[begin : self._end]
        self._start = self._end = 0
        while have < length:
            received = self._receive(view[have:], deadline)
            if received == 0:
                return None
            have += received
        return bytes(payload)

    def _receive(self, target: memoryview, deadline: float | None) -> int:
        while True:
            if deadline is not None and not self._poller.poll(_poll_ms(deadline)):
                continue  # the next _poll_ms raises once the deadline has passed
            try:
                return self._sock.recv_into(target)
            except BlockingIOError:
                if deadline is None:
                    self._poller.poll()
