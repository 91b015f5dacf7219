"""What the host and the zygote exchange: the spawn request, REFILL, the status report.

:class:`SpawnRequest` is a spawn request as decoded and checked from the
host's msgpack map (``_spawn_request``); :data:`STATUS` and ``_PIPE_BUF``
shape the status each child's pipe carries back. Apart from the zygote's
loop, its children and its spares, which all read requests but none of
which defines them (:mod:`caplet._sandbox._zygote` describes the whole
protocol).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._rlimits import ResourceLimits

__all__ = ["EXIT_SANDBOX_FAILED", "REFILL", "STATUS", "SpawnRequest"]

#: Status pipe payload: one signed 32-bit int (returncode convention), then
#: the msgpack map of denial counts.
STATUS = struct.Struct("=i")
#: The whole status report fits in one atomic pipe write (pipe(7): PIPE_BUF).
_PIPE_BUF = 4096
#: Exit code of a child whose sandbox could not be set up.
EXIT_SANDBOX_FAILED = 71
_MAX_REQUEST = 1 << 20
#: host -> zygote, no descriptors, no reply: the start that claimed the spare (or
#: forked a worker directly) is over, fork the next spare now. Sent when the
#: worker's first call has been answered, when it is closed without one, or
#: when its start failed; without it the zygote forks the spare
#: ``_REFILL_AFTER_S`` after the claim.
REFILL = b"refill"


@dataclass(frozen=True, slots=True)
class SpawnRequest:
    """One worker to start, as decoded (and checked) from the host's message."""

    layers: tuple[str, ...]
    grants: tuple[PathGrant, ...]
    workdir: str
    allow_exec: bool
    limits: ResourceLimits
    tmp_size_mb: int
    #: Install the seccomp filter with a listener the zygote counts denials on.
    count_denials: bool = False
    #: Directories hidden inside the grants (JailSpec.masks).
    masks: tuple[str, ...] = ()
    #: The snapshot's host path (opened at SNAPSHOT_FD without a jail on a root host).
    snapshot: str = ""


def _spawn_request(message: object) -> SpawnRequest:
    """Decode a spawn request; the host is trusted, but malformed input must not crash us."""
    if not isinstance(message, dict):
        raise SandboxError("spawn request must be a map")
    try:
        layers = tuple(str(layer) for layer in message["layers"])
        grants = tuple(
            PathGrant(
                str(p), bool(w), bool(x), str(t), int(d), int(i), bool(c), str(h), bool(s), bool(n)
            )
            for p, w, x, t, d, i, c, h, s, n in message["grants"]
        )
        limits: Mapping[str, int | None] = message["limits"]
        return SpawnRequest(
            layers=layers,
            grants=grants,
            workdir=str(message["workdir"]),
            allow_exec=bool(message["allow_exec"]),
            limits=ResourceLimits(
                memory_mb=limits["memory_mb"],
                cpu_s=limits["cpu_s"],
                open_files=int(limits["open_files"] or 256),
                # Counted per user namespace since Linux 5.14 (ucounts), so
                # it bounds a fork bomb even when the worker's uid is root.
                processes=limits.get("processes"),
                file_size_mb=int(limits["file_size_mb"] or 64),
                cpu_millicores=limits.get("cpu_millicores"),
            ),
            tmp_size_mb=int(message["tmp_size_mb"]),
            masks=tuple(str(path) for path in message.get("masks", ())),
            snapshot=str(message.get("snapshot", "")),
            count_denials=bool(message.get("count_denials", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SandboxError(f"malformed spawn request: {exc!r}") from exc
