"""What a hook is and what an emit returns: the records of :mod:`caplet._host._hooks`.

:class:`HookSpec` is an event as the application defined it (its
:class:`ErrorPolicy`, schemas, ``app:`` capability); :class:`HookCall` is one
subscriber's outcome (:class:`HookCallStatus`) and :class:`HookResults` all
of an emit's, in call order; :class:`HookStatus` is what ``caplet plugins``
and the host report about one plugin's subscription (:class:`HookState`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import assert_never

from caplet._capabilities._model import AppCapability
from caplet._errors import HookFailedError
from caplet._suggest import did_you_mean

__all__ = [
    "ErrorPolicy",
    "HookCall",
    "HookCallStatus",
    "HookResults",
    "HookSpec",
    "HookState",
    "HookStatus",
]


class ErrorPolicy(enum.Enum):
    """What one plugin's failure does to the rest of an emit."""

    #: Call every subscriber; failures are collected beside the results.
    CONTINUE = "continue"
    #: Stop at the first failure; the remaining subscribers are not called.
    ABORT = "abort"


@dataclass(frozen=True, slots=True)
class HookSpec:
    """An event as the application defined it (see :meth:`PluginHost.define_hook`).

    ``schema`` checks each payload before any plugin runs; ``result_schema``
    checks each plugin's result (a result it refuses is that plugin's
    invalid output). ``capability`` is an ``app:`` capability a plugin must
    have been granted to receive the event at all: the application's way of
    keeping an event that carries sensitive data away from plugins nobody
    approved for it.
    """

    event: str
    error_policy: ErrorPolicy = ErrorPolicy.CONTINUE
    schema: Mapping[str, object] | None = None
    result_schema: Mapping[str, object] | None = None
    capability: AppCapability | None = None
    description: str = ""


class HookCallStatus(enum.Enum):
    """What happened to one subscriber during an emit."""

    OK = "ok"
    #: The plugin raised, crashed, refused the payload (its ``args`` schema),
    #: or could not be started.
    FAILED = "failed"
    #: The plugin's timeout passed; its worker was killed.
    TIMED_OUT = "timed-out"
    #: The result broke the function's ``returns`` schema or the event's
    #: ``result_schema``.
    INVALID_OUTPUT = "invalid-output"
    #: The plugin's circuit breaker is open: it was not called.
    CIRCUIT_OPEN = "circuit-open"
    #: A capability the hook needs is not granted: it was not called.
    SKIPPED = "skipped"
    #: ``ABORT``: an earlier subscriber failed, so this one was not called.
    NOT_RUN = "not-run"

    @property
    def is_error(self) -> bool:
        """True for the outcomes that are a plugin's failure (and abort an ABORT event)."""
        match self:
            case (
                HookCallStatus.FAILED
                | HookCallStatus.TIMED_OUT
                | HookCallStatus.INVALID_OUTPUT
                | HookCallStatus.CIRCUIT_OPEN
            ):
                return True
            case HookCallStatus.OK | HookCallStatus.SKIPPED | HookCallStatus.NOT_RUN:
                return False
            case _:  # pragma: no cover - exhaustive
                assert_never(self)


@dataclass(frozen=True, slots=True)
class HookCall:
    """One subscriber's part in an emit: its value, or why there is none.

    ``error`` is the message (naming the plugin and what to fix) and
    ``error_type`` the caplet error class behind it; both are empty for
    ``OK``. For ``SKIPPED`` and ``NOT_RUN``, ``error`` says why.
    """

    plugin: str
    target: str
    priority: int
    status: HookCallStatus
    value: object = None
    error: str = ""
    error_type: str = ""

    @property
    def ok(self) -> bool:
        return self.status is HookCallStatus.OK


@dataclass(frozen=True, slots=True)
class HookResults:
    """Everything one emit did, one :class:`HookCall` per subscriber, in call order.

    It is truthy when no subscriber failed (skipped ones do not count as
    failures: skipping is a decision, not an error). ``aborted_by`` names
    the plugin whose failure stopped an ``ABORT`` event.
    """

    event: str
    error_policy: ErrorPolicy
    calls: tuple[HookCall, ...] = ()
    aborted_by: str | None = None

    @property
    def ok(self) -> bool:
        return not any(call.status.is_error for call in self.calls)

    def __bool__(self) -> bool:
        return self.ok

    def __iter__(self) -> Iterator[HookCall]:
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)

    def __getitem__(self, plugin: str) -> HookCall:
        for call in self.calls:
            if call.plugin == plugin:
                return call
        names = [call.plugin for call in self.calls]
        raise KeyError(
            f"plugin {plugin!r} is not among the subscribers of {self.event!r}"
            f"{did_you_mean(plugin, names)}; subscribers: {', '.join(names) or 'none'}"
        )

    @property
    def values(self) -> Mapping[str, object]:
        """``{plugin: value}`` of the subscribers that succeeded, in call order."""
        return MappingProxyType({c.plugin: c.value for c in self.calls if c.ok})

    @property
    def errors(self) -> tuple[HookCall, ...]:
        """The subscribers that failed, in call order."""
        return tuple(call for call in self.calls if call.status.is_error)

    @property
    def skipped(self) -> tuple[HookCall, ...]:
        """The subscribers that were not called because a capability is not granted."""
        return tuple(call for call in self.calls if call.status is HookCallStatus.SKIPPED)

    def raise_for_errors(self) -> None:
        """Raise :class:`HookFailedError` naming every failed plugin, if any failed."""
        errors = self.errors
        if not errors:
            return
        lines = "; ".join(f"{c.plugin} ({c.status.value}): {c.error}" for c in errors)
        aborted = ", which aborted the event" if self.aborted_by is not None else ""
        raise HookFailedError(
            f"event {self.event!r}: {len(errors)} plugin(s) failed{aborted}: {lines}",
            event=self.event,
            plugins=tuple(c.plugin for c in errors),
        )


class HookState(enum.Enum):
    """Whether an emit would call a plugin's hook (``caplet info`` shows it)."""

    #: The plugin is enabled and every capability the hook needs is granted.
    ACTIVE = "active"
    #: The plugin is not enabled; the hook is called once it is.
    IDLE = "idle"
    #: A capability the hook (or the event) needs is not approved: never called.
    UNAPPROVED = "unapproved"
    #: The application defines no such event, so nothing ever emits it.
    UNKNOWN_EVENT = "unknown-event"


@dataclass(frozen=True, slots=True)
class HookStatus:
    """One hook of one plugin, and whether it would be called (``reason`` says why)."""

    plugin: str
    event: str
    target: str
    priority: int
    capability: str | None
    description: str
    state: HookState
    reason: str
