"""The parts a :class:`PluginHost` is made of, as its concerns see them.

:class:`PluginHost` builds them (``__init__``); the concerns it is
assembled from (:mod:`._host_lifecycle`, :mod:`._host_events`,
:mod:`._host_agent`) only declare and use them, so each can be read,
and type-checked, on its own. Apart so those modules import neither the
host nor each other.
"""

from __future__ import annotations

import threading

from caplet._config._prompt import Prompter
from caplet._host._breaker import CircuitBreaker
from caplet._host._call_path import CallPath
from caplet._host._guards import PluginGuards
from caplet._host._guest_code import GuestCode
from caplet._host._hooks import HookBus
from caplet._host._manager import PluginManager
from caplet._host._workers import Workers

__all__ = ["HostParts"]


class HostParts:
    """The parts every concern of :class:`PluginHost` uses (see the module docstring)."""

    # Made by PluginHost.__init__; declared here for the concerns that use them.
    manager: PluginManager
    prompter: Prompter | None
    _lifecycle: threading.RLock
    _guards: PluginGuards
    _workers: Workers
    _calls: CallPath
    _guests: GuestCode
    _hook_bus: HookBus
    _cancel: threading.local

    def breaker(self, name: str) -> CircuitBreaker:
        """The plugin's circuit breaker (created closed on first use)."""
        return self._guards.breaker(name)
