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

This module has the message types and the value rule; the encoder is
:mod:`caplet._sandbox._protocol_encode`, the decoder
:mod:`caplet._sandbox._protocol_decode`. It runs inside every worker, so it
imports only the standard library, msgpack and :mod:`caplet._errors`.
"""

from __future__ import annotations

import enum
import struct
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
    "crossing",
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


def crossing(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (a file name that is not UTF-8,
    decoded with surrogateescape, in a message or in what guest code printed) written
    as its escape (``\\udce9``). Meant for text caplet writes about a value, never for
    the value itself, which must cross exactly or not at all. One such character in an
    exception's message took the plugin's worker down (its ERROR frame could not be
    encoded), and one in guest code's output lost all of it (attack14)."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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


def check_value(value: object, what: str) -> None:
    """ProtocolError (naming where, under ``what``) unless ``value`` may cross the channel."""
    if type(value) in PLAIN or small_int(value):
        return
    _checked(value, what)
