"""The parts of a plugin's ``ctx``: ``log``, ``kv``, ``http``, ``app`` and ``plugins``.

Each method checks its arguments' types (an honest plugin gets a plain
error at the call site) and turns into one request to the host over a
:class:`ContextTransport` (the worker's channel), answered while the call
is in flight; the host checks everything again. Which parts a plugin gets,
and the context itself, are :mod:`caplet._sandbox._context`.

This module runs in every worker: it imports only the standard library,
msgpack (through the protocol) and caplet's base and sandbox modules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from caplet._body import body_json, body_text
from caplet._errors import ContextArgumentError, ContextError
from caplet._sandbox._protocol import ContextOp, WireValue, crossing

__all__ = [
    "App",
    "ContextTransport",
    "Http",
    "Kv",
    "Log",
    "Plugins",
    "Response",
]


class ContextTransport(Protocol):
    """The seam between ``ctx`` and the host: send one request, wait for its answer.

    The worker's channel implements it; it raises
    :class:`~caplet._errors.ContextUnavailableError` outside a call and the
    error the host answered with otherwise.
    """

    @property
    def in_call(self) -> bool: ...

    def request(self, op: ContextOp, args: dict[str, WireValue]) -> WireValue: ...


def _argument_error(plugin: str, what: str, expected: str, got: object) -> ContextArgumentError:
    return ContextArgumentError(
        f"invalid arguments: plugin '{plugin}': {what} must be {expected}, "
        f"got {type(got).__name__}",
        plugin=plugin,
    )


class Log:
    """``ctx.log``: lines in the host's log, prefixed with the plugin's name.

    The host cuts long lines, escapes control characters (a plugin cannot
    forge a log line of its own) and drops lines over its rate limit,
    counting them; logging never raises for those reasons.
    """

    __slots__ = ("_plugin", "_transport")

    def __init__(self, plugin: str, transport: ContextTransport) -> None:
        self._plugin = plugin
        self._transport = transport

    def _write(self, level: str, message: object) -> None:
        text = crossing(message if isinstance(message, str) else str(message))
        self._transport.request(ContextOp.LOG, {"level": level, "message": text[:65_536]})

    def debug(self, message: object) -> None:
        """Log ``message`` at DEBUG level."""
        self._write("debug", message)

    def info(self, message: object) -> None:
        """Log ``message`` at INFO level."""
        self._write("info", message)

    def warning(self, message: object) -> None:
        """Log ``message`` at WARNING level."""
        self._write("warning", message)

    def error(self, message: object) -> None:
        """Log ``message`` at ERROR level."""
        self._write("error", message)


class Kv:
    """``ctx.kv``: a small key-value store of this plugin's own, kept by the host.

    Keys are non-empty strings; values are anything that crosses the
    boundary (JSON-like values and bytes). Another plugin's keys are never
    visible. Sizes are limited per value and per plugin
    (:class:`~caplet._errors.ContextLimitError`).
    """

    __slots__ = ("_plugin", "_transport")

    def __init__(self, plugin: str, transport: ContextTransport) -> None:
        self._plugin = plugin
        self._transport = transport

    def _key(self, key: object) -> str:
        if not isinstance(key, str):
            raise _argument_error(self._plugin, "a ctx.kv key", "a str", key)
        return key

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default``."""
        answer = self._transport.request(ContextOp.KV_GET, {"key": self._key(key)})
        if not isinstance(answer, dict) or not answer.get("found"):
            return default
        return answer.get("value")

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` (replacing what was there)."""
        self._transport.request(ContextOp.KV_SET, {"key": self._key(key), "value": value})

    def delete(self, key: str) -> bool:
        """Remove ``key``; False when it was not there."""
        return self._transport.request(ContextOp.KV_DELETE, {"key": self._key(key)}) is True

    def keys(self, prefix: str = "") -> list[str]:
        """This plugin's keys that start with ``prefix``, sorted."""
        if not isinstance(prefix, str):
            raise _argument_error(self._plugin, "the ctx.kv.keys prefix", "a str", prefix)
        answer = self._transport.request(ContextOp.KV_KEYS, {"prefix": prefix})
        if not isinstance(answer, list):
            return []
        return [key for key in answer if isinstance(key, str)]


class Response:
    """The answer to ``ctx.http.fetch``: after redirects, whatever its status.

    ``headers`` are ``(name, value)`` pairs in received order; ``body`` the
    bytes received; ``url`` the URL that answered.
    """

    __slots__ = ("body", "headers", "status", "url")

    def __init__(
        self, status: int, headers: tuple[tuple[str, str], ...], body: bytes, url: str
    ) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url

    def __repr__(self) -> str:
        return f"<Response {self.status} from {self.url} ({len(self.body)} bytes)>"

    @property
    def ok(self) -> bool:
        """True for a 2xx status."""
        return 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((v for n, v in self.headers if n.lower() == wanted), None)

    def text(self) -> str:
        """The body decoded with the Content-Type charset (UTF-8 when absent or unknown);
        undecodable bytes become U+FFFD (:func:`caplet._body.body_text`)."""
        return body_text(self.body, self.header("content-type"))

    def json(self) -> Any:
        """The body parsed as JSON; :class:`~caplet._errors.ResponseError` when it is not."""
        return body_json(self.body, self.header("content-type"), url=self.url, status=self.status)


def _response(answer: WireValue, plugin: str) -> Response:
    """A Response from the host's answer (shape-checked: it crossed a channel)."""
    if isinstance(answer, dict):
        status, headers, body, url = (answer.get(k) for k in ("status", "headers", "body", "url"))
        if (
            type(status) is int
            and isinstance(body, bytes)
            and isinstance(url, str)
            and isinstance(headers, list)
            and all(
                isinstance(pair, list)
                and len(pair) == 2
                and isinstance(pair[0], str)
                and isinstance(pair[1], str)
                for pair in headers
            )
        ):
            return Response(status, tuple((p[0], p[1]) for p in headers), body, url)
    raise ContextError(
        f"plugin '{plugin}': the host's answer to ctx.http.fetch has the wrong shape",
        plugin=plugin,
    )


_MISSING: Final = object()


class Http:
    """``ctx.http``: brokered HTTP(S) within the plugin's ``net.http`` capabilities.

    The host performs the request (docs/network.md has every rule: approved
    origins only, no private addresses, redirects re-checked, size, time and
    rate limits). Failures raise the :class:`~caplet._errors.BrokerError`
    family, whose message starts with its category ("blocked by policy",
    "DNS resolution failed", "timed out" ...).
    """

    __slots__ = ("_plugin", "_transport")

    def __init__(self, plugin: str, transport: ContextTransport) -> None:
        self._plugin = plugin
        self._transport = transport

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        body: bytes | str | None = None,
        timeout: float | None = None,
    ) -> Response:
        """Send one request; returns the final :class:`Response` (any status).

        ``body`` as str is sent UTF-8 encoded; ``timeout`` (seconds) covers
        the whole fetch and is capped by the host's policy and by what is
        left of the call's own deadline.
        """
        plugin = self._plugin
        if not isinstance(url, str):
            raise _argument_error(plugin, "the URL of ctx.http.fetch", "a str", url)
        if not isinstance(method, str):
            raise _argument_error(plugin, "the method of ctx.http.fetch", "a str", method)
        pairs: list[list[str]] = []
        items = headers.items() if isinstance(headers, Mapping) else headers or ()
        for item in items:
            if (
                not isinstance(item, tuple | list)
                or len(item) != 2
                or not isinstance(item[0], str)
                or not isinstance(item[1], str)
            ):
                raise _argument_error(
                    plugin, "each header of ctx.http.fetch", "a (str, str) pair", item
                )
            pairs.append([item[0], item[1]])
        if body is None:
            payload = b""
        elif isinstance(body, str):
            payload = body.encode("utf-8")
        elif isinstance(body, bytes | bytearray | memoryview):
            payload = bytes(body)
        else:
            raise _argument_error(plugin, "the body of ctx.http.fetch", "bytes or str", body)
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': the timeout of ctx.http.fetch must be "
                f"a positive number of seconds or None, got {timeout!r}",
                plugin=plugin,
            )
        answer = self._transport.request(
            ContextOp.HTTP_FETCH,
            {
                "url": url,
                "method": method,
                "headers": pairs,
                "body": payload,
                "timeout": None if timeout is None else float(timeout),
            },
        )
        return _response(self._rest_of_body(answer), plugin)

    def _rest_of_body(self, answer: WireValue) -> WireValue:
        """The answer with its whole body: a body larger than one reply on the channel
        comes in pieces (``rest`` bytes after the first reply, asked for by ``handle``),
        so a response within the broker's limit always reaches the plugin (issue 15)."""
        if not isinstance(answer, dict) or "rest" not in answer:
            return answer
        rest, handle, first = answer.get("rest"), answer.get("handle"), answer.get("body")
        if type(rest) is not int or type(handle) is not int or not isinstance(first, bytes):
            return None  # the wrong shape: _response says so
        pieces = [first]
        received = len(first)
        total = received + rest
        while received < total:
            piece = self._transport.request(
                ContextOp.HTTP_BODY, {"handle": handle, "offset": received}
            )
            if not isinstance(piece, bytes) or not piece or received + len(piece) > total:
                return None
            pieces.append(piece)
            received += len(piece)
        return {**answer, "body": b"".join(pieces)}

    def get(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """``fetch(url, method="GET", ...)``."""
        return self.fetch(url, headers=headers, timeout=timeout)

    def post(
        self,
        url: str,
        body: bytes | str | None = None,
        *,
        json: Any = _MISSING,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """``fetch(url, method="POST", ...)``; ``json=`` sends a JSON body with its Content-Type."""
        pairs = list(headers.items() if isinstance(headers, Mapping) else headers or ())
        if json is not _MISSING:
            if body is not None:
                raise ContextArgumentError(
                    f"invalid arguments: plugin '{self._plugin}': ctx.http.post takes body or "
                    "json, not both",
                    plugin=self._plugin,
                )
            import json as _json

            body = _json.dumps(json).encode("utf-8")
            if not any(
                isinstance(p, tuple | list) and str(p[0]).lower() == "content-type" for p in pairs
            ):
                pairs.append(("Content-Type", "application/json"))
        return self.fetch(url, method="POST", headers=pairs, body=body, timeout=timeout)


class App:
    """``ctx.app(name, args)``: call a capability the embedding application provides.

    ``name`` is the capability without ``app:`` (``"email.send"``); the
    host checks the grant and validates ``args`` against the application's
    schema before its handler runs, and returns the handler's result.
    """

    __slots__ = ("_plugin", "_transport", "names")

    def __init__(self, plugin: str, transport: ContextTransport, names: tuple[str, ...]) -> None:
        self._plugin = plugin
        self._transport = transport
        #: The ``app:`` capabilities approved for this plugin (without the prefix).
        self.names = names

    def __call__(self, name: str, args: Any = None) -> Any:
        if not isinstance(name, str):
            raise _argument_error(self._plugin, "the name given to ctx.app", "a str", name)
        name = name.removeprefix("app:")
        return self._transport.request(
            ContextOp.APP, {"name": name, "args": {} if args is None else args}
        )


class _Module:
    """``ctx.plugins.<module>``: the functions of one granted module, as attributes."""

    __slots__ = ("_module", "_plugins")

    def __init__(self, plugins: Plugins, module: str) -> None:
        self._plugins = plugins
        self._module = module

    def __getattr__(self, function: str) -> Any:
        if function.startswith("_"):
            raise AttributeError(function)
        target = f"{self._module}.{function}"

        def call(*args: Any) -> Any:
            return self._plugins.call(target, *args)

        call.__name__ = function
        call.__qualname__ = f"ctx.plugins.{target}"
        return call


class Plugins:
    """``ctx.plugins``: call another plugin's module (``host.call:<module>``).

    ``ctx.plugins.call("fsread.read_file", "notes.md")`` or
    ``ctx.plugins.fsread.read_file("notes.md")``. The host runs the call in
    the other plugin's own sandbox, under its own deadline (cut to what is
    left of this call's), and refuses a cycle (A -> B -> A) with
    :class:`~caplet._errors.CallCycleError`. Only positional arguments
    cross, checked against the target's declared ``args`` schema.
    """

    __slots__ = ("_plugin", "_transport", "modules")

    def __init__(self, plugin: str, transport: ContextTransport, modules: tuple[str, ...]) -> None:
        self._plugin = plugin
        self._transport = transport
        #: The modules this plugin may call.
        self.modules = modules

    def call(self, target: str, *args: Any) -> Any:
        """Call ``"module.function"`` of the plugin providing ``module``."""
        if not isinstance(target, str):
            raise _argument_error(
                self._plugin, "the target of ctx.plugins.call", "'module.function'", target
            )
        return self._transport.request(
            ContextOp.PLUGINS_CALL, {"target": target, "args": list(args)}
        )

    def __getattr__(self, module: str) -> _Module:
        if module in self.modules:
            return _Module(self, module)
        raise AttributeError(
            f"ctx.plugins has no module {module!r}: plugin '{self._plugin}' may call "
            f"{', '.join(self.modules)}; declare host.call:{module} (and the plugin providing "
            "it in requires) to call it"
        )
