"""PluginHost: the object an application embeds.

It owns a :class:`PluginManager` (lifecycle and trust) and one worker per
enabled plugin (through a :class:`Launcher`), and turns
``host.call("hello", "greet.say", "world")`` into a request to that worker.

The path of one call (docs/architecture.md has the picture):

1. ``enable`` has verified trust (approval or a fresh audit of the current
   content hash), the danger gate, configuration and capabilities, and
   recorded the verified hash.
2. The first call (or ``enable`` itself) copies the plugin tree into a private
   read-only snapshot, hashes the snapshot, and refuses if the hash is not the
   verified one: code is only ever loaded from that snapshot (layer 9).
3. The launcher starts a worker on the snapshot with the resolved
   configuration and the declared modules; the worker registers only declared
   functions and reports the rest, which the host logs as refused.
4. Each call is one request frame and one reply frame, with a deadline; a
   timeout or crash kills the worker, the host survives and the next call
   starts a fresh worker from a fresh, re-verified snapshot.
5. Around each call sit the runtime guards: the plugin's circuit breaker
   (:mod:`caplet._host._breaker`) refuses calls at once while it is open,
   and the function's declared JSON Schemas (:mod:`caplet._host._validate`)
   check the arguments before and the result after. Every failure of the
   plugin counts for the breaker; a breaker that trips too often
   quarantines the plugin.
6. While a call runs, the plugin's ``ctx`` requests (log, kv, HTTP,
   application capabilities, other plugins) arrive on the same channel and
   are answered by the worker's handler from :mod:`caplet._host._context`,
   checked against the plugin's granted capabilities, within the call's
   deadline.

Guest code (``exec``) takes its own path, in :mod:`caplet._host._guest`: a
zero-capability worker from a warm pool per snippet, whose ``host.<module>``
calls come back through :mod:`caplet._host._guest_requests` into this
class's ordinary call path.

Threads: any application thread may call any method; the locking design
(which lock serialises what, and why the warm call takes none) is in the
:class:`PluginHost` docstring and in docs/architecture.md ("Threads").

:class:`PluginHost` builds its parts here and is assembled from one class
per concern: the lifecycle (:mod:`._host_lifecycle`), hooks
(:mod:`._host_events`), guest code and what an agent reads
(:mod:`._host_agent`), over the parts they share (:mod:`._host_parts`).
This module keeps construction, calls, health checks, updates and closing.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from caplet._audit._provider import AuditorProvider
from caplet._broker._resolver import Resolver
from caplet._config._prompt import Prompter
from caplet._errors import (
    CallTimeoutError,
    CapletError,
    LifecycleError,
    SandboxError,
)
from caplet._host._apps import AppHandler, AppRegistry
from caplet._host._call_path import CallPath, is_refusal
from caplet._host._context import ContextBroker
from caplet._host._guards import PluginGuards
from caplet._host._guest_code import GuestCode
from caplet._host._hooks import HookBus
from caplet._host._host_agent import HostAgent
from caplet._host._host_events import HostEvents
from caplet._host._host_lifecycle import HostLifecycle
from caplet._host._loading import LoadingRules
from caplet._host._manager import PluginManager
from caplet._host._manager_state import RED_TEAM_LABEL
from caplet._host._observe import Observer
from caplet._host._policy import Isolation, Policy
from caplet._host._policy_file import (
    EffectivePolicy,
    note_loosened,
    project_store,
    resolve_policy,
)
from caplet._host._records import Outcome
from caplet._logs import caplet_logger
from caplet._sandbox._identity import worker_identity
from caplet._sandbox._launcher import Launcher
from caplet._sandbox._sandboxed import default_launcher, layers_switch_banner
from caplet._trust._store import TrustStore

if TYPE_CHECKING:
    from caplet._host._consent import Widening
    from caplet._host._update import UpdateReport
from caplet._host._running import RunningWorker
from caplet._host._workers import Workers

__all__ = ["HEALTH_FUNCTION", "PluginHost"]

_LOG = caplet_logger()

PluginFunction = Callable[..., Any]
#: The optional health-check function an update runs (seed 004).
HEALTH_FUNCTION = "health"


class PluginHost(HostLifecycle, HostEvents, HostAgent):
    """Discover, trust, configure and call plugins, each in its own worker.

    ``host.manager`` exposes the full lifecycle API; the methods here are the
    everyday subset plus everything that needs a worker. Use it as a context
    manager (or call :meth:`close`) so workers and snapshots are cleaned up.
    ``clock`` times the circuit breakers' cooldowns and quarantine window.
    ``auditor`` is the LLM auditor (see :class:`PluginManager`): by default
    from ``CAPLET_LLM_*``, static-only when those are unset.
    ``lockfile``, ``loading`` (locked mode, ``CAPLET_LOAD_PLUGINS``, autoload,
    strictness; default: from the environment) and ``dist_path`` (where
    installed distributions are looked for; default ``sys.path``) go to the
    :class:`PluginManager`. ``resolver`` and ``ssl_context`` go to the HTTP
    broker behind ``ctx.http`` (default: the system resolver and CA bundle;
    tests pass a static resolver and their own CA); its limits are
    ``policy.network``.

    ``store`` is where approvals, audits, quarantine, the permission log and
    ``ctx.kv`` live: a :class:`TrustStore`, or an address
    (``postgresql://…``, shared by a fleet; a state directory), by default
    what ``CAPLET_STORE`` names, else SQLite in ``state_dir``
    (docs/fleet.md). Workers, snapshots and the run directory stay in
    ``state_dir`` on this machine whichever store is used; a quarantine
    recorded by another process or node stops this host's calls within
    ``policy.state_refresh_s``.

    ``red_team=True`` is the public red-team switch (issue 13): the static
    gate is off (danger findings and the risk policy are logged, not
    enforced), so a red team measures the kernel layers alone without
    faking an audit. Only this argument turns it on; it is refused in
    locked mode, logged as a warning, and every decision this host logs
    and :attr:`isolation` say so. Consent is still asked for.

    **Threads.** One host may be used from any number of application threads
    (a web server's pool, an agent framework's tools); nothing is bound to
    the thread that created it. What serialises what:

    * A *call* takes no host lock on the warm path (a dict lookup and
      attribute reads, then the worker). A worker runs one call at a time
      under its own lock, so calls to one plugin queue there while calls to
      different plugins run in parallel.
    * Starting, stopping and replacing one plugin's worker holds that
      plugin's lock: when a worker dies under several callers, exactly one
      of them starts the replacement and the others use it. A worker is
      only ever stopped by the thread that took it out of service, so no
      thread stops a replacement another one just started; a caller whose
      worker ended before its call was sent (nothing ran) retries once on
      the current worker, and that is not counted as a failure.
    * Lifecycle changes (discover, configure, audit, approve, enable,
      disable, quarantine, release) hold one host-wide lifecycle lock, plus
      the plugin's lock around the change to its record and worker. Workers
      they retire are closed after the locks are released, because closing
      waits for a call still running in that worker.
    * The circuit breaker, the state store, the guest pool and the ``ctx``
      services have locks of their own.

    A call that races a disable either runs on the old worker or is refused
    with :class:`LifecycleError`. :meth:`update` is not atomic against other
    threads changing the same plugin, and an application handler (``ctx.app``)
    must not change the lifecycle of the plugin whose request it is serving.
    Call :meth:`close` once the other threads have stopped calling.
    """

    def __init__(
        self,
        plugins_dir: Path | str,
        *,
        state_dir: Path | str | None = None,
        policy: Policy | EffectivePolicy | Path | str | None = None,
        store: TrustStore | str | None = None,
        launcher: Launcher | None = None,
        prompter: Prompter | None = None,
        discover: bool = True,
        clock: Callable[[], float] = time.monotonic,
        auditor: AuditorProvider | Literal["env"] | None = "env",
        lockfile: Path | str | None = None,
        loading: LoadingRules | None = None,
        dist_path: Sequence[Path | str] | None = None,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        red_team: bool = False,
    ) -> None:
        #: The policy in force and where each value came from (``caplet policy``).
        self.effective_policy = resolve_policy(policy, plugins_dir)
        self.manager = PluginManager(
            plugins_dir,
            state_dir=state_dir,
            store=store,
            policy=self.effective_policy.policy,
            auditor=auditor,
            lockfile=lockfile,
            loading=loading,
            dist_path=dist_path,
            red_team=red_team,
        )
        self.manager.policy_file = self.effective_policy.file
        if store is None:
            # A store only a project's file names vouches for nothing (decide14).
            self.manager.unvouched_store = project_store(self.effective_policy)
        self._owns_launcher = launcher is None
        self.launcher: Launcher = (
            launcher
            if launcher is not None
            else default_launcher(
                strict=self.policy.isolation is Isolation.STRICT,
                identity=worker_identity(self.policy.worker_uid, self.policy.worker_gid),
            )
        )
        banner = layers_switch_banner()
        if banner:
            # As loud as the red-team switch, which turns off less (steer22).
            _LOG.warning("%s", banner)
        self.prompter = prompter
        #: Serialises lifecycle changes: the manager's records are not safe
        #: to change from two threads at once (see the class docstring).
        #: Re-entrant: enable configures, a trip quarantines.
        self._lifecycle = threading.RLock()
        #: Each plugin's lock (taken after ``_lifecycle``) and circuit breaker.
        self._guards = PluginGuards(self.manager, clock=clock)
        #: Per-plugin metrics and budgets, and where they are reported (docs/metrics.md).
        self.observer = Observer(
            self.manager, clock=clock, breaker=self._guards.breaker_state, is_refusal=is_refusal
        )
        #: The application capabilities this host provides (register_capability).
        self.apps = AppRegistry()
        #: What answers the plugins' ctx requests.
        self.context = ContextBroker(
            self.manager,
            self.apps,
            self._call_from_plugin,
            resolver=resolver,
            ssl_context=ssl_context,
            clock=clock,
            on_http=self.observer.http,
        )
        #: Snapshots and work directories, in the state directory where no
        #: grant reaches (:mod:`caplet._host._run_dir`); the manager's.
        self._run_dir = self.manager.run_dir
        #: The live worker of each plugin (:mod:`caplet._host._workers`).
        self._workers = Workers(
            self.manager, self.launcher, self.context, self.observer, self._guards
        )
        #: Per thread: the event that cancels what this thread is doing for an
        #: asyncio caller (AsyncPluginHost; see cancellable and interrupt).
        self._cancel = threading.local()
        #: The path of a call (:mod:`caplet._host._call_path`).
        self._calls = CallPath(
            self.manager,
            self._workers,
            self._guards,
            self.observer,
            clock=clock,
            cancel=self._cancel,
            quarantine=self.quarantine,
            follow_quarantine=self._follow_quarantine,
        )
        #: Guest code: its runner and warm pool, created by the first exec, and its catalog.
        self._guests = GuestCode(
            self.manager, self.launcher, self._run_dir, self._call_from_guest, self._cancel
        )
        #: The events this host defines (made here, not lazily, so two
        #: threads emitting first cannot each make one).
        #: A hook's payload is the application's event, which may carry its user's or an
        #: agent's text: its calls go as an agent's do (the breaker, never quarantine).
        self._hook_bus = HookBus(self.manager, self.agent_call, self._count_hook_failure)
        note_loosened(self.effective_policy, self.manager)
        if discover:
            self.manager.discover()

    # -- application capabilities -----------------------------------------------------------

    def register_capability(
        self,
        capability: str,
        handler: AppHandler,
        *,
        schema: Mapping[str, Any] | None = None,
        implies: Sequence[str] = (),
    ) -> None:
        """Provide the application capability ``capability`` (``"app:email.send"``).

        A plugin granted it calls ``ctx.app("email.send", args)``; the host
        checks the grant, validates ``args`` against ``schema`` (JSON Schema
        Draft 2020-12) and only then calls ``handler(AppCall(plugin,
        capability, args))`` in the calling thread. Its result must cross
        the boundary (JSON-like values, bytes) and stay within
        ``policy.context.app_max_result_bytes``; raise
        :class:`~caplet.AppError` to refuse with a message the plugin sees
        (any other exception is logged, and the plugin only learns that the
        handler failed). ``implies`` names capabilities a plugin holding
        this one may use too ("write implies read":
        ``register_capability("app:content.write", h, implies=("app:content.read",))``).
        Raises :class:`~caplet.CapabilityError` for a bad name or schema, or
        a capability registered twice.
        """
        self.apps.register(capability, handler, schema=schema, implies=implies)

    # -- calling --------------------------------------------------------------------------

    def call(self, name: str, target: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call ``module.function`` of an enabled plugin in its worker.

        ``name`` and ``target`` are positional-only, so every keyword goes to
        the plugin's function (``host.call("p", "m.f", name="v")``).

        Raises :class:`LifecycleError` when the plugin is not enabled, does
        not declare the function, or the arguments do not match its declared
        ``args`` schema; :class:`CircuitOpenError` (without running anything)
        while the plugin's circuit breaker is open; and the rest of the
        :class:`SandboxError` family for what happens in the worker (timeout,
        crash, the plugin's exception, :class:`InvalidOutputError` for a
        result its ``returns`` schema refuses).
        """
        return self._calls.call(name, target, args, kwargs)

    def agent_call(self, name: str, target: str, /, *args: Any, **kwargs: Any) -> Any:
        """:meth:`call` for arguments an agent chose (a tool call of a model): the same
        checks, worker and errors, but a failure may open this host's circuit breaker
        and never counts toward quarantine.

        A quarantine stops the plugin on every host sharing the store until a
        person runs ``caplet release``; an agent is steered by whatever text it
        reads (another plugin's result, a fetched page), so its input must not
        be able to take an honest plugin out of service that way, just as
        guest code's calls cannot (``caplet mcp`` calls every tool through
        this; attack18).
        """
        return self._calls.call(name, target, args, kwargs, caller_input=True)

    def _call_from_plugin(
        self, provider: str, target: str, args: tuple[object, ...], timeout_s: float
    ) -> object:
        """``ctx.plugins.call`` of another plugin: the provider's own worker, breaker and
        schemas, its deadline cut to ``timeout_s`` (see :class:`ContextBroker`)."""
        if not timeout_s > 0:
            raise CallTimeoutError(
                f"plugin '{provider}': {target} was not started: the calling plugin's "
                "deadline has passed"
            )
        return self._calls.guarded_call(provider, target, args, {}, timeout_cap=timeout_s)

    def functions(self, name: str) -> dict[str, dict[str, PluginFunction]]:
        """``{module: {function: callable}}`` for an enabled plugin's declared functions.

        Each callable is a proxy that calls into the worker; it holds no
        reference to anything in the worker.
        """
        info = self._workers.enabled_info(name)
        table: dict[str, dict[str, PluginFunction]] = {}
        for module in info.manifest.modules:
            table[module.name] = {
                fn: _proxy(self, name, f"{module.name}.{fn}") for fn in module.function_names
            }
        return table

    def update(
        self,
        name: str,
        source: str | Path,
        *,
        consent: bool | Callable[[Widening], bool] = False,
        config: Iterable[str] = (),
        health_timeout_s: float = 10.0,
    ) -> UpdateReport:
        """Update *name* from a folder, a wheel or a distribution, with rollback.

        See :func:`caplet._host._update.update_plugin`: the new version is
        staged, validated, scanned and audited; what widens the approval needs
        *consent* (asked with the :class:`Widening`: capabilities added or broadened,
        new ``requires``, a lower version, a higher risk), and so does any update of
        a plugin that is not approved; after the swap its ``health()`` runs in the
        sandbox, and any failure restores the old version with its approval and lock entry.
        One lifecycle change for other threads: their approve, enable,
        disable (...) wait until the update has finished or rolled back;
        calls to enabled plugins go on.
        """
        from caplet._host._update import update_plugin

        with self._lifecycle:
            return update_plugin(
                self,
                name,
                source,
                consent=consent,
                config=config,
                health_timeout_s=health_timeout_s,
            )

    def health_target(self, name: str) -> str | None:
        """The plugin's health check: its first declared function named ``health``.

        ``health()`` (seed 004's ``healthCheck()``) is optional; it is found in
        the manifest, never by importing the plugin, and takes no arguments.
        """
        manifest = self.manager.require_plugin(name).manifest
        for module in manifest.modules:
            if HEALTH_FUNCTION in module.function_names:
                return f"{module.name}.{HEALTH_FUNCTION}"
        return None

    def check_health(self, name: str, *, timeout_s: float) -> Outcome:
        """Call the enabled plugin's ``health()`` in its worker, within *timeout_s*.

        Healthy unless it raises, times out, crashes the worker or returns
        ``False``; a plugin without a health check is healthy once its worker
        started (which ``enable`` already proved).
        """
        target = self.health_target(name)
        if target is None:
            return Outcome(True, f"plugin {name!r} declares no health(); its worker started")
        running: RunningWorker | None = None
        try:
            running, parts = self._calls.prepare_call(name, target)
            value = running.call(
                parts[0],
                parts[1],
                (),
                {},
                timeout_s=min(timeout_s, running.timeout_s),
            )
        except (SandboxError, LifecycleError) as exc:
            if running is not None:
                self._workers.stop(name, running)
            return Outcome(False, f"plugin {name!r} failed its health check {target}: {exc}")
        if value is False:
            return Outcome(False, f"plugin {name!r} reported itself unhealthy ({target} -> false)")
        return Outcome(True, f"plugin {name!r} is healthy ({target})")

    def worker_pid(self, name: str) -> int | None:
        """The pid of the plugin's live worker, if one is running."""
        running = self._workers.running.get(name)
        return running.worker.pid if running is not None and running.worker.alive else None

    def rejected_registrations(self, name: str) -> Sequence[str]:
        """What the running worker's ``create_functions`` returned without declaring it."""
        running = self._workers.running.get(name)
        return running.worker.started.rejected if running is not None else ()

    @property
    def isolation(self) -> str:
        """What isolation the launcher gives each worker (shown to users)."""
        if self.manager.red_team:
            return f"{self.launcher.isolation} {RED_TEAM_LABEL}"
        return self.launcher.isolation

    @property
    def red_team(self) -> bool:
        """Whether this host runs with the static gate off (the red-team switch)."""
        return self.manager.red_team

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker, remove snapshots, close the store. Idempotent."""
        if self._workers.closed:
            return
        self._workers.closed = True
        self._guests.close()
        # Every name with a lock: a worker being started right now holds its
        # plugin's lock, and any start after this pass sees the host closed.
        with self._guards.registry_lock:
            names = {*self._guards.locks, *self._workers.running}
        with self._lifecycle:
            retired = self._workers.detach_each(sorted(names))
        self._workers.dispose_each(retired)
        if self._owns_launcher:
            self.launcher.close()
        self.observer.close()  # the last stats snapshot, after every worker's last reading
        try:
            self.manager.close()  # removes the run directory too
        except CapletError as exc:
            _LOG.warning("%s", exc)  # litter the next host sweeps; never fail a close over it

    def __enter__(self) -> PluginHost:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _proxy(host: PluginHost, name: str, target: str) -> PluginFunction:
    def call(*args: Any, **kwargs: Any) -> Any:
        return host.call(name, target, *args, **kwargs)

    call.__name__ = target.rpartition(".")[2]
    call.__qualname__ = f"{name}:{target}"
    return call
