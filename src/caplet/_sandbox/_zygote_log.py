"""A worker's stderr as the zygote relays it: a pipe in the worker, the host's memfd here.

The host keeps each worker's log in a memfd (``_worker_start.worker_log``)
and quotes its tail when the worker fails. The worker used to hold that
memfd itself, as fd 2, and a memfd is a file that can be opened again
through ``/proc/self/fd/2`` and mapped as a program: a plugin granted
``proc.exec:true`` wrote the interpreter into its own stderr
(``ftruncate``/``pwrite``) and ran it with the approved program's ELF
interpreter, ``ld.so /proc/self/fd/N`` (red-team round 5). Every other
file a worker can write is on a ``noexec`` mount, and it gets no memfd
of its own; this one was the host's. A memfd's mode cannot stop it: for
an unprivileged host the worker owns the memfd and may ``chmod`` it back.

So the worker's fd 2 is the write end of a pipe, which can be neither
mapped nor opened as anything but the pipe, and the zygote, outside every
jail, copies what arrives into the memfd only it and the host hold. The
host only ever reads the log's last 2 KiB (the tail it quotes when a
worker fails), so the memfd keeps the latest output, at most
:data:`LOG_BYTES` of it: written by the zygote, its pages are the host's,
not the worker's cgroup's, and a worker must not make the host hold its
``file_size_mb`` (64 MiB) per worker. A worker never blocks on a full log,
and its last words are not lost: the zygote drains the pipe when it reaps
the worker, before it writes the status the host waits for, and the host
reads the tail only then.

Once the log is full, what keeps coming is held in the zygote's memory (the
latest :data:`LOG_BYTES` of it) and written into the log by that drain, not
as it arrives: truncating and rewriting the memfd for every chunk cost the
zygote, outside every worker's cgroup and CPU count, four times the CPU the
worker spent writing (a plugin flooding its stderr had the zygote spin a
core: 3.4 GB in 5 s, 2.45 zygote CPU seconds to 0.6 of its own; attack13).
Reading the pipe is all a flood costs the zygote now, and at most
:data:`RATE_BYTES` a second of it: past that the zygote stops reading the
pipe until the second is over (:attr:`LogRelay.resume_at`), and the worker
waits in write(2), as a write to a slow terminal would. Without the bound
the zygote read as fast as any worker wrote, half a core for as long as a
plugin wished (17.7 GB in 5 s).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

__all__ = ["LOG_BYTES", "LogRelay", "new_relay"]

#: The most a worker's log holds (its latest output).
LOG_BYTES = 64 * 1024
#: What is kept of a full log when more comes: more than the host's tail.
_KEPT_BYTES = 16 * 1024
#: One read of the pipe (its default capacity, pipe(7)).
_CHUNK = 64 * 1024
#: Reads per wake-up of the zygote's loop: a worker writing without pause
#: must not keep the zygote from its other workers (the rest waits in the pipe).
_READS_PER_TURN = 16
#: Reads of the drain after a reap: a full pipe holds at most pipe-max-size
#: (1 MiB by default, F_SETPIPE_SZ in fcntl(2)), 16 reads. Bounded all the same:
#: a process the worker started outside a pid namespace of its own (no jail)
#: outlives it and may still hold the pipe, writing without end.
_DRAIN_READS = 32
#: Bytes of stderr the zygote reads from one worker per :data:`RATE_WINDOW_S`.
RATE_BYTES = 16 * 1024 * 1024
RATE_WINDOW_S = 1.0


@dataclass(slots=True)
class LogRelay:
    """The zygote's end of one worker's stderr pipe, and the memfd it fills."""

    read_fd: int
    log_fd: int
    #: Bytes in the log.
    size: int = 0
    #: Once the log is full: the latest output since, written into it by a drain.
    pending: bytearray = field(default_factory=bytearray)
    #: The current rate window: when it began and what was read in it.
    window_start: float = 0.0
    window_bytes: int = 0
    #: When the pipe may be read again (``time.monotonic()``), once this window's
    #: :data:`RATE_BYTES` were read; None while under the rate.
    resume_at: float | None = None

    def pump(self, *, drain: bool = False) -> bool:
        """Copy what the pipe holds into the log; False at end of file.

        Without ``drain`` at most ``_READS_PER_TURN`` reads, then True (the
        loop polls again); with it, until the pipe is empty (the worker has
        been reaped, so nothing of it writes any more) or ``_DRAIN_READS``.
        """
        try:
            return self._pump(_DRAIN_READS if drain else _READS_PER_TURN, rated=not drain)
        finally:
            if drain:
                self._flush()

    def _pump(self, most: int, *, rated: bool = True) -> bool:
        reads = 0
        while reads < most:
            reads += 1
            if rated and self._over_rate():
                return True
            try:
                data = os.read(self.read_fd, _CHUNK)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            self.window_bytes += len(data)
            try:
                self._append(data)
            except OSError:
                pass  # out of memory: the log misses this, the worker goes on
        return True

    def _over_rate(self) -> bool:
        """Whether this window's bytes were read; sets :attr:`resume_at` when so."""
        now = time.monotonic()
        if now - self.window_start >= RATE_WINDOW_S:
            self.window_start, self.window_bytes, self.resume_at = now, 0, None
        if self.window_bytes < RATE_BYTES:
            return False
        self.resume_at = self.window_start + RATE_WINDOW_S
        return True

    def _append(self, data: bytes) -> None:
        if not self.pending and self.size + len(data) <= LOG_BYTES:
            os.pwrite(self.log_fd, data, self.size)
            self.size += len(data)
            return
        # Full: the latest output is kept in memory until the drain.
        self.pending += data
        if len(self.pending) > LOG_BYTES:
            del self.pending[:-LOG_BYTES]

    def _flush(self) -> None:
        """Write what came after the log was full into it: the latest output only
        (explicit offsets, never the file position, which the host's descriptor shares)."""
        if not self.pending:
            return
        try:
            kept = b""
            if len(self.pending) < LOG_BYTES:
                kept = os.pread(self.log_fd, _KEPT_BYTES, max(0, self.size - _KEPT_BYTES))
            latest = (kept + self.pending)[-LOG_BYTES:]
            os.ftruncate(self.log_fd, 0)
            os.pwrite(self.log_fd, latest, 0)
            self.size = len(latest)
        except OSError:
            pass  # out of memory: the log keeps what it had
        self.pending.clear()

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.log_fd)


def new_relay(log_fd: int) -> tuple[LogRelay, int]:
    """A relay into ``log_fd`` (which it now owns) and the pipe's write end for the worker.

    Raises OSError when the zygote is out of descriptors (``log_fd`` is
    then still the caller's to close).
    """
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    # Only the zygote's end is non-blocking: a worker writing to a full pipe
    # waits for the zygote, as a write to a terminal would.
    os.set_blocking(write_fd, True)
    return LogRelay(read_fd, log_fd), write_fd
