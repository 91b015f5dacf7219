"""What an agent uses of the host: guest code, cancellation, the system message, dirty flags.

``exec`` runs a snippet in a zero-capability guest whose ``host.*`` calls
come back through the ordinary call path; ``cancellable`` and ``interrupt``
are how :class:`AsyncPluginHost` honours an asyncio cancellation; the
system message and the dirty flags tell an agent what it may call and
when to rebuild. Apart from the lifecycle, which changes what these
report but never runs guest code.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from caplet._host._guest_prompt import system_message
from caplet._host._guest_result import GuestResult
from caplet._host._host_parts import HostParts
from caplet._host._records import DirtyFlags

__all__ = ["HostAgent"]


class HostAgent(HostParts):
    """Guest code, cancellation and agent integration of a :class:`PluginHost`
    (see the module docstring)."""

    # -- cancellation (AsyncPluginHost) -------------------------------------------------------

    @contextlib.contextmanager
    def cancellable(self, event: threading.Event) -> Iterator[None]:
        """While the block runs in this thread, ``event`` cancels its calls: one not yet
        sent is dropped (CallCancelledError, nothing ran), and :meth:`interrupt` stops one
        that runs. How :class:`AsyncPluginHost` honours an asyncio cancellation."""
        previous = getattr(self._cancel, "event", None)
        self._cancel.event = event
        try:
            yield
        finally:
            self._cancel.event = previous

    def interrupt(self, thread: int) -> bool:
        """Stop the call (or guest snippet) ``thread`` is waiting on: its worker is stopped
        and the call raises :class:`CallCancelledError` there. False when it waits on none."""
        stopped = False
        for running in list(self._workers.running.values()):
            stopped |= running.worker.interrupt(thread)
        stopped |= self._guests.interrupt(thread)
        return stopped

    def exec(
        self,
        code: str,
        *,
        timeout: float | None = None,
        gate: Callable[[str, str], str | None] | None = None,
    ) -> GuestResult:
        """Run untrusted Python ``code`` in a zero-capability sandbox; never raises for
        what the code does.

        The snippet runs in a fresh guest worker from the warm pool (same
        namespaces, Landlock, seccomp as a plugin; no paths, environment,
        network or programs; ``Policy.guest`` limits), discarded afterwards.
        ``import host.<module>`` gives it the enabled plugins' declared
        functions; each call comes back here, is checked, and runs in that
        plugin's own worker. ``timeout`` (seconds; default
        ``Policy.guest.timeout_ms``) covers the snippet and its host calls.

        The result holds stdout, stderr, the value of a final expression
        (as in the interactive interpreter) and, when it failed, the guest's
        own traceback; a timeout or a crashed sandbox is a result too
        (``status``). ``gate(plugin, "module.function")`` may refuse each
        ``host.*`` call the snippet makes: it returns why not (the guest sees
        it), or None to let it through (``caplet mcp``'s allow/deny). Raises
        :class:`GuestError` for code that is not a str or too large and a
        timeout the policy refuses, and
        :class:`WorkerStartError` when no sandbox can be started.
        """
        return self._guests.run(code, timeout=timeout, gate=gate)

    def warm_guests(self) -> int:
        """Start the warm pool's guest workers now (``Policy.guest.pool_size``); return
        how many are waiting. ``exec`` fills the pool by itself, in the background,
        after its first snippet; call this at start-up to make the first one warm too."""
        return self._guests.started().warm()

    def _call_from_guest(
        self,
        provider: str,
        target: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        timeout_s: float,
    ) -> object:
        """A guest's ``host.<module>.<function>(...)``: the ordinary call path, its
        deadline cut to what is left of the snippet's."""
        return self._calls.guarded_call(provider, target, args, kwargs, timeout_cap=timeout_s)

    # -- agent integration --------------------------------------------------------------------

    def get_system_message_additions(
        self, *, offers: Callable[[str, str], bool] | None = None
    ) -> str:
        """The text an agent adds to its system message for the enabled plugins.

        A preamble on ``import host.<module>``, then per enabled plugin its
        importable modules with each function's one-line description, its
        resolved configuration without secret fields, and its manifest
        hints; "" when no plugin is enabled. Rebuild it when
        :meth:`consume_dirty` says the session is dirty. ``offers(plugin,
        "module.function")`` leaves out the functions it refuses (and a
        plugin whose every function it refuses), as ``caplet mcp`` hides them.
        """
        enabled = self.manager.get_enabled_plugins()
        return system_message(enabled, self._guests.catalog(), offers)

    def system_message_additions(self) -> list[str]:
        """One block per enabled plugin (the manager's older form; see
        :meth:`get_system_message_additions` for the whole text)."""
        return self.manager.get_system_message_additions()

    def is_dirty(self) -> DirtyFlags:
        """The dirty flags, without clearing them."""
        return self.manager.is_dirty()

    def consume_dirty(self) -> DirtyFlags:
        """Read and clear both dirty flags: the documented way for an agent to ask
        "must I rebuild?" before each turn.

        ``sandbox``: the set of importable host functions changed (an enable
        or disable) since the last read; ``session``: the system-message text
        changed (that, or a configuration change of an enabled plugin).
        """
        return DirtyFlags(
            sandbox=self.manager.consume_sandbox_dirty(),
            session=self.manager.consume_session_dirty(),
        )

    def consume_sandbox_dirty(self) -> bool:
        """Read and clear the sandbox flag only."""
        return self.manager.consume_sandbox_dirty()

    def consume_session_dirty(self) -> bool:
        """Read and clear the session flag only."""
        return self.manager.consume_session_dirty()
