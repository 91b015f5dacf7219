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
jail, copies what arrives into the memfd only it and the host hold. It
keeps the first ``file_size_mb`` of it, as the worker's ``RLIMIT_FSIZE``
did when the worker wrote the memfd (the rest is read and dropped, so a
worker never blocks on a full log). A worker's last words are not lost:
the zygote drains the pipe when it reaps the worker, before it writes
the status the host waits for, and the host reads the tail only then.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["LogRelay", "new_relay"]

_MIB = 1024 * 1024
#: One read of the pipe (its default capacity, pipe(7)).
_CHUNK = 64 * 1024
#: Reads per wake-up of the zygote's loop: a worker writing without pause
#: must not keep the zygote from its other workers (the rest waits in the pipe).
_READS_PER_TURN = 16


@dataclass(slots=True)
class LogRelay:
    """The zygote's end of one worker's stderr pipe, and the memfd it fills."""

    read_fd: int
    log_fd: int
    #: Bytes the log may still take.
    room: int

    def pump(self, *, drain: bool = False) -> bool:
        """Copy what the pipe holds into the log; False at end of file.

        Without ``drain`` at most ``_READS_PER_TURN`` reads, then True (the
        loop polls again); with it, until the pipe is empty (the worker has
        been reaped, so nothing of it writes any more).
        """
        reads = 0
        while drain or reads < _READS_PER_TURN:
            reads += 1
            try:
                data = os.read(self.read_fd, _CHUNK)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            if self.room > 0:
                kept = data[: self.room]
                try:
                    os.write(self.log_fd, kept)
                except OSError:
                    self.room = 0  # out of memory: the log stops here, the worker goes on
                else:
                    self.room -= len(kept)
        return True

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.log_fd)


def new_relay(log_fd: int, file_size_mb: int) -> tuple[LogRelay, int]:
    """A relay into ``log_fd`` (which it now owns) and the pipe's write end for the worker.

    Raises OSError when the zygote is out of descriptors (``log_fd`` is
    then still the caller's to close).
    """
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    # Only the zygote's end is non-blocking: a worker writing to a full pipe
    # waits for the zygote, as a write to a terminal would.
    os.set_blocking(write_fd, True)
    return LogRelay(read_fd, log_fd, file_size_mb * _MIB), write_fd
