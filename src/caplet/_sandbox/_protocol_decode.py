"""Decoding the host-worker protocol (:mod:`caplet._sandbox._protocol`): a frame's bytes to
one message, checked field by field. The host never trusts a worker, so
anything else is a :class:`ProtocolError` naming the sender and what was
wrong; the decoder is fuzzed (tests/_sandbox/test_protocol_fuzz.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgpack

from caplet._errors import ProtocolError
from caplet._sandbox._protocol import (
    CALL,
    CONTEXT_ERROR,
    CONTEXT_ERROR_NAMES,
    CONTEXT_REPLY,
    CONTEXT_REQUEST,
    ERROR,
    FATAL,
    GRANT_KEYS,
    INIT,
    INIT_KEYS,
    MAX_HEADER_LENGTH,
    MAX_REQUEST_ID,
    MAX_TEXT_CHARS,
    OPS,
    PLAIN,
    READY,
    RESULT,
    SHUTDOWN,
    Call,
    ContextFailure,
    ContextGrants,
    ContextReply,
    ContextRequest,
    Error,
    Fatal,
    HostMessage,
    Init,
    Ready,
    Result,
    Shutdown,
    UnsendableError,
    WorkerMessage,
    check_nested,
    new_tuple,
    short_text,
    small_int,
)

__all__ = ["decode_host_message", "decode_worker_message"]


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
            f"malformed msgpack ({type(exc).__name__}: {short_text(str(exc), 200)})"
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
    if type(request_id) is not int or not 0 <= request_id <= MAX_REQUEST_ID:
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
        _text(key, f"a key of {what}"): _names(item, f"{what}[{short_text(repr(key))}]")
        for key, item in value.items()
    }


def _wire(value: object, what: str) -> None:
    try:
        check_nested(value, 0)
    except UnsendableError as exc:
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
        and 0 <= message[1] <= MAX_REQUEST_ID
    ):
        value = message[2]
        if type(value) not in PLAIN:
            _wire(value, "RESULT value")
        return new_tuple(Result, (message[1], value))
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
    if type(call_id) is not int or not 0 <= call_id <= MAX_REQUEST_ID:
        raise ProtocolError(
            f"CONTEXT_REQUEST call id must be an int in 0..2**63-1, got {_describe(call_id)}"
        )
    name = _text(op, "CONTEXT_REQUEST op")
    known = OPS.get(name)
    if known is None:
        raise ProtocolError(
            f"unknown ctx op {short_text(repr(name))} (expected one of {', '.join(sorted(OPS))})"
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
    if args and not all(type(a) in PLAIN or small_int(a) for a in args):
        _wire(args, "CALL args")
    if type(kwargs) is not dict:
        raise ProtocolError(f"CALL kwargs must be a map, got {type(kwargs).__name__}")
    if kwargs and not all(
        type(k) is str and (type(v) in PLAIN or small_int(v)) for k, v in kwargs.items()
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
            and 0 <= request_id <= MAX_REQUEST_ID
            and type(module) is str
            and len(module) <= MAX_TEXT_CHARS
            and type(function) is str
            and len(function) <= MAX_TEXT_CHARS
            and type(args) is list
            and type(kwargs) is dict
        ):
            for arg in args:
                if type(arg) not in PLAIN and not small_int(arg):
                    _wire(args, "CALL args")
                    break
            for key, arg in kwargs.items():
                if type(key) is not str or (type(arg) not in PLAIN and not small_int(arg)):
                    _wire(kwargs, "CALL kwargs")  # also refuses bytes keys
                    break
            return new_tuple(Call, (request_id, module, function, args, kwargs))
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
            raise ProtocolError(f"CONTEXT_ERROR names an unknown error {short_text(repr(error))}")
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
    if keys != INIT_KEYS:
        missing = sorted(INIT_KEYS - keys)
        extra = sorted(short_text(repr(k)) for k in keys - INIT_KEYS)
        raise ProtocolError(f"INIT body keys are wrong (missing: {missing}, unexpected: {extra})")
    max_frame_bytes = body["max_frame_bytes"]
    if type(max_frame_bytes) is not int or not 0 < max_frame_bytes <= MAX_HEADER_LENGTH:
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
    if set(value) != GRANT_KEYS:
        raise ProtocolError(
            f"INIT context keys must be {sorted(GRANT_KEYS)}, got "
            f"{sorted(short_text(repr(k)) for k in value)}"
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
