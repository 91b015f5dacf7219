"""caplet.plugin: the API a plugin uses inside its sandbox.

A plugin function receives its ``ctx`` as its first argument when that
parameter is named ``ctx``::

    def create_functions(config):
        def fetch_title(ctx, url):
            return ctx.http.get(url).text()[:80]
        return {"pages": {"title": fetch_title}}

and any code running during a call can get it with :func:`context`. The
context's attributes exist only for approved capabilities: ``ctx.http``
(``net.http``), ``ctx.app`` (``app:``), ``ctx.plugins`` (``host.call:``);
``ctx.log`` and ``ctx.kv`` are always there. Every method is a request to
the host, which checks it against the approved capabilities before doing
anything (docs/architecture.md, "the plugin context").

This module is importable inside the worker with only the standard library
and msgpack: it imports nothing of the host.
"""

from __future__ import annotations

from caplet._errors import (
    AppError,
    AppHandlerError,
    BlockedByPolicyError,
    BrokerError,
    CallCycleError,
    ConnectionFailedError,
    ContextArgumentError,
    ContextError,
    ContextLimitError,
    ContextUnavailableError,
    DnsError,
    FetchTimeoutError,
    HostCallError,
    InvalidUrlError,
    NotGrantedError,
    RateLimitError,
    RedirectError,
    ResponseError,
    SizeLimitError,
    TlsError,
)
from caplet._sandbox._context import (
    PluginContext,
    Refused,
    context,
)
from caplet._sandbox._context_parts import (
    App,
    Http,
    Kv,
    Log,
    Plugins,
    Response,
)

__all__ = [
    "App",
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
    "Http",
    "InvalidUrlError",
    "Kv",
    "Log",
    "NotGrantedError",
    "PluginContext",
    "Plugins",
    "RateLimitError",
    "RedirectError",
    "Refused",
    "Response",
    "ResponseError",
    "SizeLimitError",
    "TlsError",
    "context",
]
