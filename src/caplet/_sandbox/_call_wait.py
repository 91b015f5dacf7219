"""How long a call waits for a worker busy with other threads' calls (attack31).

A worker serves one call at a time, so calls to one plugin queue on its call lock
(:class:`~caplet._sandbox._channel_worker.SubprocessWorker`), and a deadline is only
looked at on the channel. A nested call (another plugin's ``ctx.plugins.call``, guest
code's ``host.*``) runs on its caller's time: had it waited past it, the caller was
killed for lateness and the call made afterwards, for nobody (and counted toward the
caller's breaker). A call made while a thread answers another call's ctx request (an
application handler calling a plugin) waits no longer than the answered call's
deadline: two such handlers calling each other's plugin crosswise from two threads
waited on each other for ever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from caplet._errors import WorkerBusyError

__all__ = ["answering", "take"]


class _Answering(threading.local):
    #: The deadline of the call whose ctx request this thread is answering, if any (a
    #: class default: a thread that never answered reads it without an AttributeError,
    #: on every call).
    deadline: float | None = None


_ANSWERING = _Answering()


@contextmanager
def answering(deadline: float) -> Iterator[None]:
    """While this thread answers a ctx request of a call ending at ``deadline``."""
    outer = _ANSWERING.deadline
    _ANSWERING.deadline = deadline if outer is None else min(outer, deadline)
    try:
        yield
    finally:
        _ANSWERING.deadline = outer


def take(
    lock: threading.Lock,
    wait_s: float | None,
    timeout_s: float,
    plugin: str,
    target: tuple[str, str],
) -> float:
    """Acquire ``lock`` (a worker's call lock) and return the call's timeout.

    ``wait_s`` bounds the wait, and what was waited comes off ``timeout_s``; without
    one, the deadline of a ctx request this thread is answering bounds the wait only
    (the call's own timeout stays its plugin's); without either, wait as long as the
    calls before take. Past the bound, or with no time left once the lock is held:
    :class:`WorkerBusyError` naming ``plugin`` and ``target`` (module, function), the
    lock not held. Builds no text unless it raises: every call passes here.
    """
    inherited = wait_s is None
    if wait_s is None:
        answered = _ANSWERING.deadline
        if answered is None:
            lock.acquire()
            return timeout_s
        wait_s = answered - time.monotonic()
    start = time.monotonic()
    if not lock.acquire(timeout=max(wait_s, 0.0)):
        raise _busy(plugin, target, wait_s)
    left = wait_s - (time.monotonic() - start)
    if not left > 0:
        lock.release()
        raise _busy(plugin, target, wait_s)
    return timeout_s if inherited else min(timeout_s, left)


def _busy(plugin: str, target: tuple[str, str], wait_s: float) -> WorkerBusyError:
    return WorkerBusyError(
        f"plugin '{plugin}': {target[0]}.{target[1]} was not sent: its caller had "
        f"{max(wait_s, 0.0) * 1000:.0f} ms left, and the worker was serving other calls "
        "(one at a time) for all of it, or was started with none left; nothing ran (call "
        "again later, or give the calling call more time)"
    )
