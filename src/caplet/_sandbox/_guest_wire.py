"""What crosses the channel for one guest snippet: the request and the reply.

A guest worker is an ordinary worker (:mod:`caplet._sandbox._worker`) whose
"plugin" is a tiny generated runner, :data:`RUNNER_SOURCE`, declaring one
function, ``guest.run`` (:mod:`caplet._sandbox._guest`). The host calls it
once with one argument, the request map (:func:`encode_request`), and the
runner returns the reply map (:func:`encode_reply`).

Both maps are shape-checked on arrival. The reply above all: guest code runs
in the process that builds it and can forge it, so :func:`decode_reply` is
as strict as the frame decoders of :mod:`caplet._sandbox._protocol` (exact
keys, exact types, every text and the value bounded) and raises
:class:`~caplet._errors.ProtocolError` and nothing else, whatever it is
given. The request comes from the host, but the worker checks it too.

This module runs inside guest workers: standard library, msgpack and
caplet's base and sandbox modules only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import msgpack

from caplet._errors import ProtocolError
from caplet._sandbox._protocol import MAX_TEXT_CHARS, WireValue, check_value

__all__ = [
    "GUEST_ENTRY",
    "GUEST_FILENAME",
    "GUEST_FUNCTION",
    "GUEST_MODULE",
    "GUEST_PLUGIN",
    "MAX_TRACEBACK_CHARS",
    "MAX_TYPE_CHARS",
    "RUNNER_SOURCE",
    "GuestReply",
    "GuestRequest",
    "HostFunction",
    "HostModule",
    "decode_reply",
    "decode_request",
    "encode_reply",
    "encode_request",
]

#: The name a guest worker's INIT carries (it is no plugin: nothing is
#: approved, nothing is granted, and it never appears in the plugin list).
GUEST_PLUGIN: Final = "guest"
#: The runner's one file, module and function.
GUEST_ENTRY: Final = "guest.py"
GUEST_MODULE: Final = "guest"
GUEST_FUNCTION: Final = "run"
#: The file name guest code is compiled under: the only frames a guest's
#: traceback shows are the ones with this name.
GUEST_FILENAME: Final = "<guest>"
#: The whole generated runner: everything else is caplet's own code, which
#: the jail mounts read-only like for every worker.
RUNNER_SOURCE: Final = (
    '"""caplet guest runner (generated): runs one snippet of guest code."""\n\n'
    "from caplet._sandbox._guest import create_functions\n\n"
    '__all__ = ["create_functions"]\n'
)
#: Cap on a guest's formatted traceback.
MAX_TRACEBACK_CHARS: Final = 64 * 1024

_REQUEST_KEYS: Final = frozenset(
    {"code", "modules", "unavailable", "max_output_chars", "max_value_bytes"}
)
_MODULE_KEYS: Final = frozenset({"name", "plugin", "description", "functions"})
_REPLY_KEYS: Final = frozenset(
    {"stdout", "stderr", "truncated", "has_value", "value", "repr", "error", "error_type"}
)
#: Type names of what the guest raised are short; anything longer is forged.
MAX_TYPE_CHARS: Final = 200


@dataclass(frozen=True, slots=True)
class HostFunction:
    """One declared function of a host module, with its one-line description."""

    name: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class HostModule:
    """A module guest code may import as ``host.<name>``, and the plugin providing it."""

    name: str
    plugin: str
    description: str
    functions: tuple[HostFunction, ...]

    @property
    def function_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions)


@dataclass(frozen=True, slots=True)
class GuestRequest:
    """One snippet to run.

    ``modules`` are the importable host modules; ``unavailable`` maps each
    module a guest cannot import but might expect (its plugin is not
    enabled, or two enabled plugins declare it) to the reason, so the
    import error can say why. Output beyond ``max_output_chars`` per stream
    is dropped (and the reply says so); a final value larger than
    ``max_value_bytes`` once encoded is not sent (its repr still is).
    """

    code: str
    modules: tuple[HostModule, ...]
    unavailable: Mapping[str, str]
    max_output_chars: int
    max_value_bytes: int


@dataclass(frozen=True, slots=True)
class GuestReply:
    """What one snippet did.

    ``has_value``: the snippet ended with an expression; ``value`` is its
    value when that can cross the boundary (JSON-like values, bytes) and is
    not too large, else None; ``value_repr`` its ``repr()`` (cut to the
    output cap). ``error`` is the guest's own traceback and ``error_type``
    the exception's name, both None when the snippet succeeded.
    """

    stdout: str
    stderr: str
    truncated: bool
    has_value: bool
    value: WireValue
    value_repr: str | None
    error: str | None
    error_type: str | None


# -- checks -------------------------------------------------------------------------------


def _map(value: object, keys: frozenset[str], what: str) -> Mapping[str, object]:
    if type(value) is not dict:
        raise ProtocolError(f"{what} must be a map, got {type(value).__name__}")
    if set(value) != keys:
        got = sorted(repr(k)[:40] for k in value)
        raise ProtocolError(f"{what} must have exactly the keys {sorted(keys)}, got {got}")
    return value


def _text(value: object, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    if type(value) is not str:
        raise ProtocolError(f"{what} must be a str, got {type(value).__name__}")
    if len(value) > limit:
        raise ProtocolError(f"{what} is {len(value)} characters, over the cap of {limit}")
    return value


def _optional_text(value: object, what: str, limit: int) -> str | None:
    return None if value is None else _text(value, what, limit)


def _flag(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise ProtocolError(f"{what} must be a bool, got {type(value).__name__}")
    return value


def _count(value: object, what: str) -> int:
    if type(value) is not int or not 0 < value <= 2**31:
        raise ProtocolError(f"{what} must be an int in 1..2**31, got {value!r}"[:200])
    return value


def _names(value: object, what: str) -> list[object]:
    if type(value) is not list:
        raise ProtocolError(f"{what} must be an array, got {type(value).__name__}")
    return value


# -- the request --------------------------------------------------------------------------


def encode_request(request: GuestRequest) -> dict[str, WireValue]:
    """The request map sent as ``guest.run``'s one argument."""
    return {
        "code": request.code,
        "modules": [
            {
                "name": m.name,
                "plugin": m.plugin,
                "description": m.description,
                "functions": [[f.name, f.description] for f in m.functions],
            }
            for m in request.modules
        ],
        "unavailable": dict(request.unavailable),
        "max_output_chars": request.max_output_chars,
        "max_value_bytes": request.max_value_bytes,
    }


def _function(value: object) -> HostFunction:
    pair = _names(value, "a host function")
    if len(pair) != 2:
        raise ProtocolError(f"a host function must be [name, description], got {len(pair)} items")
    return HostFunction(_text(pair[0], "a function name"), _text(pair[1], "a description"))


def decode_request(value: object) -> GuestRequest:
    """The request map as the runner received it; ProtocolError when malformed."""
    body = _map(value, _REQUEST_KEYS, "the guest request")
    modules = tuple(
        HostModule(
            _text(m["name"], "a module name"),
            _text(m["plugin"], "a plugin name"),
            _text(m["description"], "a module description"),
            tuple(_function(f) for f in _names(m["functions"], "a module's functions")),
        )
        for m in (
            _map(item, _MODULE_KEYS, "a host module")
            for item in _names(body["modules"], "the host modules")
        )
    )
    unavailable = body["unavailable"]
    if type(unavailable) is not dict:
        raise ProtocolError(f"unavailable must be a map, got {type(unavailable).__name__}")
    return GuestRequest(
        code=_text(body["code"], "the guest code"),
        modules=modules,
        unavailable={
            _text(k, "an unavailable module"): _text(v, "why it is unavailable")
            for k, v in unavailable.items()
        },
        max_output_chars=_count(body["max_output_chars"], "max_output_chars"),
        max_value_bytes=_count(body["max_value_bytes"], "max_value_bytes"),
    )


# -- the reply ----------------------------------------------------------------------------


def encode_reply(reply: GuestReply) -> dict[str, WireValue]:
    """The reply map ``guest.run`` returns."""
    return {
        "stdout": reply.stdout,
        "stderr": reply.stderr,
        "truncated": reply.truncated,
        "has_value": reply.has_value,
        "value": reply.value,
        "repr": reply.value_repr,
        "error": reply.error,
        "error_type": reply.error_type,
    }


def decode_reply(value: object, *, max_output_chars: int, max_value_bytes: int) -> GuestReply:
    """The reply of a guest worker, checked field by field; ProtocolError when malformed.

    Each stream and the repr must fit ``max_output_chars``, the traceback
    :data:`MAX_TRACEBACK_CHARS`, the encoded value ``max_value_bytes``; an
    error needs its type and the other way round; a value or repr without
    ``has_value`` is refused.
    """
    body = _map(value, _REPLY_KEYS, "the guest reply")
    has_value = _flag(body["has_value"], "has_value")
    result = body["value"]
    check_value(result, "the guest reply's value")
    if result is not None:
        if not has_value:
            raise ProtocolError("the guest reply has a value but has_value is false")
        size = len(msgpack.packb(result))
        if size > max_value_bytes:
            raise ProtocolError(
                f"the guest reply's value encodes to {size} bytes, over the cap of "
                f"{max_value_bytes}"
            )
    value_repr = _optional_text(body["repr"], "the value's repr", max_output_chars)
    if (value_repr is not None) != has_value:
        raise ProtocolError("the guest reply's repr must be given exactly when has_value is true")
    error = _optional_text(body["error"], "the traceback", MAX_TRACEBACK_CHARS)
    error_type = _optional_text(body["error_type"], "the error type", MAX_TYPE_CHARS)
    if (error is None) != (error_type is None):
        raise ProtocolError("the guest reply must give error and error_type together")
    if error is not None and has_value:
        raise ProtocolError("the guest reply has both an error and a value")
    return GuestReply(
        stdout=_text(body["stdout"], "stdout", max_output_chars),
        stderr=_text(body["stderr"], "stderr", max_output_chars),
        truncated=_flag(body["truncated"], "truncated"),
        has_value=has_value,
        value=result,
        value_repr=value_repr,
        error=error,
        error_type=error_type,
    )
