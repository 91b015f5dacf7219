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
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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


@dataclass(slots=True)
class LogRelay:
    """The zygote's end of one worker's stderr pipe, and the memfd it fills."""

    read_fd: int
    log_fd: int
    #: Bytes in the log.
    size: int = 0

    def pump(self, *, drain: bool = False) -> bool:
        """Copy what the pipe holds into the log; False at end of file.

        Without ``drain`` at most ``_READS_PER_TURN`` reads, then True (the
        loop polls again); with it, until the pipe is empty (the worker has
        been reaped, so nothing of it writes any more) or ``_DRAIN_READS``.
        """
        reads = 0
        while reads < (_DRAIN_READS if drain else _READS_PER_TURN):
            reads += 1
            try:
                data = os.read(self.read_fd, _CHUNK)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            try:
                self._append(data)
            except OSError:
                pass  # out of memory: the log misses this, the worker goes on
        return True

    def _append(self, data: bytes) -> None:
        if self.size + len(data) <= LOG_BYTES:
            os.pwrite(self.log_fd, data, self.size)
            self.size += len(data)
            return
        # Full: keep the latest output only (explicit offsets, never the file
        # position, which the host's descriptor shares).
        kept = os.pread(self.log_fd, _KEPT_BYTES, max(0, self.size - _KEPT_BYTES))
        latest = (kept + data)[-LOG_BYTES:]
        os.ftruncate(self.log_fd, 0)
        os.pwrite(self.log_fd, latest, 0)
        self.size = len(latest)

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
