"""Starting a worker, whichever launcher: its bootstrap command, its INIT frame, its stderr.

The worker is started as ``python -I -c <bootstrap> <fd>`` rather than
``python -I -m caplet._sandbox._worker``: ``-I`` (needed so ``PYTHON*``
variables and the user site cannot inject code) also drops ``PYTHONPATH``,
so ``-m`` would fail whenever the host found caplet through it or through a
checkout; the bootstrap puts the directory the host imported caplet from on
``sys.path`` explicitly, so the worker runs the same caplet however it is
installed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO

import msgpack

from caplet._errors import ProtocolError, WorkerStartError
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._protocol_encode import encode_init

__all__ = ["INIT_REQUEST_ID", "bootstrap_command", "init_frame", "worker_command", "worker_log"]

# The directories the host imported caplet and msgpack from. caplet's goes
# first (the worker must run this caplet); msgpack's last, so a site-packages
# directory never shadows the standard library.
_CAPLET_ROOT = str(Path(__file__).resolve().parents[2])
_MSGPACK_ROOT = str(Path(msgpack.__file__).resolve().parents[1])

_BOOTSTRAP = f"""\
import sys
if {_CAPLET_ROOT!r} not in sys.path:
    sys.path.insert(0, {_CAPLET_ROOT!r})
if {_MSGPACK_ROOT!r} not in sys.path:
    sys.path.append({_MSGPACK_ROOT!r})
from importlib import import_module
module = import_module(sys.argv.pop(1))
raise SystemExit(module.main(sys.argv[1:]))
"""

INIT_REQUEST_ID = 0


def bootstrap_command(module: str, fd: int, *extra: str) -> list[str]:
    """The argv that runs ``module.main([fd, *extra])`` in a fresh isolated interpreter."""
    return [sys.executable, "-I", "-c", _BOOTSTRAP, module, str(fd), *extra]


def worker_command(channel_fd: int) -> list[str]:
    """The argv that starts a worker on the inherited socket ``channel_fd``."""
    return bootstrap_command("caplet._sandbox._worker", channel_fd)


def init_frame(spec: WorkerSpec, *, snapshot: str | None = None) -> bytes:
    """The INIT frame for ``spec``; WorkerStartError if it cannot be encoded.

    ``snapshot`` is where the worker finds the snapshot when that is not its
    host path (a jail mounts it at /plugin).
    """
    try:
        return encode_init(
            INIT_REQUEST_ID,
            plugin=spec.plugin,
            entry=spec.entry,
            snapshot=snapshot if snapshot is not None else str(spec.snapshot_dir),
            config=spec.config,
            modules=spec.modules,
            max_frame_bytes=spec.max_frame_bytes,
            env=spec.env,
            context=spec.context,
        )
    except ProtocolError as exc:
        raise WorkerStartError(
            f"plugin '{spec.plugin}': cannot send the start-up message to the worker: {exc}; "
            "fix the plugin's configuration and declared modules"
        ) from exc


def worker_log(plugin: str) -> IO[bytes]:
    """A new worker's stderr: an anonymous memory file (memfd_create(2)), never a path.

    It used to be ``tempfile.TemporaryFile()`` under ``TMPDIR``: with
    ``TMPDIR`` inside a plugin's grant (issue 13, finding 4) every worker's
    ``/proc/self/fd/2`` named that host directory (the selftest's
    ``inherited-fds`` case found it), and where the file system lacks
    ``O_TMPFILE`` the standard library falls back to a named file that a
    worker of the same uid could open before it is unlinked. A memfd has
    no path. A sandboxed worker never holds it: it writes into a pipe that
    the zygote copies into the memfd, its latest 64 KiB
    (:mod:`caplet._sandbox._zygote_log`; holding the memfd itself, a worker
    granted ``proc.exec`` overwrote it with a program and ran that through
    the loader). A plain process without a sandboxing launcher
    (best-effort where no layer exists) writes it directly, capped by its
    ``RLIMIT_FSIZE``: nothing is mounted ``noexec`` there either.

    Raises :class:`WorkerStartError` naming the plugin when the kernel
    refuses (out of descriptors or memory).
    """
    try:
        fd = os.memfd_create("caplet-worker-log", os.MFD_CLOEXEC)
    except OSError as exc:
        raise WorkerStartError(
            f"plugin '{plugin}': cannot create the worker's log ({exc.strerror}); the host is "
            "out of descriptors or memory: raise its open-file limit or stop other workers"
        ) from exc
    return os.fdopen(fd, "w+b")
