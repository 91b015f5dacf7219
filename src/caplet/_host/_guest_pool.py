"""The warm pool of guest workers (issue 3, point 5; issue 6, point 5).

A guest snippet should not wait for a sandbox to be built. The pool keeps
``size`` guest workers started and READY; :meth:`GuestPool.take` hands one
out (or, when none is waiting, starts one there and then: a cold start) and
:meth:`GuestPool.discard` takes it back *to be closed*, never to be handed
out again: one worker, one snippet, so nothing a snippet leaves behind
(module globals, files in its private /tmp, threads) reaches the next.

One background thread does the slow parts: it starts a replacement after
each take and closes discarded workers, so ``exec`` returns as soon as
the snippet's answer is in. A start that fails pauses refilling until the
next take (no loop of failing starts); that take then starts cold and
raises the real error. :meth:`close` stops the thread and closes every
worker, waiting or discarded.

A pool of size 0 keeps no thread and no worker, but still closes a used
worker in a short-lived thread of its own: closing means tearing down the
worker's namespaces (about half of a cold ``exec`` here), and the snippet's
answer is in by then. :meth:`close` waits for those threads too.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from caplet._errors import LifecycleError
from caplet._logs import caplet_logger

__all__ = ["GuestPool", "Lease"]

logger = caplet_logger()


class Lease(Protocol):
    """A started guest worker as the pool sees it."""

    @property
    def alive(self) -> bool: ...

    def close(self) -> None: ...


LeaseT = TypeVar("LeaseT", bound=Lease)


class GuestPool(Generic[LeaseT]):
    """Up to ``size`` started workers from ``start``, each handed out once."""

    def __init__(self, start: Callable[[], LeaseT], size: int) -> None:
        self._start = start
        self.size = max(size, 0)
        self._idle: deque[LeaseT] = deque()
        self._discarded: list[LeaseT] = []
        self._starting = 0
        self._paused = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        #: Size 0: the threads closing used workers, until they are done.
        self._closers: set[threading.Thread] = set()
        #: Why the last background start failed ("" when none did).
        self.last_failure = ""

    @property
    def ready(self) -> int:
        """How many started workers are waiting."""
        with self._cond:
            return len(self._idle)

    def take(self) -> LeaseT:
        """A fresh started worker: a waiting one, else one started now."""
        dead: list[LeaseT] = []
        with self._cond:
            self._check_open()
            lease = None
            while self._idle:
                candidate = self._idle.popleft()
                if candidate.alive:
                    lease = candidate
                    break
                dead.append(candidate)  # died while waiting (killed, out of memory)
            self._paused = False
            if lease is not None:
                self._wake()
        for candidate in dead:
            self.discard(candidate)
        if lease is not None:
            return lease
        # Cold: this start goes first, the refill after it (both would queue
        # at the same zygote, and the caller is the one waiting).
        lease = self._start()
        with self._cond:
            if not self._closed:
                self._wake()
        return lease

    def discard(self, lease: LeaseT) -> None:
        """Close ``lease`` (in the background when the pool has a thread)."""
        with self._cond:
            if not self._closed and self.size > 0:
                self._discarded.append(lease)
                self._wake()
                return
            if not self._closed:
                closer = threading.Thread(
                    target=self._close_one, args=(lease,), name="caplet-guest-close", daemon=True
                )
                self._closers.add(closer)
                closer.start()
                return
        lease.close()

    def fill(self) -> int:
        """Return once ``size`` started workers wait: the missing ones are started in
        this thread, those the background thread is starting are waited for.

        Raises what a start raises (:class:`~caplet._errors.WorkerStartError`).
        """
        while True:
            with self._cond:
                self._check_open()
                if len(self._idle) >= self.size:
                    return len(self._idle)
                if len(self._idle) + self._starting >= self.size:
                    # A background start is under way: wait for it (a failure
                    # notifies too, and the next turn starts here instead).
                    self._cond.wait()
                    continue
                self._starting += 1
            try:
                lease = self._start()
            finally:
                with self._cond:
                    self._starting -= 1
            self._keep(lease)

    def close(self) -> None:
        """Stop refilling and close every worker, waiting or discarded. Idempotent."""
        with self._cond:
            self._closed = True
            leases = [*self._idle, *self._discarded]
            self._idle.clear()
            self._discarded.clear()
            thread = self._thread
            closers = list(self._closers)
            self._cond.notify_all()
        if thread is not None:
            thread.join()
        for closer in closers:
            closer.join()
        for lease in leases:
            lease.close()

    # -- internals ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LifecycleError("the host is closed; guest code cannot run any more")

    def _keep(self, lease: LeaseT) -> None:
        with self._cond:
            if not self._closed:
                self._idle.append(lease)
                self._cond.notify_all()
                return
        lease.close()

    def _wake(self) -> None:
        """Start the background thread if needed and wake it (lock held)."""
        if self.size == 0:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="caplet-guest-pool", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _needs_start(self) -> bool:
        return not self._paused and len(self._idle) + self._starting < self.size

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._discarded and not self._needs_start():
                    self._cond.wait()
                if self._closed:
                    return
                discarded, self._discarded = self._discarded, []
                start = self._needs_start()
                if start:
                    self._starting += 1
            for lease in discarded:
                self._close_quietly(lease)
            if discarded:
                with self._cond:
                    self._cond.notify_all()  # for whoever waits for the pool to settle
            if start:
                self._refill_one()

    def _refill_one(self) -> None:
        try:
            lease = self._start()
        except Exception as exc:  # reported through last_failure; the next take retries
            logger.warning("caplet: starting a guest worker for the warm pool failed: %s", exc)
            with self._cond:
                self._starting -= 1
                self._paused = True
                self.last_failure = str(exc)
                self._cond.notify_all()
            return
        with self._cond:
            self._starting -= 1
            self.last_failure = ""
        self._keep(lease)

    def _close_one(self, lease: LeaseT) -> None:
        """A size-0 pool's closer thread: close one used worker, then forget the thread."""
        try:
            self._close_quietly(lease)
        finally:
            with self._cond:
                self._closers.discard(threading.current_thread())
                self._cond.notify_all()

    @staticmethod
    def _close_quietly(lease: Lease) -> None:
        try:
            lease.close()
        except Exception as exc:  # a thread must not die of it; the worker is gone either way
            logger.warning("caplet: closing a used guest worker failed: %s", exc)
