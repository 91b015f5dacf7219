"""fetch: HTTP(S) requests to the configured origin, through the host's broker.

The plugin has no network of its own (the sandbox has no interfaces, and
seccomp refuses every socket but AF_UNIX): each request is a ``ctx.http``
call that the host's broker checks against the plugin's approved
``net.http`` capability, which is the configured ``origin``. The broker
enforces every network rule (https only unless the origin says http, no
private or metadata addresses, redirects re-checked, rate and data limits;
docs/network.md); this plugin adds what a caller needs on top: size limits
of its own, a POST switch, a body reader in pieces, and JSON and text
helpers. Broker errors reach the caller with their message unchanged,
category first ("blocked by policy: ...", "timed out: ...").

Which errors count toward the host's circuit breaker (README.md, "Errors"):
the breaker exists to stop hammering a dependency that is failing, so a
network failure counts (DNS, connection, TLS, timeout, a redirect loop, a
response that is not valid HTTP or not the JSON asked for, a 5xx, 408 or
429 status). A request refused *before* anything fails -- by the broker's
policy or limits, or by this plugin's own checks -- and a 4xx status (the
server's verdict on the request) are refusals: ``caplet.plugin.Refused``
subclasses, which do not count, so a caller sending bad URLs cannot get the
plugin quarantined. Each refusal class also subclasses the error it
replaces (``BlockedByPolicyRefused`` is a ``BlockedByPolicyError`` ...).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from caplet.plugin import (
    BlockedByPolicyError,
    BrokerError,
    InvalidUrlError,
    PluginContext,
    RateLimitError,
    Refused,
    Response,
    ResponseError,
    SizeLimitError,
)

_KIB = 1024
#: How many fetched bodies ``read`` keeps (oldest dropped first).
_CACHED_BODIES = 8
#: Non-2xx statuses that are the server failing or asking for less, not refusing the
#: request: 408 (it timed out) and 429 (too many requests). They count, like a 5xx.
_FAILURE_STATUSES = frozenset({408, 429})


# The refusals: the host only sees the class name, which must end in "Refused".


class InvalidArgumentRefused(Refused, ValueError):
    """``invalid URL`` / ``invalid headers``: an argument the plugin cannot send."""


class BlockedByPolicyRefused(Refused, BlockedByPolicyError):
    """``blocked by policy``: the broker's rules (URL outside the origin, a blocked address,
    a refused header ...) or this plugin's (POST not allowed)."""


class InvalidUrlRefused(Refused, InvalidUrlError):
    """``blocked by policy``: a URL the broker cannot make unambiguous."""


class RateLimitRefused(Refused, RateLimitError):
    """``rate limited`` / ``data budget exhausted``: the policy's per-plugin limits (the
    broker already sends nothing more, so counting them would only quarantine the plugin
    for a busy caller)."""


class SizeLimitRefused(Refused, SizeLimitError):
    """``response too large`` / ``request too large``: the policy's or this plugin's limits."""


class HttpStatusRefused(Refused, ResponseError):
    """``http error``: a 4xx status (but 408 and 429) in fetch_json or fetch_text."""


class NothingToReadRefused(Refused, LookupError):
    """``nothing to read``: ``read`` of a URL with no fetched body."""


#: Broker errors that are refusals, each with its refusal class (the first match wins:
#: InvalidUrlError is a BlockedByPolicyError). Every other BrokerError is a failure.
_REFUSALS: tuple[tuple[type[BrokerError], type[BrokerError]], ...] = (
    (InvalidUrlError, InvalidUrlRefused),
    (BlockedByPolicyError, BlockedByPolicyRefused),
    (RateLimitError, RateLimitRefused),
    (SizeLimitError, SizeLimitRefused),
)


def _refusal(exc: BrokerError) -> BrokerError | None:
    """``exc`` as its refusal class, same message and fields; None when it is a failure."""
    for failure, refusal in _REFUSALS:
        if isinstance(exc, failure):
            return refusal(str(exc), plugin=exc.plugin, url=exc.url, category=exc.category)
    return None


@dataclass(slots=True)
class _Body:
    """A fetched body being read in pieces by ``read``."""

    text: str
    position: int = 0


def _integer(config: Mapping[str, Any], name: str) -> int:
    value = config[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"invalid configuration: {name} must be a positive integer")
    return value


def _headers(headers: object) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise InvalidArgumentRefused(
            "invalid headers: must be an object of string names to string values"
        )
    return headers


def _url(url: object) -> str:
    if not isinstance(url, str) or not url:
        raise InvalidArgumentRefused("invalid URL: must be a non-empty string")
    return url


def _shown(url: str) -> str:
    """``url`` for a message: without its query, which often holds an API key."""
    base, query, _ = url.partition("?")
    base = base.partition("#")[0]
    return f"{base}?..." if query else base


def _summary(response: Response, size: int) -> dict[str, Any]:
    return {
        "status": response.status,
        "ok": response.ok,
        "url": response.url,
        "content_type": response.header("content-type") or "",
        "total_bytes": size,
    }


def create_functions(config: Mapping[str, Any]) -> dict[str, dict[str, Callable[..., Any]]]:
    allow_post = config["allow_post"]
    if not isinstance(allow_post, bool):
        raise TypeError("invalid configuration: allow_post must be a boolean")
    max_response = _integer(config, "max_response_kb") * _KIB
    max_request = _integer(config, "max_request_kb") * _KIB
    read_chars = _integer(config, "read_kb") * _KIB
    timeout = float(config["timeout_s"])
    if not timeout > 0:
        raise ValueError("invalid configuration: timeout_s must be positive")
    bodies: OrderedDict[str, _Body] = OrderedDict()

    def send(
        ctx: PluginContext, method: str, url: object, body: bytes | None, headers: object
    ) -> Response:
        target = _url(url)
        try:
            response = ctx.http.fetch(
                target, method=method, headers=_headers(headers), body=body, timeout=timeout
            )
        except BrokerError as exc:
            refusal = _refusal(exc)
            if refusal is None:
                raise
            raise refusal from exc
        if len(response.body) > max_response:
            raise SizeLimitRefused(
                f"response too large: {method} {_shown(response.url)} answered "
                f"{len(response.body)} bytes, above the {max_response // _KIB} KiB this plugin "
                "accepts (max_response_kb)",
                plugin=ctx.plugin,
                url=_shown(response.url),
            )
        return response

    def keep(url: str, response: Response) -> dict[str, Any]:
        bodies[url] = _Body(response.text())
        bodies.move_to_end(url)
        while len(bodies) > _CACHED_BODIES:
            bodies.popitem(last=False)
        return _summary(response, len(response.body))

    def checked(ctx: PluginContext, url: object, headers: object, what: str) -> Response:
        response = send(ctx, "GET", url, None, headers)
        if not response.ok:
            # A 4xx is the server refusing this request (not found, forbidden
            # ...): the caller's to fix. Anything else is the server failing.
            refused = 400 <= response.status < 500 and response.status not in _FAILURE_STATUSES
            error = HttpStatusRefused if refused else ResponseError
            raise error(
                f"http error: {what} got status {response.status} from {_shown(response.url)}",
                plugin=ctx.plugin,
                url=_shown(response.url),
                category="http error",
            )
        return response

    def get(ctx: PluginContext, url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        """GET ``url``; returns status, ok, url, content_type, total_bytes (body: ``read``)."""
        return keep(_url(url), send(ctx, "GET", url, None, headers))

    def post(
        ctx: PluginContext, url: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """POST ``body`` (a string as is, anything else as JSON) to ``url``; like ``get``."""
        target = _url(url)
        if not allow_post:
            raise BlockedByPolicyRefused(
                f"blocked by policy: POST {_shown(target)}: this plugin is configured "
                "without POST; enable it with allow_post=true",
                plugin=ctx.plugin,
                url=_shown(target),
            )
        extra = dict(_headers(headers))
        if isinstance(body, str):
            payload = body.encode("utf-8")
        else:
            payload = json.dumps(body).encode("utf-8")
            if not any(name.lower() == "content-type" for name in extra):
                extra["Content-Type"] = "application/json"
        if len(payload) > max_request:
            raise SizeLimitRefused(
                f"request too large: POST {_shown(target)}: {len(payload)} bytes, above the "
                f"{max_request // _KIB} KiB this plugin sends (max_request_kb)",
                plugin=ctx.plugin,
                url=_shown(target),
            )
        return keep(target, send(ctx, "POST", target, payload, extra))

    def read(url: str) -> dict[str, Any]:
        """The next piece of the body ``get``/``post`` fetched from ``url``: data, done."""
        body = bodies.get(_url(url))
        if body is None:
            raise NothingToReadRefused(
                f"nothing to read: no fetched body for {_shown(str(url))} (get or post it "
                f"first; only the last {_CACHED_BODIES} bodies are kept, and a body is "
                "dropped once read to the end)"
            )
        data = body.text[body.position : body.position + read_chars]
        body.position += len(data)
        done = body.position >= len(body.text)
        if done:
            del bodies[url]
        return {"data": data, "done": done}

    def fetch_json(ctx: PluginContext, url: str, headers: dict[str, str] | None = None) -> Any:
        """GET ``url`` and return its body parsed as JSON (a 2xx status is required)."""
        return checked(ctx, url, headers, "fetch_json").json()

    def fetch_text(ctx: PluginContext, url: str, headers: dict[str, str] | None = None) -> str:
        """GET ``url`` and return its body as text (a 2xx status is required)."""
        return checked(ctx, url, headers, "fetch_text").text()

    return {
        "fetch": {
            "get": get,
            "read": read,
            "post": post,
            "fetch_json": fetch_json,
            "fetch_text": fetch_text,
        }
    }
