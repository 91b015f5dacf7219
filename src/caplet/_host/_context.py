"""The host's side of ``ctx``: answering a plugin's requests while its call runs.

Seed 001's capability broker: "a plugin requests an action; the broker on
the main side checks the plugin's approved capabilities before performing
it". Each running worker gets a :class:`PluginRequests` (its
:class:`~caplet._sandbox._launcher.RequestHandler`), built when the worker
starts from the plugin's *granted, configured* capabilities; the channel
(:meth:`caplet._sandbox._subprocess.SubprocessWorker.call`) hands it every
CONTEXT_REQUEST of a call, already decoded and shape-checked. Requests
carry no plugin name: the plugin is the one whose worker sent the frame.

=================  ==========================  ===================================
op                 needs                       served by
=================  ==========================  ===================================
``log``            nothing                     :class:`~._plugin_log.PluginLog`
``kv.*``           nothing                     :class:`~._kv.KvService`
``http.fetch``     a ``net.http`` capability   one :class:`~caplet._broker._http.HttpBroker`
``app``            an ``app:`` capability      :class:`~._apps.AppRegistry`
``plugins.call``   ``host.call:<module>``      the host, in the target's own worker
``guest.call``     never (guest code only)     refused here; see :mod:`~._guest_requests`
=================  ==========================  ===================================

Every HTTP hop, application call and plugin call is written to the
permission log (design.md layer 15); refusals too. Arguments come from an
untrusted worker, so each op checks its keys and types and refuses anything
else with :class:`~caplet._errors.ContextArgumentError`; the host's own
failures (a locked state database) reach the plugin as a
:class:`~caplet._errors.ContextError` without the host's details.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Protocol, assert_never

from caplet._broker._model import BrokerDecision, HttpRequest
from caplet._broker._resolver import Resolver
from caplet._capabilities._model import (
    AppCapability,
    CapabilityKind,
    HostCallCapability,
    NetHttpCapability,
)
from caplet._errors import (
    BrokerError,
    CallCycleError,
    ContextArgumentError,
    ContextError,
    HostCallError,
    HostError,
    NotGrantedError,
    SandboxError,
    StoreError,
)
from caplet._host._apps import AppRegistry
from caplet._host._failures import request_failure
from caplet._host._kv import KvService
from caplet._host._plugin_log import PluginLog
from caplet._host._records import PluginInfo, PluginState
from caplet._logs import caplet_logger
from caplet._sandbox._protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    ContextGrants,
    ContextOp,
    ContextRequest,
    WireValue,
)

if TYPE_CHECKING:
    from caplet._broker._http import HttpBroker
    from caplet._host._manager import PluginManager

__all__ = ["ContextBroker", "PluginCaller", "PluginRequests"]

logger = caplet_logger()

#: Kept back from what is left of a call when a request gets a deadline of
#: its own (a fetch, a nested plugin call), so its answer can still be sent.
_REPLY_MARGIN_S: Final = 0.05

_FETCH_KEYS: Final = frozenset({"url", "method", "headers", "body", "timeout"})
#: Room kept in a reply frame for what is not the body (msgpack framing and ids take
#: a few dozen bytes; a quarter of a tiny channel, at most 4 KiB, leaves plenty).
_REPLY_OVERHEAD: Final = 4096
#: Per header pair, msgpack's framing of a two-item list of strings (generous).
_PAIR_OVERHEAD: Final = 16
#: Fetched bodies one worker may be receiving in pieces at once (its threads').
_BODIES_KEPT: Final = 4


class PluginCaller(Protocol):
    """Runs ``target`` of the enabled plugin ``provider`` in its own worker.

    ``timeout_s`` caps the call's own deadline. Raises what
    :meth:`caplet.PluginHost.call` raises.
    """

    def __call__(
        self, provider: str, target: str, args: tuple[object, ...], timeout_s: float
    ) -> object: ...


def _args(plugin: str, request: ContextRequest, keys: frozenset[str]) -> Mapping[str, object]:
    """The request's arguments, which must be exactly ``keys``."""
    if set(request.args) != keys:
        raise ContextArgumentError(
            f"invalid arguments: plugin '{plugin}': ctx.{request.op.value} takes "
            f"{', '.join(sorted(keys))}, got {', '.join(sorted(request.args)) or 'nothing'}",
            plugin=plugin,
        )
    return request.args


def _left(deadline: float) -> float:
    """Seconds a request may still take within the call's deadline (0 when none)."""
    return max(deadline - time.monotonic() - _REPLY_MARGIN_S, 0.0)


class ContextBroker:
    """The ``ctx`` services of one :class:`~caplet.PluginHost` (kv, log, HTTP, apps, calls).

    ``resolver`` and ``ssl_context`` go to the :class:`HttpBroker` (tests
    inject a static resolver and their own CA), which is built on the first
    fetch (its httpx import costs what most hosts never need to pay);
    ``clock`` times the log's rate limit and the broker's rate limits;
    ``on_http`` is told of each brokered request (the host's metrics).
    """

    def __init__(
        self,
        manager: PluginManager,
        apps: AppRegistry,
        call_plugin: PluginCaller,
        *,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_http: Callable[[BrokerDecision], None] | None = None,
    ) -> None:
        self.manager = manager
        #: Told of every brokered request too (the per-plugin metrics and budgets).
        self._on_http = on_http
        self.apps = apps
        self.call_plugin = call_plugin
        limits = manager.policy.context
        self.limits = limits
        self.kv = KvService(manager.store, limits)
        self.log = PluginLog(limits, clock)
        self._resolver = resolver
        self._ssl_context = ssl_context
        self._clock = clock
        self._http: HttpBroker | None = None
        self._http_lock = threading.Lock()
        #: Per thread: the plugins whose calls wait on a nested ctx.plugins call.
        self._chains = threading.local()

    # -- per worker ---------------------------------------------------------------------

    @staticmethod
    def grants(info: PluginInfo) -> ContextGrants:
        """Which optional ``ctx`` attributes ``info``'s worker gets."""
        capabilities = [c for c in info.capabilities if not c.templated]
        return ContextGrants(
            http=any(isinstance(c, NetHttpCapability) for c in capabilities),
            apps=tuple(sorted({c.name for c in capabilities if isinstance(c, AppCapability)})),
            modules=tuple(
                sorted({c.module for c in capabilities if isinstance(c, HostCallCapability)})
            ),
        )

    def handler(self, info: PluginInfo) -> PluginRequests:
        """The request handler of ``info``'s worker, from its granted capabilities."""
        capabilities = [c for c in info.capabilities if not c.templated]
        return PluginRequests(
            self,
            info.name,
            location=info.location,
            http=tuple(c for c in capabilities if isinstance(c, NetHttpCapability)),
            apps=frozenset(c.name for c in capabilities if isinstance(c, AppCapability)),
            modules=frozenset(c.module for c in capabilities if isinstance(c, HostCallCapability)),
            requires=tuple(r.name for r in info.manifest.requires),
            # The same limit Workers.start gives the worker's channel.
            frame_bytes=self.manager.policy.max_output_bytes(
                info.manifest.limits.max_output_kb, info.tier
            ),
        )

    # -- shared services --------------------------------------------------------------------

    def http(self) -> HttpBroker:
        """The host's one HTTP broker (created on first use)."""
        with self._http_lock:
            if self._http is None:
                from caplet._broker._http import HttpBroker

                self._http = HttpBroker(
                    self.manager.policy.network,
                    resolver=self._resolver,
                    ssl_context=self._ssl_context,
                    clock=self._clock,
                    on_decision=self._log_http,
                )
            return self._http

    def _log_http(self, decision: BrokerDecision) -> None:
        if self._on_http is not None:
            self._on_http(decision)
        details = [decision.outcome]
        if decision.capability:
            details.append(f"capability {decision.capability}")
        if decision.hop:
            details.append(f"redirect hop {decision.hop}")
        if decision.detail:
            details.append(decision.detail)
        self.manager.log_decision(
            decision.plugin,
            "http",
            f"{decision.method} {decision.url}",
            decision.allowed,
            "; ".join(details),
        )

    def provider(self, requires: Sequence[str], module: str) -> str | None:
        """The enabled plugin among ``requires`` that declares ``module``, if any."""
        for name in requires:
            info = self.manager.get_plugin(name)
            if info is None or info.state is not PluginState.ENABLED:
                continue
            if any(m.name == module for m in info.manifest.modules):
                return name
        return None

    def chain(self) -> list[str]:
        """This thread's stack of plugins waiting on a nested call."""
        chain: list[str] | None = getattr(self._chains, "stack", None)
        if chain is None:
            chain = self._chains.stack = []
        return chain


class PluginRequests:
    """Answers one worker's ``ctx`` requests (implements ``RequestHandler``)."""

    __slots__ = (
        "_bodies",
        "_bodies_lock",
        "_broker",
        "_next_handle",
        "apps",
        "frame_bytes",
        "http",
        "location",
        "modules",
        "plugin",
        "requires",
    )

    def __init__(
        self,
        broker: ContextBroker,
        plugin: str,
        *,
        location: str = "",
        http: tuple[NetHttpCapability, ...],
        apps: frozenset[str],
        modules: frozenset[str],
        requires: tuple[str, ...],
        frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self._broker = broker
        self.plugin = plugin
        #: Where the worker's plugin is: its ctx.kv entries are its name's at this place.
        self.location = location
        self.http = http
        self.apps = apps
        self.modules = modules
        self.requires = requires
        #: The worker's channel limit: a fetched body larger than one reply is sent
        #: in pieces (HTTP_BODY), each well inside it.
        self.frame_bytes = frame_bytes
        #: Fetched bodies still being sent in pieces, by handle (the newest few), with
        #: the thread whose call fetched them: the call's end forgets what it left unread.
        self._bodies: dict[int, tuple[int, bytes]] = {}
        self._bodies_lock = threading.Lock()
        self._next_handle = 1

    def __call__(self, request: ContextRequest, deadline: float) -> WireValue:
        try:
            return self._serve(request, deadline)
        except (ContextError, BrokerError):
            raise  # the refusals the plugin is meant to see
        except StoreError as exc:
            logger.warning(
                "ctx.%s of plugin %r failed in the state store: %s",
                request.op.value,
                self.plugin,
                exc,
            )
            raise ContextError(
                f"plugin '{self.plugin}': ctx.{request.op.value} failed in the host (its state "
                "store is unavailable); try again later",
                plugin=self.plugin,
                category="host error",
            ) from exc
        except Exception as exc:
            # Anything else is a bug of the host's (issue 13): the plugin gets a
            # ContextError and its worker lives on; any other exception would
            # kill the worker and leave host.call as itself.
            raise request_failure(self.plugin, f"ctx.{request.op.value}", exc) from exc

    def _serve(self, request: ContextRequest, deadline: float) -> WireValue:
        op = request.op
        plugin = self.plugin
        broker = self._broker
        if op is ContextOp.LOG:
            args = _args(plugin, request, frozenset({"level", "message"}))
            return broker.log.write(plugin, args["level"], args["message"])
        # The worker's identity, name and place, is the host's (decide14), never the request's.
        where = self.location
        if op is ContextOp.KV_GET:
            key = _args(plugin, request, frozenset({"key"}))["key"]
            return dict(broker.kv.get(plugin, key, location=where))
        if op is ContextOp.KV_SET:
            args = _args(plugin, request, frozenset({"key", "value"}))
            broker.kv.set(plugin, args["key"], args["value"], location=where)
            return None
        if op is ContextOp.KV_DELETE:
            key = _args(plugin, request, frozenset({"key"}))["key"]
            return broker.kv.delete(plugin, key, location=where)
        if op is ContextOp.KV_KEYS:
            prefix = _args(plugin, request, frozenset({"prefix"}))["prefix"]
            return broker.kv.keys(plugin, prefix, location=where)
        if op is ContextOp.HTTP_FETCH:
            return self._fetch(_args(plugin, request, _FETCH_KEYS), deadline)
        if op is ContextOp.HTTP_BODY:
            return self._body_piece(_args(plugin, request, frozenset({"handle", "offset"})))
        if op is ContextOp.APP:
            return self._app(_args(plugin, request, frozenset({"name", "args"})))
        if op is ContextOp.PLUGINS_CALL:
            return self._call(_args(plugin, request, frozenset({"target", "args"})), deadline)
        if op is ContextOp.GUEST_CALL:
            # Only guest code imports host modules (caplet._host._guest_requests
            # serves it); a plugin that sends it is asking for a way around its
            # host.call grants.
            reason = (
                f"not granted: plugin '{plugin}' sent guest.call, which only guest code may "
                "use; a plugin calls other plugins through ctx.plugins (declare "
                "host.call:<module> and the provider in requires)"
            )
            broker.manager.log_decision(plugin, "guest.call", "guest.call", False, reason)
            raise NotGrantedError(reason, plugin=plugin)
        assert_never(op)

    # -- http ---------------------------------------------------------------------------

    def _fetch(self, args: Mapping[str, object], deadline: float) -> WireValue:
        plugin = self.plugin
        url, method, headers, body, timeout = (
            args["url"],
            args["method"],
            args["headers"],
            args["body"],
            args["timeout"],
        )
        if not self.http:
            withheld = self._broker.manager.withheld_reason(plugin, None, CapabilityKind.NET_HTTP)
            self._broker.manager.log_decision(
                plugin,
                "http",
                url if isinstance(url, str) else "?",
                False,
                f"not granted: {withheld}" if withheld else "not granted: no net.http capability",
            )
            raise NotGrantedError(
                f"not granted: {withheld}"
                if withheld
                else f"not granted: plugin '{plugin}' has no net.http capability, so ctx.http "
                "is not available; declare one such as net.http:https://api.example.com",
                plugin=plugin,
            )
        pairs = headers if isinstance(headers, list) else None
        if (
            not isinstance(url, str)
            or not isinstance(method, str)
            or not isinstance(body, bytes)
            or pairs is None
            or not all(
                isinstance(p, list)
                and len(p) == 2
                and isinstance(p[0], str)
                and isinstance(p[1], str)
                for p in pairs
            )
            or (
                timeout is not None
                and (isinstance(timeout, bool) or not isinstance(timeout, int | float))
            )
        ):
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': ctx.http.fetch takes url (str), method "
                "(str), headers ([name, value] str pairs), body (bytes) and timeout (seconds "
                "or None)",
                plugin=plugin,
            )
        policy = self._broker.manager.policy.network
        requested = float(timeout) if timeout is not None else None
        if requested is not None and not requested > 0:
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': the timeout of ctx.http.fetch must be "
                f"a positive number of seconds, got {requested!r}",
                plugin=plugin,
            )
        # The fetch must end inside the call's deadline, or the answer would
        # arrive after the host has killed the worker for being late.
        timeout_s = max(min(policy.timeout_s(requested), _left(deadline)), 0.001)
        response = self._broker.http().fetch(
            plugin,
            self.http,
            HttpRequest(
                url,
                method=method,
                headers=tuple((p[0], p[1]) for p in pairs),
                body=body,
                timeout_s=timeout_s,
            ),
        )
        headers = [[name, value] for name, value in response.headers]
        answer: dict[str, WireValue] = {
            "status": response.status,
            "headers": headers,
            "body": response.body,
            "url": response.url,
        }
        head = len(response.url.encode()) + sum(
            len(name.encode()) + len(value.encode()) + _PAIR_OVERHEAD for name, value in headers
        )
        if head + len(response.body) + self._overhead <= self.frame_bytes:
            return answer
        # Larger than one reply: the body follows in pieces the worker asks for.
        with self._bodies_lock:
            handle = self._next_handle
            self._next_handle += 1
            self._bodies[handle] = (threading.get_ident(), response.body)
            while len(self._bodies) > _BODIES_KEPT:
                del self._bodies[min(self._bodies)]
        answer.update({"body": b"", "rest": len(response.body), "handle": handle})
        return answer

    @property
    def _overhead(self) -> int:
        return min(_REPLY_OVERHEAD, self.frame_bytes // 4)

    def _body_piece(self, args: Mapping[str, object]) -> WireValue:
        """The next piece of a fetched body (HTTP_BODY); the last one forgets the body."""
        handle, offset = args["handle"], args["offset"]
        with self._bodies_lock:
            kept = self._bodies.get(handle) if isinstance(handle, int) else None
        body = kept[1] if kept is not None else None
        if (
            body is None
            or not isinstance(handle, int)
            or type(offset) is not int
            or not 0 <= offset < len(body)
        ):
            raise ContextArgumentError(
                f"invalid arguments: plugin '{self.plugin}': ctx.http body piece "
                f"{handle!r} at {offset!r} is not one the host is sending (a body is sent "
                "once, in order, within the call that fetched it)",
                plugin=self.plugin,
            )
        piece = body[offset : offset + max(self.frame_bytes - self._overhead, 1)]
        if offset + len(piece) >= len(body):
            with self._bodies_lock:
                self._bodies.pop(handle, None)
        return piece

    def end_call(self) -> None:
        """Forget the bodies the calling thread's call fetched and left unread.

        A body is sent within the call that fetched it; one a plugin never read
        held up to ``max_response_bytes`` of the host's memory per handle until
        later fetches pushed it out (and the pieces could be asked for by the
        next call). The host calls this when each call into the worker ends.
        """
        if not self._bodies:
            return  # the warm path: nothing was fetched in pieces
        me = threading.get_ident()
        with self._bodies_lock:
            for handle in [h for h, (owner, _) in self._bodies.items() if owner == me]:
                del self._bodies[handle]

    # -- app ----------------------------------------------------------------------------

    def _app(self, args: Mapping[str, object]) -> WireValue:
        plugin = self.plugin
        name = args["name"]
        target = f"app:{name}" if isinstance(name, str) else "app:?"
        manager = self._broker.manager
        if isinstance(name, str) and name not in self._broker.apps.reachable(self.apps):
            withheld = manager.withheld_reason(
                plugin, AppCapability(name, declared=""), CapabilityKind.APP
            )
            if withheld:
                manager.log_decision(plugin, "app", target[:200], False, withheld)
                raise NotGrantedError(f"not granted: {withheld}", plugin=plugin)
        try:
            result = self._broker.apps.invoke(
                plugin,
                self.apps,
                name,
                args["args"],
                max_result_bytes=self._broker.limits.app_max_result_bytes,
            )
        except ContextError as exc:
            manager.log_decision(plugin, "app", target[:200], False, str(exc))
            raise
        manager.log_decision(plugin, "app", target, True, "handled")
        return result

    # -- plugins ------------------------------------------------------------------------

    def _call(self, args: Mapping[str, object], deadline: float) -> WireValue:
        plugin = self.plugin
        broker = self._broker
        target, call_args = args["target"], args["args"]
        module, _, function = target.partition(".") if isinstance(target, str) else ("", "", "")
        if not module or not function or not isinstance(call_args, list):
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': ctx.plugins.call takes a target "
                "'module.function' and positional arguments",
                plugin=plugin,
            )
        assert isinstance(target, str)
        if module not in self.modules:
            withheld = broker.manager.withheld_reason(
                plugin, HostCallCapability(module, declared=""), CapabilityKind.HOST_CALL
            )
            reason = (
                f"not granted: {withheld}"
                if withheld
                else f"not granted: plugin '{plugin}' was not granted host.call:{module}; "
                "declare it (and the plugin providing it in requires) and have it approved"
            )
            broker.manager.log_decision(plugin, "host.call", target[:200], False, reason)
            raise NotGrantedError(reason, plugin=plugin)
        provider = broker.provider(self.requires, module)
        if provider is None:
            reason = (
                f"not granted: no enabled plugin in the requires of '{plugin}' provides module "
                f"{module!r}; enable the plugin that provides it"
            )
            broker.manager.log_decision(plugin, "host.call", target[:200], False, reason)
            raise NotGrantedError(reason, plugin=plugin)
        chain = broker.chain()
        if provider == plugin or provider in chain:
            path = " -> ".join([*chain, plugin, provider])
            reason = (
                f"call cycle: plugin '{plugin}' calling {target} of plugin '{provider}' would "
                f"re-enter a call in flight ({path}); a plugin waiting on a call cannot serve "
                "another, so break the cycle"
            )
            broker.manager.log_decision(plugin, "host.call", f"{provider}:{target}", False, reason)
            raise CallCycleError(reason, plugin=plugin)
        left = _left(deadline)
        if not left > 0:
            reason = (
                f"host.call failed: plugin '{plugin}' calling {target} of '{provider}': no time "
                "is left of the calling call's deadline; raise its limits.timeout_ms"
            )
            broker.manager.log_decision(plugin, "host.call", f"{provider}:{target}", False, reason)
            raise HostCallError(reason, plugin=plugin)
        chain.append(plugin)
        try:
            value = broker.call_plugin(provider, target, tuple(call_args), left)
        except (SandboxError, HostError, BrokerError) as exc:
            reason = f"host.call failed: plugin '{plugin}' calling {target} of '{provider}': {exc}"
            broker.manager.log_decision(plugin, "host.call", f"{provider}:{target}", False, reason)
            raise HostCallError(reason, plugin=plugin) from exc
        finally:
            chain.pop()
        broker.manager.log_decision(plugin, "host.call", f"{provider}:{target}", True, "called")
        return value
