"""Guest code as one host runs it: the runner made by the first ``exec``, the catalog, the gate.

A snippet runs in a zero-capability worker (:mod:`caplet._host._guest`); what
it may import is the catalog of the enabled plugins as of the manager's
generation (:mod:`caplet._host._guest_catalog`), and each ``host.*`` call it
makes comes back through :class:`~caplet._host._guest_requests.GuestRequests`,
behind the caller's ``gate`` when there is one, into the host's ordinary
call path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from caplet._errors import LifecycleError, NotGrantedError
from caplet._host._guest import GuestRunner
from caplet._host._guest_catalog import GuestCatalog, guest_catalog
from caplet._host._guest_requests import GuestCaller, GuestRequests
from caplet._host._guest_result import GuestResult
from caplet._host._manager import PluginManager
from caplet._host._policy import Policy
from caplet._sandbox._launcher import Launcher

__all__ = ["GuestCode"]


class GuestCode:
    """One host's guest code: its runner and warm pool, its catalog, its snippets."""

    def __init__(
        self,
        manager: PluginManager,
        launcher: Launcher,
        run_dir: Path,
        call: GuestCaller,
        cancel: threading.local,
    ) -> None:
        self.manager = manager
        self.launcher = launcher
        self._run_dir = run_dir
        #: The host's call path for a guest's ``host.*`` call.
        self._call = call
        #: Per thread: the event that cancels what this thread is doing (the host's).
        self._cancel = cancel
        #: Guest code's runner and warm pool, created by the first exec.
        self.runner: GuestRunner | None = None
        self._lock = threading.Lock()
        #: The catalog of host modules and the manager generation it was built at.
        self._catalog: tuple[int, GuestCatalog] | None = None
        self._closed = False

    @property
    def policy(self) -> Policy:
        return self.manager.policy

    def started(self) -> GuestRunner:
        """The runner, made on first use; refused once the host is closed."""
        with self._lock:
            if self._closed:
                raise LifecycleError("the host is closed; guest code cannot run any more")
            if self.runner is None:
                self.runner = GuestRunner(
                    self.launcher,
                    self.policy.guest,
                    self._run_dir,
                    start_timeout_s=self.policy.start_timeout_s,
                )
            return self.runner

    def catalog(self) -> GuestCatalog:
        """The ``host.<module>`` guest code may import now, and why not the others."""
        cached = self._catalog
        generation = self.manager.generation
        if cached is None or cached[0] != generation:
            cached = self._catalog = (generation, guest_catalog(self.manager.list_plugins()))
        return cached[1]

    def run(
        self,
        code: str,
        *,
        timeout: float | None = None,
        gate: Callable[[str, str], str | None] | None = None,
    ) -> GuestResult:
        """:meth:`PluginHost.exec <caplet._host._host.PluginHost.exec>`."""
        runner = self.started()

        def catalog() -> GuestCatalog:
            full = self.catalog()
            # What the gate hides is not even importable: its names stay out too.
            return full if gate is None else full.offered(gate)

        handler = GuestRequests(
            catalog,
            self._call if gate is None else _gated(gate, self._call),
            self.manager.validators,
            self.manager.log_decision,
        )
        return runner.run(
            code,
            timeout=timeout,
            catalog=catalog(),
            handler=handler,
            cancel=getattr(self._cancel, "event", None),
        )

    def interrupt(self, thread: int) -> bool:
        """Stop the snippet ``thread`` is waiting on; False when it waits on none."""
        guests = self.runner
        return guests is not None and guests.interrupt(thread)

    def close(self) -> None:
        """Close the runner and its pool; guest code cannot run any more."""
        with self._lock:
            self._closed = True
            guests, self.runner = self.runner, None
        if guests is not None:
            guests.close()


def _gated(
    gate: Callable[[str, str], str | None], call: Callable[..., object]
) -> Callable[..., object]:
    """``call`` behind ``gate``: a refused ``host.*`` call raises NotGrantedError, which
    the guest sees with the gate's reason (GuestRequests turns it into HostCallError)."""

    def gated(
        provider: str,
        target: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        timeout_s: float,
    ) -> object:
        refused = gate(provider, target)
        if refused is not None:
            raise NotGrantedError(refused, plugin=provider)
        return call(provider, target, args, kwargs, timeout_s)

    return gated
