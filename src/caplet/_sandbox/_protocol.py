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
import struct
import threading
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
    "GRANT_KEYS",
    "HEADER",
    "HEADER_BYTES",
    "INIT",
    "INIT_KEYS",
    "MAX_DEPTH",
    "MAX_HEADER_LENGTH",
    "MAX_REQUEST_ID",
    "MAX_TEXT_CHARS",
    "OPS",
    "PLAIN",
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
    "HostMessage",
    "Init",
    "Ready",
    "Result",
    "Shutdown",
    "UnsendableError",
    "WireValue",
    "WorkerMessage",
    "check_nested",
    "check_value",
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
    "new_tuple",
    "short_text",
    "small_int",
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

HEADER = struct.Struct(">I")
MAX_HEADER_LENGTH = 0xFFFFFFFF
# msgpack's integer range: int64 minimum to uint64 maximum.
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
MAX_REQUEST_ID = 2**63 - 1
# Exact types that cross as they are (bool is not an int here: it is final).
PLAIN: frozenset[type] = frozenset({str, bytes, float, bool, type(None)})
INIT_KEYS = frozenset(
    {"plugin", "entry", "snapshot", "config", "modules", "max_frame_bytes", "env", "context"}
)
GRANT_KEYS = frozenset({"http", "apps", "modules"})


#: ``tuple.__new__(Result, (id, value))`` builds a NamedTuple without running its
#: Python-level ``__new__`` (half the cost); used on the two hot paths only.
new_tuple = tuple.__new__


def small_int(value: object) -> bool:
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


OPS: Final = {op.value: op for op in ContextOp}


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


class UnsendableError(Exception):
    """A value that cannot cross; ``path`` is collected innermost first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    def where(self) -> str:
        return "".join(reversed(self.path))


def short_text(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_nested(value: object, depth: int) -> None:
    """Raise :class:`UnsendableError` unless ``value`` may cross the boundary.

    Written by hand rather than left to msgpack: msgpack would happily pack
    int or bytes dict keys and nesting hundreds of levels deep, and raise
    TypeError/OverflowError for the rest; this walk gives one rule for both
    directions and a message that says where the bad value is. It is on the
    call path, so the common case (an exact scalar type) is one set lookup.
    """
    if type(value) in PLAIN:
        return
    if type(value) is int and _INT_MIN <= value <= _INT_MAX:
        return
    if isinstance(value, int):  # int subclasses, and the out-of-range error
        if _INT_MIN <= value <= _INT_MAX:
            return
        raise UnsendableError("an int outside the 64-bit range")
    # msgpack.ExtType is a namedtuple that msgpack packs as an extension, not
    # an array: it is the one tuple that must not cross.
    if isinstance(value, (list, tuple)) and not isinstance(value, msgpack.ExtType):
        if depth >= MAX_DEPTH:
            raise UnsendableError(f"containers nested deeper than {MAX_DEPTH} levels")
        for index, item in enumerate(value):
            if type(item) in PLAIN or (type(item) is int and _INT_MIN <= item <= _INT_MAX):
                continue
            try:
                check_nested(item, depth + 1)
            except UnsendableError as exc:
                exc.path.append(f"[{index}]")
                raise
        return
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise UnsendableError(f"containers nested deeper than {MAX_DEPTH} levels")
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise UnsendableError(f"a dict key of type {type(key).__name__}")
            if type(item) in PLAIN or (type(item) is int and _INT_MIN <= item <= _INT_MAX):
                continue
            try:
                check_nested(item, depth + 1)
            except UnsendableError as exc:
                exc.path.append(f"[{short_text(repr(key))}]")
                raise
        return
    if isinstance(value, (str, bytes, float)):  # subclasses of the plain types
        return
    raise UnsendableError(f"a value of type {type(value).__name__}")


def _checked(value: object, root: str) -> None:
    """Check a value about to be encoded; ProtocolError names where it failed."""
    try:
        check_nested(value, 0)
    except UnsendableError as exc:
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
        or not 0 <= request_id <= MAX_REQUEST_ID
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


def check_value(value: object, what: str) -> None:
    """ProtocolError (naming where, under ``what``) unless ``value`` may cross the channel."""
    if type(value) in PLAIN or small_int(value):
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
            _text_arg(short_text(category, 200), "error category"),
            _text_arg(short_text(message, MAX_TEXT_CHARS), "error message"),
        ]
    )
