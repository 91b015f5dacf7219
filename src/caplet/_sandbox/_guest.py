"""The guest runner: runs one snippet of guest code inside a guest worker.

A guest worker is a worker like any plugin's, started on a generated
snapshot holding only :data:`~caplet._sandbox._guest_wire.RUNNER_SOURCE`,
which imports :func:`create_functions` from here. It has no capability at
all (no paths beyond the runtime, no environment, no network, no programs)
and runs exactly one snippet before the host discards it.

``guest.run(request)`` does what the interactive interpreter does with a
block of input: the code is compiled under the file name ``<guest>``; when
its last statement is an expression, the statements before it run with
``exec`` and the expression with ``eval``, and its value (unless None, as
``sys.displayhook`` would skip it) is the snippet's value. stdout and stderr
are captured (up to a cap each; the rest is dropped and the reply says
so). Whatever the code raises (SystemExit included) becomes the reply's
error: a traceback holding the guest's own frames only, never the runner's
or caplet's, with ``HostCallError`` rather than ``caplet._errors.HostCallError``.

``import host.<module>`` is served by :mod:`caplet._sandbox._guest_modules`.

This module runs inside guest workers: standard library, msgpack and
caplet's base and sandbox modules only.
"""

from __future__ import annotations

import ast
import builtins
import io
import linecache
import sys
import types
from collections.abc import Callable, Mapping
from typing import Final

import msgpack

from caplet._errors import ProtocolError
from caplet._sandbox._context import PluginContext
from caplet._sandbox._guest_modules import HostModules, install
from caplet._sandbox._guest_wire import (
    GUEST_FILENAME,
    GUEST_FUNCTION,
    GUEST_MODULE,
    MAX_TRACEBACK_CHARS,
    MAX_TYPE_CHARS,
    GuestReply,
    GuestRequest,
    decode_request,
    encode_reply,
)
from caplet._sandbox._protocol import WireValue, check_value, crossing

__all__ = ["create_functions", "run", "run_snippet"]

#: Causes and contexts followed at most this deep (a chain can be built on purpose).
_MAX_CHAIN: Final = 16
_CAUSE: Final = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT: Final = "\nDuring handling of the above exception, another exception occurred:\n\n"


def create_functions(config: Mapping[str, object]) -> dict[str, dict[str, Callable[..., object]]]:
    """The runner's one function, ``guest.run`` (the generated snapshot's entry point)."""
    return {GUEST_MODULE: {GUEST_FUNCTION: run}}


def run(ctx: PluginContext, request: object) -> dict[str, WireValue]:
    """Run the snippet the host sent; return the reply map (see ``_guest_wire``)."""
    try:
        parsed = decode_request(request)
    except ProtocolError as exc:
        raise ValueError(f"malformed guest request from the host: {exc}") from None
    # The worker's channel carries the guest's host.* calls (as ctx requests of
    # this call); the host answers them with the guest's handler, which serves
    # guest.call and refuses every plugin op.
    install(HostModules(ctx._transport, parsed.modules, parsed.unavailable))
    return encode_reply(run_snippet(parsed))


class _Capture(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` of a snippet: keeps the first ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self._limit = limit
        self._chunks: list[str] = []
        self._size = 0
        self.truncated = False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        text = crossing(text)  # counted as it crosses, escapes included
        room = self._limit - self._size
        if len(text) > room:
            self.truncated = True
            text = text[: max(room, 0)]
        if text:
            self._chunks.append(text)
            self._size += len(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._chunks)


def _compile(code: str) -> tuple[types.CodeType, types.CodeType | None]:
    """(statements, final expression or None), compiled as ``<guest>``.

    ``dont_inherit``: the runner's own ``from __future__`` imports must not
    change how guest code compiles.
    """
    tree = ast.parse(code, GUEST_FILENAME, "exec")
    last = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = compile(ast.Expression(final.value), GUEST_FILENAME, "eval", dont_inherit=True)
    return compile(tree, GUEST_FILENAME, "exec", dont_inherit=True), last


def run_snippet(request: GuestRequest) -> GuestReply:
    """Compile and run ``request.code``; capture its output, value and error."""
    limit = request.max_output_chars
    # Registered so the guest's traceback can quote its own lines.
    linecache.cache[GUEST_FILENAME] = (
        len(request.code),
        None,
        request.code.splitlines(keepends=True),
        GUEST_FILENAME,
    )
    stdout, stderr = _Capture(limit), _Capture(limit)
    saved = sys.stdout, sys.stderr
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins}
    result: object = None
    error: tuple[str, str] | None = None
    sys.stdout, sys.stderr = stdout, stderr
    try:
        statements, last = _compile(request.code)
        exec(statements, namespace)  # noqa: S102 - running guest code is the point
        if last is not None:
            result = eval(last, namespace)  # noqa: S307
    except BaseException as exc:  # SystemExit too: it is the guest's
        error = describe(exc)
    finally:
        sys.stdout, sys.stderr = saved
    value, value_repr = (None, None) if error is not None else _value(result, request)
    return GuestReply(
        stdout=stdout.getvalue(),
        stderr=stderr.getvalue(),
        truncated=stdout.truncated or stderr.truncated,
        has_value=value_repr is not None,
        value=value,
        value_repr=value_repr,
        error=None if error is None else error[1],
        error_type=None if error is None else error[0],
    )


def _value(result: object, request: GuestRequest) -> tuple[WireValue, str | None]:
    """(the value as it crosses, or None; its repr) of the final expression.

    None has no value, as in the interactive interpreter. The value is
    re-encoded through msgpack so what crosses is plain lists, dicts and
    scalars, whatever subclasses guest code returned.
    """
    if result is None:
        return None, None
    try:
        text = repr(result)
    except BaseException:  # a hostile __repr__ is the guest's problem
        text = f"<{type(result).__name__} object: repr() failed>"
    if not isinstance(text, str):
        text = f"<{type(result).__name__} object>"
    text = crossing(text)[: request.max_output_chars]
    try:
        check_value(result, "the value")
        packed = msgpack.packb(result)
        if len(packed) > request.max_value_bytes:
            return None, text
        return msgpack.unpackb(packed, raw=False), text
    except Exception:  # cannot cross: the repr stands for it
        return None, text


def describe(exc: BaseException) -> tuple[str, str]:
    """(type name, traceback) of what guest code raised: the guest's frames only."""
    parts: list[str] = []
    try:
        _chain(exc, parts, set(), 0)
        text = "".join(parts)
    except BaseException:  # a hostile exception must not break the reply
        text = f"{_type_name(type(exc))}: <the exception could not be formatted>\n"
    text = crossing(text)
    if len(text) > MAX_TRACEBACK_CHARS:
        # The end matters most (the exception itself), as in a long log.
        text = "...\n" + text[-(MAX_TRACEBACK_CHARS - 4) :]
    return crossing(_type_name(type(exc)))[:MAX_TYPE_CHARS], text


def _chain(exc: BaseException, parts: list[str], seen: set[int], depth: int) -> None:
    # Imported here: a snippet that succeeds never pays for it.
    import traceback

    seen.add(id(exc))
    cause, context = exc.__cause__, exc.__context__
    if depth < _MAX_CHAIN:
        if cause is not None and id(cause) not in seen:
            _chain(cause, parts, seen, depth + 1)
            parts.append(_CAUSE)
        elif context is not None and not exc.__suppress_context__ and id(context) not in seen:
            _chain(context, parts, seen, depth + 1)
            parts.append(_CONTEXT)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == GUEST_FILENAME]
    if frames:
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_list(frames))
    parts.append(_last_line(exc))


def _last_line(exc: BaseException) -> str:
    import traceback

    if isinstance(exc, SyntaxError):
        # Its own file, line and caret (the file is <guest> for the snippet).
        lines = traceback.format_exception_only(type(exc), exc)
        lines[-1] = lines[-1].replace(
            f"{type(exc).__module__}.{type(exc).__qualname__}", _type_name(type(exc))
        )
        return "".join(lines)
    name = _type_name(type(exc))
    try:
        message = str(exc)
    except BaseException:
        message = "<the message could not be formatted>"
    notes = getattr(exc, "__notes__", None)
    extra = "".join(f"{note}\n" for note in notes if isinstance(note, str)) if notes else ""
    return (f"{name}: {message}\n" if message else f"{name}\n") + extra


def _type_name(cls: type[BaseException]) -> str:
    """How the guest sees an exception class: caplet's by name only, like the builtins."""
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or cls.__name__
    if not isinstance(module, str) or module in ("builtins", "__main__"):
        return str(name)
    if module == "caplet" or module.startswith("caplet."):
        return str(name)
    return f"{module}.{name}"
