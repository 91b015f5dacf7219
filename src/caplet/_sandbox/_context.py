"""The plugin side of the context: ``ctx`` and ``caplet.plugin.context()``.

A plugin never receives a host object (design.md section 3). It gets a
:class:`PluginContext` whose methods turn into CONTEXT_REQUEST frames to the
host over the worker's channel (seeds 001 and 002: the capability broker,
the capability-gated context), answered by the host's broker while the call
is in flight:

- ``ctx.log`` and ``ctx.kv`` are always there;
- ``ctx.http`` exists only with an approved ``net.http`` capability,
  ``ctx.app`` only with an approved ``app:`` capability and
  ``ctx.plugins`` only with an approved ``host.call:`` capability. Without
  one the attribute is *absent* (``hasattr(ctx, "http")`` is False, and
  reading it raises AttributeError saying which capability to declare),
  as in EmDash, where ``ctx.email`` is undefined unless ``email:send`` was
  declared (seed 002): a stub that fails later would hide the mistake until
  the first request.

Everything here checks types before sending, so an honest plugin gets a
plain error at the call site; the host checks everything again, because a
worker is never trusted. Outside a call (import time, ``create_functions``,
a thread that outlives its call) there is no context and every request
raises :class:`~caplet._errors.ContextUnavailableError`.

The parts themselves (``ctx.log``, ``ctx.kv``, ``ctx.http``, ``ctx.app``,
``ctx.plugins``) are :mod:`caplet._sandbox._context_parts`.

This module runs in every worker: it imports only the standard library,
msgpack (through the protocol) and caplet's base and sandbox modules.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

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
from caplet._sandbox._context_parts import App, ContextTransport, Http, Kv, Log, Plugins
from caplet._sandbox._protocol import ContextGrants

__all__ = [
    "PluginContext",
    "Refused",
    "context",
    "install",
    "raise_failure",
]


class Refused(Exception):  # noqa: N818 -- a verdict, read as "raise Refused(...)"
    """Raise for an expected refusal of bad input: not found, access denied, too large.

    The caller gets the error like any other (type ``Refused`` and the
    message), but it does not count toward the plugin's circuit breaker:
    seed 003 counts execution errors, and a plugin that correctly refuses a
    bad request three times is not failing. Subclass it for categories with
    names that end in ``Refused`` (``NotFoundRefused``): the host only sees
    the class *name*. Any such name counts, which only lets a plugin keep
    its breaker closed on its own refusals, never on a hang, a crash or an
    invalid output.
    """


#: The classes a CONTEXT_ERROR may name, by name (the protocol admits no others).
_FAILURES: Final[dict[str, type[BrokerError] | type[ContextError]]] = {
    cls.__name__: cls
    for cls in (
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
}


# -- errors from the host ------------------------------------------------------------------


def raise_failure(error: str, category: str, message: str, plugin: str) -> NoReturn:
    """Raise the :mod:`caplet._errors` class a CONTEXT_ERROR named.

    The protocol decoder admits only
    :data:`~caplet._sandbox._protocol.CONTEXT_ERROR_NAMES`; anything
    else that somehow gets here is raised as a plain ContextError.
    """
    cls = _FAILURES.get(error, ContextError)
    raise cls(message, plugin=plugin, category=category)


#: Why each optional attribute may be missing, and the fix.
_ABSENT: Final = {
    "http": "any net.http capability; declare one such as net.http:https://api.example.com",
    "app": "any app: capability; declare the application's capability, such as app:email.send",
    "plugins": "any host.call: capability; declare host.call:<module> and the plugin "
    "providing it in requires",
}


class PluginContext:
    """``ctx``: what a plugin may ask the host for, and nothing else.

    ``plugin`` is the plugin's name. ``log`` and ``kv`` always exist;
    ``http``, ``app`` and ``plugins`` only when a matching capability was
    approved (absent otherwise, never stubbed).
    """

    __slots__ = ("_transport", "app", "http", "kv", "log", "plugin", "plugins")

    plugin: str
    log: Log
    kv: Kv
    http: Http
    app: App
    plugins: Plugins

    def __init__(self, plugin: str, grants: ContextGrants, transport: ContextTransport) -> None:
        self._transport = transport
        self.plugin = plugin
        self.log = Log(plugin, transport)
        self.kv = Kv(plugin, transport)
        if grants.http:
            self.http = Http(plugin, transport)
        if grants.apps:
            self.app = App(plugin, transport, grants.apps)
        if grants.modules:
            self.plugins = Plugins(plugin, transport, grants.modules)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes that are not set: the absent ones.
        why = _ABSENT.get(name)
        if why is None:
            raise AttributeError(f"'PluginContext' object has no attribute {name!r}")
        raise AttributeError(
            f"ctx.{name} is not available: plugin '{self.plugin}' was not granted {why}"
        )

    def __repr__(self) -> str:
        present = [name for name in ("log", "kv", "http", "app", "plugins") if hasattr(self, name)]
        return f"<PluginContext of {self.plugin!r}: {', '.join(present)}>"


# -- the current context ------------------------------------------------------------------


class _State:
    """The worker's one context (a worker serves exactly one plugin)."""

    __slots__ = ("context",)

    def __init__(self) -> None:
        self.context: PluginContext | None = None


_state = _State()


def install(ctx: PluginContext | None) -> None:
    """Make ``ctx`` the worker's context (the worker does this once, after INIT)."""
    _state.context = ctx


def context() -> PluginContext:
    """The running plugin's ``ctx`` (``caplet.plugin.context()``).

    Raises :class:`~caplet._errors.ContextUnavailableError` outside a plugin
    call: in the host process, at import time or in ``create_functions``,
    or in a thread after its call has returned.
    """
    ctx = _state.context
    if ctx is None or not ctx._transport.in_call:
        where = "in a plugin's worker" if ctx is not None else "outside a plugin's worker"
        raise ContextUnavailableError(
            f"unavailable: caplet.plugin.context() was called {where} while no plugin call "
            "was running; call it from inside a plugin function (or take ctx as the "
            "function's first parameter)"
        )
    return ctx
