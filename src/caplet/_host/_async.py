"""``AsyncPluginHost``: the asyncio face of :class:`PluginHost` (issue 15).

Web applications (FastAPI, Starlette, aiohttp) and agent frameworks run on
an event loop; a plugin call that blocked the loop for its whole deadline
would stall every other request. Each method here runs the blocking
:class:`PluginHost` method in a thread of the host's own executor (so
calls to different plugins run in parallel, as from threads, and the
loop's default executor is left alone) and awaits it.

**Cancellation is honoured.** Cancelling the awaiting task:

* before the work started: nothing runs;
* during a call (``call``, a ``functions()`` proxy, each subscriber of an
  ``emit``, and the ``host.*`` calls of an ``exec``): the worker serving it
  is stopped at once (a call cannot be taken back from a running process),
  the call ends with :class:`~caplet.CallCancelledError` in its thread,
  which the circuit breaker does not count, and the next call starts a
  fresh worker; a call queued behind another caller's on the same worker
  is dropped before it is sent, and the other caller's call goes on;
* during ``exec``: the snippet's guest worker is stopped;
* during ``enable``: the enable finishes (a half-started worker would be
  worse), then the plugin is disabled again, so a cancelled enable leaves
  nothing enabled.

The ``CancelledError`` reaches the awaiting task at once; the thread
finishes stopping the worker on its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from caplet._host._consent import Consent
from caplet._host._guest_result import GuestResult
from caplet._host._hook_model import HookResults
from caplet._host._host import PluginHost
from caplet._host._records import Outcome, PluginInfo

__all__ = ["AsyncPluginHost"]

_T = TypeVar("_T")

#: Threads of one host's executor: calls to this many plugins (or callers of one) at once.
DEFAULT_THREADS = 32

AsyncFunction = Callable[..., Awaitable[Any]]


class AsyncPluginHost:
    """An asyncio :class:`PluginHost`: ``await host.call(...)`` never blocks the loop.

    Build it like a ``PluginHost`` (the same arguments, passed through), in
    a thread with :meth:`open` so discovery does not block the loop either,
    and close it with ``await host.close()`` or ``async with``. ``threads``
    bounds the work running at once. ``host.sync`` is the
    :class:`PluginHost` underneath, for what never blocks (``get_plugin``,
    ``list_plugins``, ``policy``, ``define_hook``, ``register_capability``).
    """

    def __init__(
        self, plugins_dir: Path | str, *, threads: int = DEFAULT_THREADS, **options: Any
    ) -> None:
        self.sync = PluginHost(plugins_dir, **options)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="caplet-async"
        )
        #: The threads running work now, and the event that cancels each one's work.
        self._active: dict[int, threading.Event] = {}
        self._active_lock = threading.Lock()

    @classmethod
    def around(cls, host: PluginHost, *, threads: int = DEFAULT_THREADS) -> AsyncPluginHost:
        """The asyncio face of a :class:`PluginHost` built already (``caplet mcp``
        enables plugins on it first); :meth:`close` closes that host too."""
        self = cls.__new__(cls)
        self.sync = host
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="caplet-async"
        )
        self._active = {}
        self._active_lock = threading.Lock()
        return self

    @classmethod
    async def open(
        cls, plugins_dir: Path | str, *, threads: int = DEFAULT_THREADS, **options: Any
    ) -> AsyncPluginHost:
        """Build the host in a thread (discovery reads and hashes every plugin)."""
        return await asyncio.to_thread(cls, plugins_dir, threads=threads, **options)

    # -- the blocking methods, awaited ---------------------------------------------------

    async def call(self, name: str, target: str, /, *args: Any, **kwargs: Any) -> Any:
        """:meth:`PluginHost.call`, awaited; cancelling it stops the call (module docstring)."""
        return await self._run(lambda: self.sync.call(name, target, *args, **kwargs))

    async def agent_call(self, name: str, target: str, /, *args: Any, **kwargs: Any) -> Any:
        """:meth:`PluginHost.agent_call`, awaited; cancelling it stops the call."""
        return await self._run(lambda: self.sync.agent_call(name, target, *args, **kwargs))

    async def exec(
        self,
        code: str,
        *,
        timeout: float | None = None,
        gate: Callable[[str, str], str | None] | None = None,
    ) -> GuestResult:
        """:meth:`PluginHost.exec`, awaited; cancelling it stops the snippet's worker."""
        return await self._run(lambda: self.sync.exec(code, timeout=timeout, gate=gate))

    async def emit(self, event: str, payload: object = None) -> HookResults:
        """:meth:`PluginHost.emit`, awaited; cancelling it stops the subscriber running."""
        return await self._run(lambda: self.sync.emit(event, payload))

    async def enable(
        self,
        name: str,
        inline: Iterable[str] = (),
        *,
        config: Mapping[str, object] | None = None,
        consent: bool | Consent = False,
    ) -> Outcome:
        """:meth:`PluginHost.enable`, awaited; a cancelled enable is undone when it ends.

        No ``prompter``: a question on a terminal has no place in a loop
        (configure inline or with ``config``; a prompter given to the
        constructor still answers).
        """
        cancelled = threading.Event()

        def enable() -> Outcome:
            outcome = self.sync.enable(name, inline, config=config, consent=consent)
            if outcome and cancelled.is_set():
                self.sync.disable(name)
                return Outcome(
                    False, f"plugin {name!r} was disabled again: the enable was cancelled"
                )
            return outcome

        return await self._run(enable, cancelled)

    async def disable(self, name: str) -> Outcome:
        """:meth:`PluginHost.disable`, awaited (it waits for a call still running)."""
        return await self._run(lambda: self.sync.disable(name))

    async def audit(self, name: str, *, fresh: bool = False, static_only: bool = False) -> Any:
        """:meth:`PluginHost.audit`, awaited (a deep audit waits for a model)."""
        return await self._run(lambda: self.sync.audit(name, fresh=fresh, static_only=static_only))

    async def approve(
        self,
        name: str,
        *,
        content_hash: str | None = None,
        programs: Sequence[str] | None = None,
    ) -> Outcome:
        """:meth:`PluginHost.approve`, awaited."""
        return await self._run(
            lambda: self.sync.approve(name, content_hash=content_hash, programs=programs)
        )

    async def discover(self) -> int:
        """:meth:`PluginHost.discover`, awaited."""
        return await self._run(self.sync.discover)

    async def warm_guests(self) -> int:
        """:meth:`PluginHost.warm_guests`, awaited."""
        return await self._run(self.sync.warm_guests)

    def functions(self, name: str) -> dict[str, dict[str, AsyncFunction]]:
        """``{module: {function: async callable}}`` for an enabled plugin's declared functions."""
        info: PluginInfo = self.sync.manager.require_plugin(name)
        self.sync.functions(name)  # the same checks: enabled, not quarantined
        return {
            module.name: {
                fn: self._proxy(name, f"{module.name}.{fn}") for fn in module.function_names
            }
            for module in info.manifest.modules
        }

    def _proxy(self, name: str, target: str) -> AsyncFunction:
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self.call(name, target, *args, **kwargs)

        call.__name__ = target.rpartition(".")[2]
        call.__qualname__ = f"{name}:{target}"
        return call

    # -- lifetime ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Cancel the work still running (as a cancelled task would), wait for its threads,
        then close the host and every worker. Idempotent."""
        with self._active_lock:
            active = list(self._active.items())
        for thread, event in active:
            event.set()
            self.sync.interrupt(thread)
        await asyncio.to_thread(self._executor.shutdown, True, cancel_futures=True)
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncPluginHost:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- running in a thread, cancellably ------------------------------------------------------

    async def _run(self, work: Callable[[], _T], cancelled: threading.Event | None = None) -> _T:
        """``work()`` in the executor; a cancellation stops what it is waiting on."""
        event = cancelled if cancelled is not None else threading.Event()
        started: list[int] = []

        def run() -> _T:
            thread = threading.get_ident()
            started.append(thread)
            with self._active_lock:
                self._active[thread] = event
            try:
                with self.sync.cancellable(event):
                    return work()
            finally:
                with self._active_lock:
                    self._active.pop(thread, None)

        future = self._executor.submit(run)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            event.set()
            if started:
                # Running: stop the worker this thread waits on (its call raises
                # CallCancelledError there; a queued call is dropped unsent).
                self.sync.interrupt(started[0])
            raise
