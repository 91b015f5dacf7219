"""fetch: HTTP(S) requests to the configured origin, through the host's broker.

The plugin has no network of its own (the sandbox has no interfaces, and
seccomp refuses every socket but AF_UNIX): each request is a ``ctx.http``
call that the host's broker checks against the plugin's approved
``net.http`` capability, which is the configured ``origin``. The broker
enforces every network rule (https only unless the origin says http, no
private or metadata addresses, redirects re-checked, rate and data limits;
docs/network.md); this plugin adds what a caller needs on top: size limits
of its own, a POST switch, a body reader in pieces, and JSON and text
helpers. Broker errors reach the caller unchanged, with their category
("blocked by policy: ...", "timed out: ...").
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from caplet.plugin import (
    BlockedByPolicyError,
    PluginContext,
    Response,
    ResponseError,
    SizeLimitError,
)

_KIB = 1024
#: How many fetched bodies ``read`` keeps (oldest dropped first).
_CACHED_BODIES = 8


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
        raise ValueError("invalid headers: must be an object of string names to string values")
    return headers


def _url(url: object) -> str:
    if not isinstance(url, str) or not url:
        raise ValueError("invalid URL: must be a non-empty string")
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
        response = ctx.http.fetch(
            target, method=method, headers=_headers(headers), body=body, timeout=timeout
        )
        if len(response.body) > max_response:
            raise SizeLimitError(
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
            raise ResponseError(
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
            raise BlockedByPolicyError(
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
            raise SizeLimitError(
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
            raise LookupError(
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
