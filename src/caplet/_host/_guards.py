"""Per plugin, made on first use: the lock of its record and worker, and its circuit breaker.

The host's locking design (which lock serialises what) is in the
:class:`~caplet._host._host.PluginHost` docstring and docs/architecture.md
("Threads"); this module holds the per-plugin part of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from caplet._host._breaker import CircuitBreaker
from caplet._host._policy import Policy

__all__ = ["PluginGuards"]


class _Manager(Protocol):
    @property
    def policy(self) -> Policy: ...


class PluginGuards:
    """Each plugin's lock and circuit breaker, created on first use under one lock."""

    def __init__(self, manager: _Manager, *, clock: Callable[[], float]) -> None:
        self._manager = manager
        #: One breaker per plugin, kept across worker restarts and
        #: disable/enable; dropped when the plugin is quarantined or released.
        self.breakers: dict[str, CircuitBreaker] = {}
        #: Per plugin: held while its record changes and its worker is
        #: started, stopped or replaced. Taken after the host's lifecycle lock,
        #: never before it, and never while waiting for a worker to close.
        self.locks: dict[str, threading.RLock] = {}
        #: Guards creating plugin locks and breakers (two threads must not
        #: each create one for the same plugin).
        self.registry_lock = threading.Lock()
        #: The circuit breakers' clock (injectable so tests never sleep).
        self._clock = clock

    def breaker(self, name: str) -> CircuitBreaker:
        """The plugin's circuit breaker (created closed on first use)."""
        breaker = self.breakers.get(name)
        if breaker is None:
            with self.registry_lock:
                breaker = self.breakers.get(name)
                if breaker is None:
                    breaker = self.breakers[name] = CircuitBreaker.from_policy(
                        name, self._manager.policy, clock=self._clock
                    )
        return breaker

    def breaker_state(self, name: str) -> str:
        breaker = self.breakers.get(name)
        return breaker.state.value if breaker is not None else "closed"

    def drop_breaker(self, name: str) -> None:
        with self.registry_lock:
            self.breakers.pop(name, None)

    def lock(self, name: str) -> threading.RLock:
        """The lock of plugin ``name``'s record and worker (created on first use)."""
        lock = self.locks.get(name)
        if lock is None:
            with self.registry_lock:
                lock = self.locks.setdefault(name, threading.RLock())
        return lock
