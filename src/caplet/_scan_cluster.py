"""Scans fanned out on a Dask cluster: one package per task, reports streamed back (issue 18).

``caplet scan --dask ADDRESS`` hands the targets to :func:`scan_on_cluster`
with a scan function. Each target travels as one Dask task carrying the
package itself: a file (an sdist, a wheel, a Python file) is read here and
its bytes go with the task, so the workers need no file system in common
with this machine; the worker writes them to a private temporary directory
under the same file name, scans that, and removes it. A directory is
scanned in place, so it must be on a file system every worker mounts at
the same path (or packed as an sdist first); a worker that cannot see it
says so. Findings name files relative to the package, and the report's
root is put back to the path given here, so the report (and the SARIF
built from it) is the one a local scan would give.

Tasks are submitted a window at a time (twice the cluster's threads) and
each finished one makes room for the next, so neither this process nor the
scheduler holds tens of thousands of packages at once. Reports come back
as they finish (``on_report``, ``progress``) and are returned in the order
of the targets.

The work is generic over the target type: anything with a ``path`` and a
scan function ``scan(target, path_on_the_worker) -> ScanReport`` that is
importable on the workers (a module-level function: Dask pickles it by
reference). :func:`scan_target` with :class:`ClusterTarget` is the one the
CLI uses.

**Trust.** A Dask cluster runs whatever its clients submit, and this
process believes what its workers answer: run caplet's scans on a cluster
of your own, reached over TLS (``tls://`` with a ``distributed.Security``
configuration, docs/fleet.md). The packages themselves are never run: the
scan is static on the workers as it is here. Every worker must run the
same caplet as this process (each answer carries its version, and a
different one is refused: an older rule set would pass what this one
catches).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from caplet._capabilities._model import Capability
from caplet._errors import ScanError
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._scanner import scan_tree
from caplet._version import __version__

if TYPE_CHECKING:
    from distributed import Client, Future

__all__ = ["ClusterJob", "ClusterTarget", "scan_on_cluster", "scan_target"]


class ClusterJob(Protocol):
    """What a target must offer: the path of the package on this machine."""

    @property
    def path(self) -> Path: ...


J = TypeVar("J", bound=ClusterJob)
ScanFunction = Callable[[J, Path], ScanReport]


@dataclass(frozen=True, slots=True)
class ClusterTarget:
    """One package to scan: where it is here, with which capabilities, in which mode."""

    path: Path
    capabilities: tuple[Capability, ...] = ()
    mode: ScanMode = ScanMode.PACKAGE


def scan_target(target: ClusterTarget, path: Path) -> ScanReport:
    """The CLI's scan function: ``scan_tree`` of the package at *path* on the worker."""
    return scan_tree(path, target.capabilities, mode=target.mode)


@dataclass(frozen=True, slots=True)
class _Parcel:
    """A target on its way to a worker: its path here, and its bytes when it is a file."""

    label: str
    name: str
    data: bytes | None


@dataclass(frozen=True, slots=True)
class _Answer:
    report: ScanReport
    version: str
    worker: str


def _pack(path: Path) -> _Parcel:
    """Read *path* for the trip (a directory travels as its path only)."""
    try:
        if path.is_dir():
            return _Parcel(label=path.as_posix(), name=path.name, data=None)
        data = path.read_bytes()
    except OSError as exc:
        raise ScanError(
            f"cannot scan {path}: {exc.strerror or type(exc).__name__}; check the path"
        ) from exc
    return _Parcel(label=path.as_posix(), name=path.name, data=data)


def _safe_name(name: str) -> str:
    """A file name that stays inside the worker's temporary directory (its suffix kept:
    the scanner tells a wheel, an sdist and a Python file apart by it, among others)."""
    base = name.replace("\0", "").rsplit("/", 1)[-1]
    return "target" if base in ("", ".", "..") else base


def _worker_address() -> str:
    from distributed import get_worker

    try:
        return str(get_worker().address)
    except ValueError:  # not inside a worker (a synchronous scheduler): this process
        return "this process"


def _scan_parcel(parcel: _Parcel, target: J, scan: ScanFunction[J]) -> _Answer:
    """Runs on a worker: unpack, scan, clean up; the report rooted where the client has it."""
    where = _worker_address()
    if parcel.data is None:
        path = Path(parcel.label)
        if not path.is_dir():
            raise ScanError(
                f"cannot scan {parcel.label} on Dask worker {where}: a directory is scanned in "
                "place, and that worker does not see it; put it on a file system every worker "
                "mounts at the same path, or pack it as an sdist"
            )
        report = scan(target, path)
        return _Answer(report=report, version=__version__, worker=where)
    with tempfile.TemporaryDirectory(prefix="caplet-scan-") as scratch:
        path = Path(scratch) / _safe_name(parcel.name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(parcel.data)
        try:
            report = scan(target, path)
        except ScanError as exc:
            raise ScanError(str(exc).replace(str(path), parcel.label)) from None
    return _Answer(
        report=dataclasses.replace(report, root=parcel.label), version=__version__, worker=where
    )


def _connect(address: str, timeout_s: float | None) -> Client:
    try:
        from distributed import Client
    except ImportError as exc:
        raise ScanError(
            "caplet scan --dask needs dask's distributed scheduler, which is not installed; "
            "install it with pip install 'caplet[dask]'"
        ) from exc
    # None: Dask's own connect timeout (distributed.comm.timeouts.connect, 30 s unless
    # configured, e.g. DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s).
    options: dict[str, object] = {} if timeout_s is None else {"timeout": timeout_s}
    try:
        # distributed's constructors are not annotated; the types are its documented ones.
        return Client(address, set_as_default=False, **options)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise ScanError(
            f"cannot reach the Dask scheduler at {address} ({exc}); start it (dask scheduler) "
            "and its workers, or check the address (tcp://HOST:8786, tls://...); without "
            "--dask the scan runs on this machine"
        ) from exc


def scan_on_cluster(
    address: str,
    jobs: Sequence[J],
    scan: ScanFunction[J],
    *,
    progress: Callable[[int, int], None] | None = None,
    on_report: Callable[[int, ScanReport], None] | None = None,
    timeout_s: float | None = None,
) -> list[ScanReport]:
    """Scan every job on the Dask cluster at *address*; reports in the order of *jobs*.

    ``scan(job, path)`` runs on a worker with the package at ``path``;
    ``on_report(index, report)`` and ``progress(done, total)`` are called
    here as each report arrives; ``timeout_s`` bounds reaching the scheduler
    (default: Dask's configured connect timeout). Raises :class:`ScanError` for a target
    that cannot be scanned (the first one, after cancelling the rest), a
    scheduler that cannot be reached, or a worker running another caplet.
    """
    from distributed import as_completed

    total = len(jobs)
    if total == 0:
        return []
    reports: dict[int, ScanReport] = {}
    run = uuid.uuid4().hex
    with _connect(address, timeout_s) as client:
        window = max(2, 2 * sum(client.nthreads().values()))
        pending: dict[Future[_Answer], int] = {}
        queue = iter(enumerate(jobs))

        def submit_next(completed: as_completed) -> None:
            for index, job in queue:
                future: Future[_Answer] = client.submit(
                    _scan_parcel,
                    _pack(job.path),
                    job,
                    scan,
                    # Unique per call: id(jobs) is reused once a list is freed, and
                    # the scheduler may still hold an earlier call's result under it.
                    key=f"caplet-scan-{run}-{index}",
                    pure=False,
                    retries=0,
                )
                pending[future] = index
                completed.add(future)  # type: ignore[no-untyped-call]
                return

        completed = as_completed(loop=client.loop)  # type: ignore[no-untyped-call]
        try:
            for _ in range(min(window, total)):
                submit_next(completed)
            for future in completed:
                index = pending.pop(future)
                answer = _result(future, jobs[index].path)
                if answer.version != __version__:
                    raise ScanError(
                        f"Dask worker {answer.worker} runs caplet {answer.version}, this is "
                        f"caplet {__version__}; install the same caplet on every worker (an "
                        "older rule set would pass what this one catches)"
                    )
                reports[index] = answer.report
                if on_report is not None:
                    on_report(index, answer.report)
                if progress is not None:
                    progress(len(reports), total)
                submit_next(completed)
        except BaseException:
            client.cancel(list(pending))
            raise
    return [reports[index] for index in range(total)]


def _result(future: Future[_Answer], path: Path) -> _Answer:
    """The answer of one task, with the cluster's own failures said in caplet's words."""
    try:
        answer: _Answer = future.result()
    except ScanError:
        raise
    except Exception as exc:
        from distributed import KilledWorker

        if isinstance(exc, KilledWorker):
            raise ScanError(
                f"scanning {path} on the Dask cluster killed the workers that ran it ({exc}); "
                "the package may be too large for a worker's memory: scan it without --dask"
            ) from exc
        raise ScanError(
            f"scanning {path} on the Dask cluster failed ({type(exc).__name__}: {exc}); see "
            "the worker's log, or scan it without --dask"
        ) from exc
    return answer
