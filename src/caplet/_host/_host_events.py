"""The host's hooks: the events an application defines and emits to its plugins.

A thin face over :class:`~caplet._host._hooks.HookBus`, which calls each
subscriber through the host's ordinary call path; a failure only the bus
sees (a result the event's schema refuses) is counted here for the
plugin's circuit breaker. Apart from the lifecycle and guest code, which
never emit.
"""

from __future__ import annotations

from collections.abc import Mapping

from caplet._errors import (
    SandboxError,
)
from caplet._host._hook_model import ErrorPolicy, HookResults, HookSpec, HookStatus
from caplet._host._host_parts import HostParts

__all__ = ["HostEvents"]


class HostEvents(HostParts):
    """Hooks of a :class:`PluginHost` (see the module docstring)."""

    # -- hooks ----------------------------------------------------------------------------------

    def define_hook(
        self,
        event: str,
        *,
        error_policy: ErrorPolicy | str = ErrorPolicy.CONTINUE,
        schema: Mapping[str, object] | None = None,
        result_schema: Mapping[str, object] | None = None,
        capability: str | None = None,
        description: str = "",
    ) -> HookSpec:
        """Define an event plugins may subscribe to (once per event, at start-up).

        ``error_policy``: ``CONTINUE`` (default) calls every subscriber and
        collects failures; ``ABORT`` stops at the first failure. ``schema``
        (JSON Schema, Draft 2020-12) checks every payload before any plugin
        runs; ``result_schema`` checks each plugin's result (a refused result
        is that plugin's invalid output, counted by its circuit breaker).
        ``capability`` (``app:<name>``) limits the event to plugins granted
        it. Raises :class:`HookError` for a malformed name, a second
        definition, an unknown policy or an unusable schema.
        """
        return self._hook_bus.define(
            event,
            error_policy=error_policy,
            schema=schema,
            result_schema=result_schema,
            capability=capability,
            description=description,
        )

    def hook_specs(self) -> tuple[HookSpec, ...]:
        """The events defined so far, in definition order."""
        return self._hook_bus.specs()

    def emit(self, event: str, payload: object = None) -> HookResults:
        """Call every enabled plugin subscribed to ``event`` with ``payload``.

        Subscribers run one after another, dependencies first (``requires``),
        then by ascending priority; each through the ordinary call path (its
        own worker, timeout, circuit breaker and schemas). The payload is
        the caller's input, as an agent's arguments are (:meth:`agent_call`):
        a subscriber's failures may open this host's breaker but never count
        toward quarantine. A hook whose capability is not granted is skipped. The results hold each
        plugin's value or error; under ``CONTINUE`` no plugin's failure stops
        the others, under ``ABORT`` the first stops the rest
        (``results.aborted_by``). Every subscriber's outcome is logged.
        Raises :class:`HookError` for an event never defined and
        :class:`HookPayloadError` (nothing called) for a payload the event's
        schema refuses or that cannot cross the worker channel.
        """
        return self._hook_bus.emit(event, payload)

    def hook_status(self, name: str) -> tuple[HookStatus, ...]:
        """Each hook of plugin ``name``, and whether an emit would call it now (and why not)."""
        return self._hook_bus.statuses(name)

    def _count_hook_failure(self, name: str, target: str, exc: SandboxError) -> None:
        """Count a failure only the hook dispatcher saw (a result the event's schema refuses):
        toward the breaker, never toward quarantine (the payload was the caller's)."""
        self._calls.failed(
            name, target, self.breaker(name), exc, self._workers.running.get(name), nested=True
        )
