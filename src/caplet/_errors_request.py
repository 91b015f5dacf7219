"""The errors of a plugin's requests to its host: the broker's and the context's.

``ctx.http.fetch`` fails with the :class:`BrokerError` family, every other
``ctx`` request with the :class:`ContextError` family. Each carries a short,
stable ``category`` its message starts with, and crosses the worker's channel
as (class name, category, message): the worker raises the class the host
named (:data:`caplet._sandbox._protocol.CONTEXT_ERROR_NAMES`). Split out of
:mod:`caplet._errors` by that concern (mend19); :mod:`caplet._errors` re-exports
each.
"""

from __future__ import annotations

from caplet._error_base import CapletError

__all__ = [
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
]


# -- broker ---------------------------------------------------------------------------


class BrokerError(CapletError):
    """Base of the broker layer: a brokered request (``ctx.http.fetch``) failed or was refused.

    ``category`` is the short, stable label the message starts with and the
    decision log records ("blocked by policy", "DNS resolution failed" ...);
    ``plugin`` names the plugin and ``url`` the request URL with its query
    redacted. Messages never contain a resolved address: a plugin must not be
    able to map the host's internal network through error texts. A subclass
    sets its default ``category``; ``category=`` narrows it for one error
    ("connection refused" is a :class:`ConnectionFailedError`).
    """

    category: str = "broker error"

    def __init__(
        self, message: str, *, plugin: str = "", url: str = "", category: str | None = None
    ) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.url = url
        if category is not None:
            self.category = category


class BlockedByPolicyError(BrokerError):
    """The request breaks a rule: no matching grant, a blocked address, a refused header."""

    category: str = "blocked by policy"


class InvalidUrlError(BlockedByPolicyError):
    """The URL does not parse, or uses a form the broker refuses (credentials, controls)."""


class RateLimitError(BrokerError):
    """The plugin exceeded its request rate or its data budget."""

    category: str = "rate limited"


class SizeLimitError(BrokerError):
    """The request or the response is larger than the policy allows."""

    category: str = "too large"


class DnsError(BrokerError):
    """The host name did not resolve (error, timeout or an empty answer)."""

    category: str = "DNS resolution failed"


class ConnectionFailedError(BrokerError):
    """No connection to the checked address: refused, reset or unreachable.

    A refused connection carries the narrower category "connection refused".
    """

    category: str = "connection failed"


class TlsError(BrokerError):
    """The TLS handshake failed (certificate not valid for the host, untrusted, expired)."""

    category: str = "TLS error"


class FetchTimeoutError(BrokerError):
    """The request did not finish within its total time limit."""

    category: str = "timed out"


class RedirectError(BrokerError):
    """A redirect chain was too long, looped, or had no usable ``Location``."""

    category: str = "redirect refused"


class ResponseError(BrokerError):
    """The server's response is not valid HTTP, or its body is not the JSON asked for."""

    category: str = "invalid response"


# -- plugin context ---------------------------------------------------------------------


class ContextError(CapletError):
    """A ``ctx`` request of a plugin was refused or failed (issue 6: the plugin context).

    Raised inside the plugin's worker by ``ctx.kv``, ``ctx.app``,
    ``ctx.plugins`` ... (``ctx.http`` raises the :class:`BrokerError`
    family instead), and by the host's handlers, which send it over the
    channel as (class name, category, message). Like :class:`BrokerError`,
    ``category`` is the short, stable label the message starts with; the
    message names the plugin, what was asked and the fix, and never holds
    host internals (paths, addresses, the application's exception text).
    """

    category: str = "context error"

    def __init__(self, message: str, *, plugin: str = "", category: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin
        if category is not None:
            self.category = category


class ContextUnavailableError(ContextError):
    """No ``ctx`` here: outside a plugin call (import time, a thread that outlived
    its call, the host process), or a host that serves no context requests."""

    category: str = "unavailable"


class NotGrantedError(ContextError):
    """The capability a ``ctx`` request needs was not declared and approved, or
    the application provides no such service."""

    category: str = "not granted"


class ContextArgumentError(ContextError):
    """The arguments of a ``ctx`` request have the wrong type or shape, or break
    the schema the application declared for its capability."""

    category: str = "invalid arguments"


class ContextLimitError(ContextError):
    """A ``ctx`` request is over a limit: key-value sizes, results, requests per call."""

    category: str = "limit exceeded"


class AppError(ContextError):
    """Raised by an application capability handler to refuse a request.

    Its message reaches the plugin as written (it is the application's answer,
    "unknown recipient"); any *other* exception of a handler reaches the
    plugin only as :class:`AppHandlerError`, without its text.
    """

    category: str = "refused by the application"


class AppHandlerError(ContextError):
    """An application capability handler failed, or returned a result that
    cannot cross the boundary; the host logged the details."""

    category: str = "app handler failed"


class CallCycleError(ContextError):
    """``ctx.plugins`` would call a plugin whose call is already in flight
    (A -> B -> A): refused, because the first call's worker is busy waiting."""

    category: str = "call cycle"


class HostCallError(ContextError):
    """The plugin ``ctx.plugins`` called failed: it raised, timed out, crashed,
    returned invalid output, or its circuit breaker is open."""

    category: str = "host.call failed"


# The tree's one home stays caplet._errors, which re-exports each class (see _error_base):
# every class this module defines, found rather than listed (a list repeated the import
# lists of _errors and _sandbox._context).
for _class in [v for v in list(globals().values()) if isinstance(v, type)]:
    if issubclass(_class, CapletError) and _class.__module__ == __name__:
        _class.__module__ = "caplet._errors"
del _class
