"""Metrics across processes: each host writes its snapshot, ``caplet stats`` reads them.

A host's meters live in its own memory, and ``caplet stats`` is another
process. The choice (issue 17): **each host that runs plugins writes a
JSON snapshot of its meters to ``<state dir>/stats/``**, at most every
``MetricsSettings.publish_s`` seconds while it is calling plugins (a
daemon thread; the call path never writes a file) and once more when it
closes; ``caplet stats`` reads every snapshot there and says, for each,
whether its process is still running (pid *and* start time match, so a
reused pid is not mistaken for it).

Why files and not the store: the store (SQLite or a fleet's PostgreSQL)
holds decisions that must survive and be shared; counters that change
thousands of times a second would put a write on every call or a schema
on two databases for numbers that are only ever read on this machine, and
a snapshot a second late is as good as live for a person. Why not ask the
live process (a socket): ``caplet mcp`` is started by an agent host with
its stdio taken, and a one-shot ``caplet call`` is gone before anyone asks;
a file serves both, and the last snapshot of a process that ended stays
readable. Snapshots of ended processes are kept for a week, the newest
:data:`KEEP_ENDED` of them.

A snapshot is plugin names (validated kebab-case), caplet's own labels
and numbers; it holds no plugin text.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from caplet._logs import caplet_logger

__all__ = ["KEEP_ENDED", "STATS_DIR", "HostSnapshot", "StatsPublisher", "read_snapshots"]

_LOG = caplet_logger()

#: The folder of the state directory holding the snapshots.
STATS_DIR: Final = "stats"
#: Snapshots of ended processes kept (the newest ones), and for how long at most.
KEEP_ENDED: Final = 20
_KEEP_ENDED_S: Final = 7 * 24 * 3600.0
#: The format of a snapshot (a reader refuses other versions by name).
_FORMAT: Final = 1
#: A snapshot is a few KiB per plugin; a larger file is not one of caplet's.
_MAX_BYTES: Final = 16 * 1024 * 1024
#: The digits of the longest integer a snapshot holds ("-" and 19 digits: 64 bits).
_INT_DIGITS: Final = 20


def _command() -> str:
    """The program and its subcommand (``caplet mcp``): never the rest of the command line,
    which may hold configuration values, secrets among them."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    # `python -m caplet` runs caplet/__main__.py: the package is the program's name.
    words = [program.parent.name if program.name == "__main__.py" else program.name]
    if len(sys.argv) > 1 and sys.argv[1].isalpha():
        words.append(sys.argv[1])
    return " ".join(words)[:80]


def _start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` (field 22 of /proc/<pid>/stat), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read(4096)
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """One host's snapshot as read back: where from, whether its process still runs."""

    path: Path
    pid: int
    command: str
    started_at: float
    updated_at: float
    live: bool
    ended: bool
    plugins: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "command": self.command,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "live": self.live,
            "plugins": self.plugins,
        }


class StatsPublisher:
    """Writes one host's snapshot to ``<state dir>/stats/`` (module docstring).

    ``collect()`` returns the plugins' stats as JSON-ready dicts. :meth:`start`
    starts the daemon thread (idempotent); :meth:`close` stops it and writes
    the last snapshot, marked ended.
    """

    def __init__(
        self,
        state_dir: Path,
        collect: Callable[[], list[dict[str, Any]]],
        *,
        interval_s: float,
        started_at: float,
    ) -> None:
        self.directory = state_dir / STATS_DIR
        self._collect = collect
        self._interval_s = interval_s
        self._started_at = started_at
        self._pid = os.getpid()
        self._ticks = _start_ticks(self._pid)
        self.path = self.directory / f"host-{self._pid}-{self._ticks or 0}.json"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._warned = False

    def start(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="caplet-stats", daemon=True)
            self._thread.start()

    def publish(self, *, ended: bool = False) -> None:
        """Write the snapshot now (errors are logged once, never raised: metrics must
        never fail a call or a close)."""
        try:
            plugins = self._collect()
            if not plugins and not self.path.exists():
                return
            document = {
                "format": _FORMAT,
                "pid": self._pid,
                "start_ticks": self._ticks,
                "command": _command(),
                "started_at": self._started_at,
                "updated_at": time.time(),
                "ended": ended,
                "plugins": plugins,
            }
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".stats-", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(document, handle)
                Path(temp).replace(self.path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
            self._prune()
        except OSError as exc:
            if not self._warned:
                self._warned = True
                _LOG.warning(
                    "caplet stats: cannot write %s (%s); `caplet stats` will not show this process",
                    self.path,
                    exc.strerror or exc,
                )

    def close(self) -> None:
        """Stop the thread and write the last snapshot (idempotent)."""
        with self._lock:
            if self._stop.is_set():
                return
            self._stop.set()
            thread = self._thread
        if thread is not None:
            thread.join()
        self.publish(ended=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.publish()

    def _prune(self) -> None:
        ended = [s for s in read_snapshots(self.directory.parent) if not s.live]
        ended.sort(key=lambda s: s.updated_at, reverse=True)
        cutoff = time.time() - _KEEP_ENDED_S
        for index, snapshot in enumerate(ended):
            if index >= KEEP_ENDED or snapshot.updated_at < cutoff:
                snapshot.path.unlink(missing_ok=True)


def _counted(digits: str) -> int:
    """A snapshot's integer: what caplet counts (calls, bytes, ticks) fits 64 bits. A
    longer one made ``float()`` raise OverflowError in ``caplet stats`` (exit 70), and
    one past Python's 4,300 digits a ValueError from ``json`` itself."""
    if len(digits) > _INT_DIGITS or abs(value := int(digits)) >= 2**63:
        raise ValueError(f"an integer of {len(digits)} characters, past 64 bits")
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is no number caplet writes")


def read_snapshots(state_dir: Path) -> list[HostSnapshot]:
    """Every readable snapshot in ``<state_dir>/stats``, live ones first, newest first.

    A file that is not a snapshot of this format is skipped (and logged).
    """
    directory = state_dir / STATS_DIR
    try:
        paths = sorted(directory.glob("host-*.json"))
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            if path.stat().st_size > _MAX_BYTES:
                raise ValueError("too large")
            data = json.loads(
                path.read_text(encoding="utf-8"),
                parse_int=_counted,
                parse_constant=_no_constant,
            )
            if not isinstance(data, dict) or data.get("format") != _FORMAT:
                raise ValueError("not a caplet stats snapshot of this version")
            pid, ticks = data["pid"], data.get("start_ticks")
            plugins = data["plugins"]
            if not isinstance(pid, int) or not isinstance(plugins, list):
                raise TypeError("malformed")
            # Rows that are not objects are not caplet's (readers call .get on each).
            plugins = [row for row in plugins if isinstance(row, dict)]
            live = not data.get("ended") and ticks is not None and _start_ticks(pid) == ticks
            found.append(
                HostSnapshot(
                    path,
                    pid,
                    str(data.get("command", "")),
                    float(data.get("started_at", 0.0)),
                    float(data.get("updated_at", 0.0)),
                    live,
                    bool(data.get("ended")),
                    plugins,
                )
            )
        except FileNotFoundError:
            continue  # pruned or replaced meanwhile
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _LOG.warning("caplet stats: skipping %s: %s", path, exc)
    found.sort(key=lambda s: (not s.live, -s.updated_at))
    return found
