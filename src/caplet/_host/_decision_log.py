"""The decision log as the host writes it: refusals at a bounded rate, a history that is kept.

Every decision (an approval, an enable, an HTTP hop, a refused syscall ...)
goes to the state store through :class:`DecisionLog` (issue 15, which found
5,000 refused fetches in one call writing 5,000 rows in 3 s and pushing every
earlier decision out of ``caplet log``'s view):

* **Refusals are rate-limited per plugin.** ``Policy.log.denials_per_minute``
  refused decisions of one plugin are written one by one per sliding
  minute; the rest are counted per action, and one summary row per action
  ("N more denials of http, e.g. https://...") is written when a later
  refusal of that plugin passes the limit again, and when the host closes
  (:meth:`flush`).
* **So are a plugin's allowed requests.** The allowed decisions a plugin
  itself drives (:data:`RATED_ACTIONS`: an HTTP hop, a ``host.call``, an
  ``app`` request ...; up to 10,000 per call) are written one by one up to
  ``log.allowed_per_minute`` per plugin, then summarised the same way.
  Decisions about a plugin (approve, enable, disable, quarantine, policy)
  are always written. Without this bound one plugin's allowed calls pushed
  its own earlier refusals out of the log through retention (red-team round
  3, "evidence erasure").
* **Rows are bounded.** A target keeps its first :data:`MAX_TARGET_CHARS`
  characters and a detail its first :data:`MAX_DETAIL_CHARS`, each saying
  how much was left out: both carry a plugin's own text (a refused URL, a
  ``Refused`` message, up to the channel's 64 Ki characters), and the row
  limits count rows, not bytes (red-team round 3: 13 GB of state database
  from a plugin with no capability).
* **Retention.** Rows older than ``retention_days`` and the oldest beyond
  ``max_rows`` are deleted when the log is opened (only when there is
  something to delete: a cheap count first) and every
  :data:`_PRUNE_EVERY` writes after. Beyond ``max_rows`` the oldest
  *allowed* rows go first; refusals and the policy's rows go only when they
  alone fill the log (the store's ``prune_decisions``), so flooding the log
  with allowed requests erases no refusal.

Thread-safe: the host logs from every thread that serves a call.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from caplet._host._log_limits import LogLimits
from caplet._trust._store import Decision, TrustStore

__all__ = ["MAX_DETAIL_CHARS", "MAX_TARGET_CHARS", "RATED_ACTIONS", "DecisionLog", "bounded_text"]

_WINDOW_S: Final = 60.0
_DAY_S: Final = 86_400.0
#: Writes between two retention passes.
_PRUNE_EVERY: Final = 500
#: The characters of a target and of a detail a row keeps.
MAX_TARGET_CHARS: Final = 1024
MAX_DETAIL_CHARS: Final = 4096
#: Allowed decisions a plugin drives itself, many per call: rate-limited like refusals.
RATED_ACTIONS: Final = frozenset({"http", "host.call", "guest.call", "app", "call"})


def bounded_text(text: str, limit: int) -> str:
    """*text*, or its start and how much was left out."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 48]
    return f"{kept}... ({len(text) - len(kept)} more characters not recorded)"


@dataclass(slots=True)
class _Held:
    """Decisions of one plugin, action and outcome not yet written: how many, the last."""

    count: int
    target: str
    detail: str


#: (plugin, allowed): the rate a plugin's refusals, or its allowed requests, are held to.
_Budget = tuple[str, bool]
#: (plugin, action, allowed): the decisions held for one summary row.
_HeldKey = tuple[str, str, bool]


class DecisionLog:
    """Writes decisions to ``store`` within ``limits`` (see the module docstring).

    ``clock`` is wall-clock seconds (the rows' time); ``monotonic`` times the
    rate window. Both are injectable so tests never sleep.
    """

    def __init__(
        self,
        store: TrustStore,
        limits: LogLimits,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._limits = limits
        self._clock = clock
        self._monotonic = monotonic
        self._recent: dict[_Budget, collections.deque[float]] = {}
        self._held: dict[_HeldKey, _Held] = {}
        self._writes = 0
        self._lock = threading.Lock()

    def record(
        self, plugin: str, action: str, target: str, allowed: bool, detail: str = ""
    ) -> None:
        """Write one decision, or count it when it is over the plugin's rate."""
        target = bounded_text(target, MAX_TARGET_CHARS)
        detail = bounded_text(detail, MAX_DETAIL_CHARS)
        held: list[Decision] = []
        with self._lock:
            if not allowed or action in RATED_ACTIONS:
                limit = (
                    self._limits.allowed_per_minute if allowed else self._limits.denials_per_minute
                )
                now = self._monotonic()
                recent = self._recent.setdefault((plugin, allowed), collections.deque())
                while recent and recent[0] <= now - _WINDOW_S:
                    recent.popleft()
                if len(recent) >= limit:
                    key = (plugin, action, allowed)
                    entry = self._held.get(key)
                    if entry is None:
                        self._held[key] = _Held(1, target, detail)
                    else:
                        entry.count += 1
                        entry.target, entry.detail = target, detail
                    return
                recent.append(now)
                held = self._take_held(plugin, allowed)
            self._writes += 1
            prune = self._writes % _PRUNE_EVERY == 0
        for summary in held:
            self._store.log_decision(summary)
        self._store.log_decision(
            Decision(
                at=self._clock(),
                plugin=plugin,
                action=action,
                target=target,
                allowed=allowed,
                detail=detail,
            )
        )
        if prune:
            self.prune()

    def flush(self) -> None:
        """Write the summary rows of everything still held (the host is closing)."""
        with self._lock:
            budgets = {(plugin, allowed) for plugin, _, allowed in self._held}
            summaries = [s for budget in budgets for s in self._take_held(*budget)]
        for summary in summaries:
            self._store.log_decision(summary)

    def prune(self) -> int:
        """Apply the retention settings now; return how many rows were deleted."""
        count, oldest = self._store.decisions_span()
        before = self._clock() - self._limits.retention_days * _DAY_S
        if count <= self._limits.max_rows and (oldest is None or oldest >= before):
            return 0
        return self._store.prune_decisions(before=before, keep=self._limits.max_rows)

    def _take_held(self, plugin: str, allowed: bool) -> list[Decision]:
        """The summary rows of what ``plugin`` had held under one budget, removed from the
        count (lock held)."""
        summaries = []
        for key in [k for k in self._held if k[0] == plugin and k[2] is allowed]:
            entry = self._held.pop(key)
            action = key[1]
            if allowed:
                what, limit = (
                    "allowed",
                    f"log.allowed_per_minute ({self._limits.allowed_per_minute}",
                )
            else:
                what, limit = (
                    "denials of",
                    f"log.denials_per_minute ({self._limits.denials_per_minute}",
                )
            summaries.append(
                Decision(
                    at=self._clock(),
                    plugin=plugin,
                    action=action,
                    target=entry.target,
                    allowed=allowed,
                    detail=(
                        f"{entry.count} more {what} {action} (the last: {entry.target}"
                        f"{': ' + entry.detail if entry.detail else ''}) were not recorded one "
                        f"by one: over the policy's {limit} per plugin)"
                    ),
                )
            )
        return summaries
