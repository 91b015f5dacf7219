"""Hooks: events the embedding application defines and plugins subscribe to.

The application declares each event once with :meth:`PluginHost.define_hook`
(its error policy, an optional JSON Schema for the payload and for each
plugin's result, an optional ``app:`` capability a plugin must hold to
receive it) and fires it with :meth:`PluginHost.emit`. A plugin subscribes
in its manifest (``[hooks] "content:afterSave" = "index.on_save"``) by naming
one of its *declared* functions, so a hook call is an ordinary call: the
same sandboxed worker, the plugin's own timeout, circuit breaker and
schemas, the same decision log.

One emit:

1. the event must be defined, and the payload must match its schema and be
   able to cross the boundary; otherwise :class:`HookPayloadError` and no
   plugin runs (it is the application's mistake, not a plugin's);
2. the enabled subscribers are ordered: dependencies first (a plugin that
   ``requires`` another, even through a plugin that is not subscribed, runs
   after it), then ascending ``priority`` (lower first, as Sphinx's
   ``app.connect``), then name, so the order is total and reproducible;
3. a subscriber whose hook needs a capability that is not granted (or that
   lacks the event's ``app:`` capability) is skipped, never called;
4. each other subscriber is called with the payload; its value or its error
   is collected. Under ``CONTINUE`` one plugin's exception, timeout, crash
   or invalid output never stops the others; under ``ABORT`` the first
   error stops the rest, which are reported as not run, and the results
   name the plugin that aborted the event;
5. every subscriber's outcome (called, failed, skipped, not run) is one
   line in the decision log (action ``hook``).

Why not pluggy: pluggy's hook implementations are in-process callables
whose argument names it matches against the spec's signature, and a plugin
here is a remote function in another process with no signature to inspect.
Beyond that, pluggy orders implementations by registration (LIFO) and
``tryfirst``/``trylast`` only, with no numeric priority and no dependency
order; the first exception of any implementation propagates and ends the
call, and results come back as an anonymous list without the plugin each
came from. Each of those is what an emit here must do differently
(per-plugin results and errors, CONTINUE, priorities, ``requires``). Event
names like ``content:afterSave`` are not Python identifiers either, which
``pm.hook.<name>`` needs. What is left of pluggy for us would be a registry
of names, so this module is a small dispatcher instead, with no new
dependency.
"""

from __future__ import annotations

import graphlib
import heapq
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from caplet._capabilities._model import AppCapability, Capability, CapabilityKind
from caplet._capabilities._parse import parse_capability
from caplet._errors import (
    CallTimeoutError,
    CapabilityError,
    CapletError,
    CircuitOpenError,
    HookError,
    HookPayloadError,
    InvalidOutputError,
    ProtocolError,
    SandboxError,
)
from caplet._host._hook_model import (
    ErrorPolicy,
    HookCall,
    HookCallStatus,
    HookResults,
    HookSpec,
    HookState,
    HookStatus,
)
from caplet._host._manager import PluginManager
from caplet._host._records import PluginInfo, PluginState
from caplet._host._validate import DIALECT, compile_schema, first_error
from caplet._manifest._model import HOOK_EVENT_PATTERN, Hook
from caplet._sandbox._protocol import check_value
from caplet._suggest import did_you_mean

__all__ = [
    "HookBus",
    "order_subscribers",
]

_EVENT_RE = re.compile(HOOK_EVENT_PATTERN)


@dataclass(frozen=True, slots=True)
class _Defined:
    """A defined event and its compiled schemas (compiled once, at definition)."""

    spec: HookSpec
    payload_validator: Any = None
    result_validator: Any = None


#: ``(plugin, target, payload) -> value``: the host's ordinary call path.
CallFunction = Callable[[str, str, object], object]
#: Counts a failure the call path could not see (an invalid result by the
#: event's own schema) toward the plugin's circuit breaker.
FailureCounter = Callable[[str, str, SandboxError], None]


class HookBus:
    """The events one :class:`PluginHost` defines, and the dispatcher that emits them."""

    def __init__(
        self, manager: PluginManager, call: CallFunction, count_failure: FailureCounter
    ) -> None:
        self._manager = manager
        self._call = call
        self._count_failure = count_failure
        self._defined: dict[str, _Defined] = {}

    # -- definitions ----------------------------------------------------------------------

    def define(
        self,
        event: str,
        *,
        error_policy: ErrorPolicy | str = ErrorPolicy.CONTINUE,
        schema: Mapping[str, object] | None = None,
        result_schema: Mapping[str, object] | None = None,
        capability: str | None = None,
        description: str = "",
    ) -> HookSpec:
        """Define ``event`` (once); see :meth:`PluginHost.define_hook`."""
        if not isinstance(event, str) or not _EVENT_RE.fullmatch(event):
            raise HookError(
                f"invalid event name {event!r}; expected '<namespace>:<event>' "
                f"(letters, digits, '_' and '-'), e.g. 'content:afterSave'",
                event=str(event),
            )
        if event in self._defined:
            raise HookError(
                f"event {event!r} is already defined; define each event once (at start-up), "
                "or give the second one its own name",
                event=event,
            )
        policy = _error_policy(event, error_policy)
        spec = HookSpec(
            event=event,
            error_policy=policy,
            schema=_frozen(schema),
            result_schema=_frozen(result_schema),
            capability=_app_capability(event, capability),
            description=description,
        )
        self._defined[event] = _Defined(
            spec=spec,
            payload_validator=_compile(event, "schema", schema),
            result_validator=_compile(event, "result_schema", result_schema),
        )
        return spec

    def specs(self) -> tuple[HookSpec, ...]:
        """Every defined event, in definition order."""
        return tuple(defined.spec for defined in self._defined.values())

    def _definition(self, event: str) -> _Defined:
        defined = self._defined.get(event)
        if defined is None:
            names = list(self._defined)
            raise HookError(
                f"event {event!r} is not defined{did_you_mean(event, names)}; define it first "
                f"with host.define_hook({event!r}) (defined: {', '.join(names) or 'none'})",
                event=event,
            )
        return defined

    # -- emitting ---------------------------------------------------------------------------

    def emit(self, event: str, payload: object = None) -> HookResults:
        """Call every enabled subscriber of ``event``; see :meth:`PluginHost.emit`."""
        defined = self._definition(event)
        spec = defined.spec
        _check_payload(defined, payload)
        subscribers = self._manager.hook_subscribers(event)
        granted = {name: capabilities for name, _, capabilities in subscribers}
        ordered = order_subscribers(
            [(name, hook) for name, hook, _ in subscribers], self._manager.requirement_graph()
        )
        calls: list[HookCall] = []
        aborted_by: str | None = None
        for name, hook in ordered:
            reason = _blocked(hook, granted[name], spec)
            if reason:
                call = HookCall(
                    name, hook.target, hook.priority, HookCallStatus.SKIPPED, None, reason
                )
            elif aborted_by is not None:
                call = HookCall(
                    name,
                    hook.target,
                    hook.priority,
                    HookCallStatus.NOT_RUN,
                    None,
                    f"not run: {aborted_by!r} failed first and {event!r} aborts on the first error",
                )
            else:
                call = self._call_one(defined, name, hook, payload)
                if call.status.is_error and spec.error_policy is ErrorPolicy.ABORT:
                    aborted_by = name
            self._log(event, call)
            calls.append(call)
        return HookResults(event, spec.error_policy, tuple(calls), aborted_by)

    def _call_one(self, defined: _Defined, name: str, hook: Hook, payload: object) -> HookCall:
        """Call one subscriber through the host's call path; every caplet error is collected.

        Only :class:`CapletError` is collected: those are what a plugin can
        cause (its exception, timeout, crash, output, a tree that changed
        since it was enabled). Anything else is a bug or an interrupt and
        propagates.
        """
        try:
            value = self._call(name, hook.target, payload)
        except CapletError as exc:
            return HookCall(
                name,
                hook.target,
                hook.priority,
                _status_of(exc),
                None,
                str(exc),
                type(exc).__name__,
            )
        validator = defined.result_validator
        problem = first_error(validator, value) if validator is not None else None
        if problem is not None:
            where, message, schema_path = problem
            error = InvalidOutputError(
                f"plugin {name!r}: {hook.target} returned a value the application's "
                f"result_schema for {defined.spec.event!r} refuses: at {where}: {message} "
                f"(schema path {schema_path}); make the hook return what the event expects",
                plugin=name,
                target=hook.target,
                schema_path=schema_path,
            )
            self._count_failure(name, hook.target, error)
            return HookCall(
                name,
                hook.target,
                hook.priority,
                HookCallStatus.INVALID_OUTPUT,
                None,
                str(error),
                type(error).__name__,
            )
        return HookCall(name, hook.target, hook.priority, HookCallStatus.OK, value)

    def _log(self, event: str, call: HookCall) -> None:
        detail = call.status.value
        if call.error:
            detail += f": {call.error}"
        else:
            detail += f" (priority {call.priority})"
        self._manager.log_decision(
            call.plugin, "hook", f"{event} -> {call.target}", call.ok, detail
        )

    # -- status -------------------------------------------------------------------------------

    def statuses(self, name: str) -> tuple[HookStatus, ...]:
        """Each hook of plugin ``name`` and whether an emit would call it now."""
        info = self._manager.require_plugin(name)
        granted = self._granted(info)
        enabled = info.state is PluginState.ENABLED
        statuses: list[HookStatus] = []
        for hook in info.manifest.hooks:
            defined = self._defined.get(hook.event)
            spec = defined.spec if defined is not None else None
            blocked = _blocked(hook, granted, spec)
            state: HookState
            if self._defined and spec is None:
                # Only meaningful once the application defined something: a
                # host that defines nothing (the CLI) cannot tell a typo.
                state = HookState.UNKNOWN_EVENT
                reason = (
                    f"not called: the application defines no event {hook.event!r}"
                    f"{did_you_mean(hook.event, self._defined)}"
                )
            elif blocked:
                state, reason = HookState.UNAPPROVED, blocked
            elif enabled:
                state, reason = HookState.ACTIVE, f"called on {hook.event}"
            else:
                state = HookState.IDLE
                reason = f"not called while the plugin is {info.state.value}; called once enabled"
            statuses.append(
                HookStatus(
                    plugin=name,
                    event=hook.event,
                    target=hook.target,
                    priority=hook.priority,
                    capability=hook.capability.declared if hook.capability else None,
                    description=hook.description,
                    state=state,
                    reason=reason,
                )
            )
        return tuple(statuses)

    def _granted(self, info: PluginInfo) -> Sequence[Capability]:
        """The capabilities the plugin has (enabled) or would have (approved) now.

        Enabled: what enable granted. Locked mode: what the lock entry
        approves. Otherwise: what the approval of the current content
        records; nothing while it is not approved.
        """
        if info.state is PluginState.ENABLED:
            return info.capabilities
        if self._manager.locked:
            verdict = self._manager.lock_verdict(info.name)
            if verdict is None or verdict.problem is not None:
                return ()
            return verdict.granted
        if info.approved and info.approval is not None:
            approved = set(info.approval.capabilities)
            return tuple(c for c in info.manifest.capabilities if c.declared in approved)
        return ()


def order_subscribers(
    subscribers: Sequence[tuple[str, Hook]], requires: Mapping[str, Collection[str]]
) -> list[tuple[str, Hook]]:
    """Dependencies first, then ascending priority, then name.

    ``requires`` maps every known plugin to the plugins it requires; a
    dependency counts through plugins that are not subscribed (a -> b -> c
    puts c before a). Discovery refuses ``requires`` cycles, so the graph is
    acyclic.
    """
    hooks = dict(subscribers)
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for name in hooks:
        sorter.add(name, *(dep for dep in _requirements_of(name, requires) if dep in hooks))
    sorter.prepare()
    ready: list[tuple[int, str]] = []
    order: list[tuple[str, Hook]] = []
    while sorter.is_active():
        for name in sorter.get_ready():
            heapq.heappush(ready, (hooks[name].priority, name))
        _, name = heapq.heappop(ready)
        order.append((name, hooks[name]))
        sorter.done(name)
    return order


def _requirements_of(name: str, requires: Mapping[str, Collection[str]]) -> set[str]:
    """Every plugin ``name`` requires, directly or through others."""
    found: set[str] = set()
    stack = list(requires.get(name, ()))
    while stack:
        other = stack.pop()
        if other not in found:
            found.add(other)
            stack.extend(requires.get(other, ()))
    return found


def _blocked(hook: Hook, granted: Sequence[Capability], spec: HookSpec | None) -> str:
    """Why the hook must not be called with these grants ("" when it may)."""
    if hook.capability is not None and hook.capability.declared not in {
        c.declared for c in granted
    }:
        return f"not called: capability {hook.capability.declared} not approved"
    if spec is not None and spec.capability is not None and spec.capability not in granted:
        return (
            f"not called: the application delivers {spec.event} only to plugins granted "
            f"{spec.capability}, which is not approved for this plugin"
        )
    return ""


def _status_of(exc: CapletError) -> HookCallStatus:
    if isinstance(exc, CallTimeoutError):
        return HookCallStatus.TIMED_OUT
    if isinstance(exc, InvalidOutputError):
        return HookCallStatus.INVALID_OUTPUT
    if isinstance(exc, CircuitOpenError):
        return HookCallStatus.CIRCUIT_OPEN
    return HookCallStatus.FAILED


def _error_policy(event: str, value: ErrorPolicy | str) -> ErrorPolicy:
    if isinstance(value, ErrorPolicy):
        return value
    try:
        return ErrorPolicy(value)
    except ValueError:
        choices = [p.value for p in ErrorPolicy]
        raise HookError(
            f"event {event!r}: unknown error_policy {value!r}{did_you_mean(str(value), choices)}; "
            f"expected ErrorPolicy.CONTINUE or ErrorPolicy.ABORT ({' or '.join(choices)})",
            event=event,
        ) from None


def _app_capability(event: str, text: str | None) -> AppCapability | None:
    if text is None:
        return None
    try:
        capability = parse_capability(text)
    except CapabilityError as exc:
        raise HookError(f"event {event!r}: capability: {exc}", event=event) from exc
    if not isinstance(capability, AppCapability):
        raise HookError(
            f"event {event!r}: capability {text!r} is a {capability.kind.value} capability; an "
            f"event can only require an application capability ({CapabilityKind.APP.value}:"
            "<name>), e.g. 'app:users.read'",
            event=event,
        )
    return capability


def _frozen(schema: Mapping[str, object] | None) -> Mapping[str, object] | None:
    return MappingProxyType(dict(schema)) if schema is not None else None


def _compile(event: str, keyword: str, schema: Mapping[str, object] | None) -> Any:
    if schema is None:
        return None

    def refuse(problem: str) -> HookError:
        return HookError(
            f"event {event!r}: {keyword} is not a usable JSON Schema: {problem}; fix the "
            f"{keyword} passed to define_hook (caplet validates with Draft 2020-12, {DIALECT})",
            event=event,
        )

    return compile_schema(schema, refuse)


def _check_payload(defined: _Defined, payload: object) -> None:
    """Refuse, before any plugin runs, a payload no plugin could receive or the schema refuses."""
    event = defined.spec.event
    # The channel checks every call too; checking here, once, turns a payload
    # no plugin can receive into one error for the application instead of
    # one failure per subscriber.
    try:
        check_value(payload, "payload")
    except ProtocolError as exc:
        raise HookPayloadError(f"event {event!r}: {exc}; pass plain data", event=event) from None
    validator = defined.payload_validator
    error = first_error(validator, payload) if validator is not None else None
    if error is not None:
        where, message, schema_path = error
        raise HookPayloadError(
            f"event {event!r}: the payload does not match the event's schema: at {where}: "
            f"{message} (schema path {schema_path}); no plugin was called; pass a payload "
            "that matches the schema given to define_hook",
            event=event,
            schema_path=schema_path,
        )
