"""Guest code: run one untrusted snippet in a zero-capability sandbox.

``PluginHost.exec(code)`` (and ``caplet exec``) come here. A guest worker
is started like any plugin's worker, through the host's launcher, so it
gets the same namespaces, Landlock, seccomp and rlimits; what it does not
get is anything to use them on: no ``fs.*`` path beyond the Python
runtime, no environment, no program, no network, no ``ctx`` attribute
beyond what every worker has, and a request handler
(:class:`~caplet._host._guest_requests.GuestRequests`) that serves only
calls of the enabled plugins' declared functions. Its "plugin" is the
generated runner of :mod:`caplet._sandbox._guest_wire` (no manifest, no
approval: nothing in it comes from anyone but caplet), in a private
read-only snapshot made once per host. Resources come from
``Policy.guest`` (:class:`~caplet._host._guest_limits.GuestLimits`).

The path of one snippet (docs/architecture.md, "the path of one guest
call"): the request is checked (a str within the size cap, a timeout
within the policy), a started worker is taken from the warm pool
(:mod:`caplet._host._guest_pool`), the snippet crosses as one CALL of
``guest.run`` with the catalog of importable host modules, the worker's
``host.*`` calls come back as ``guest.call`` requests while it runs, and
its reply is decoded strictly (guest code can forge it). The worker is
discarded after that one snippet, whatever happened, and the pool starts a
replacement in the background.

What the snippet does is never raised: its exception, a timeout (the
worker is killed) and a crashed or misbehaving sandbox are all a
:class:`~caplet._host._guest_result.GuestResult` with a status, because an
agent feeds all of them back to its model. Raised are only a bad request
(:class:`~caplet._errors.GuestError`) and a sandbox that cannot start
(:class:`~caplet._errors.WorkerStartError`).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Final

from caplet._errors import (
    CallTimeoutError,
    GuestError,
    PluginCallError,
    ProtocolError,
    SandboxError,
    WorkerCrashedError,
    WorkerStartError,
)
from caplet._host._guest_catalog import GuestCatalog
from caplet._host._guest_limits import GuestLimits
from caplet._host._guest_pool import GuestPool
from caplet._host._guest_result import GuestResult, GuestStatus
from caplet._logs import caplet_logger
from caplet._numbers import finite_number, shown_number
from caplet._sandbox._guest_wire import (
    GUEST_ENTRY,
    GUEST_FUNCTION,
    GUEST_MODULE,
    GUEST_PLUGIN,
    RUNNER_SOURCE,
    GuestRequest,
    decode_reply,
    encode_request,
)
from caplet._sandbox._launcher import Launcher, RequestHandler, Worker, WorkerSpec
from caplet._sandbox._rlimits import millicores
from caplet._trust._snapshot import Snapshot, make_snapshot, remove_snapshot

__all__ = ["CRASHED_TYPE", "TIMEOUT_TYPE", "GuestRunner"]

logger = caplet_logger()

#: ``GuestResult.error_type`` of a snippet killed at its deadline.
TIMEOUT_TYPE: Final = "TimeoutError"
#: ``GuestResult.error_type`` of a snippet whose sandbox died or misbehaved.
CRASHED_TYPE: Final = "SandboxCrashed"


class _GuestWorker:
    """One started guest worker and its private working directory (a pool ``Lease``)."""

    __slots__ = ("workdir", "worker")

    def __init__(self, worker: Worker, workdir: Path) -> None:
        self.worker = worker
        self.workdir = workdir

    @property
    def alive(self) -> bool:
        return self.worker.alive

    def close(self) -> None:
        try:
            self.worker.close()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


class GuestRunner:
    """Runs guest snippets for one host: the runner snapshot, the pool, the results.

    ``launcher`` is the host's (the same isolation as its plugins);
    ``run_dir`` the host's private run directory (the runner snapshot and
    each worker's working directory go there).
    """

    def __init__(
        self,
        launcher: Launcher,
        limits: GuestLimits,
        run_dir: Path,
        *,
        start_timeout_s: float,
    ) -> None:
        self._launcher = launcher
        self.limits = limits
        self._run_dir = run_dir
        self._start_timeout_s = start_timeout_s
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()
        self.pool: GuestPool[_GuestWorker] = GuestPool(self._start, limits.pool_size)
        #: The guest worker each thread's snippet runs in (what interrupt() stops).
        self._inflight: dict[int, Worker] = {}

    def interrupt(self, thread: int) -> bool:
        """Stop the snippet ``thread`` is running (its caller cancelled it)."""
        worker = self._inflight.get(thread)
        return worker is not None and worker.interrupt(thread)

    # -- workers ------------------------------------------------------------------------

    def _runner(self) -> Path:
        """The runner's read-only snapshot, made on first use."""
        with self._lock:
            if self._snapshot is None:
                source = Path(tempfile.mkdtemp(prefix="guest-runner-src-", dir=self._run_dir))
                try:
                    (source / GUEST_ENTRY).write_text(RUNNER_SOURCE, encoding="utf-8")
                    self._snapshot = make_snapshot(source, self._run_dir)
                finally:
                    shutil.rmtree(source, ignore_errors=True)
            return self._snapshot.path

    def _start(self) -> _GuestWorker:
        """A started guest worker; only the sandbox layer's errors escape (WorkerStartError)."""
        try:
            return self._start_worker()
        except SandboxError:
            raise
        except Exception as exc:
            # The runner's snapshot or the working directory could not be made
            # (a full disk, a run directory removed behind the host's back).
            raise WorkerStartError(
                f"guest code: no sandbox could be started ({type(exc).__name__}: {exc}); "
                "check the host's temporary directory (free space, permissions)"
            ) from exc

    def _start_worker(self) -> _GuestWorker:
        limits = self.limits
        snapshot = self._runner()
        workdir = Path(tempfile.mkdtemp(prefix="guest-work-", dir=self._run_dir))
        spec = WorkerSpec(
            plugin=GUEST_PLUGIN,
            snapshot_dir=snapshot,
            entry=GUEST_ENTRY,
            config={},
            modules={GUEST_MODULE: (GUEST_FUNCTION,)},
            workdir=workdir,
            start_timeout_s=self._start_timeout_s,
            max_frame_bytes=limits.max_frame_bytes,
            # Zero capabilities: no paths beyond the runtime and the runner,
            # no programs (execve is denied), an empty environment, no
            # optional ctx attribute.
            grants=(),
            programs=(),
            memory_mb=limits.memory_mb,
            cpu_s=limits.cpu_s,
            cpu_millicores=millicores(limits.cpu_cores),
            open_files=limits.open_files,
            processes=limits.processes,
            env={},
            tmp_size_mb=limits.tmp_size_mb,
            max_context_requests=limits.max_host_calls,
        )
        try:
            worker = self._launcher.start(spec)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return _GuestWorker(worker, workdir)

    def warm(self) -> int:
        """Start the pool's missing workers now; return how many are waiting."""
        return self.pool.fill()

    # -- one snippet --------------------------------------------------------------------

    def timeout_s(self, timeout: float | None) -> float:
        """The snippet's deadline in seconds; GuestError for one the policy refuses."""
        limits = self.limits
        if timeout is None:
            return limits.timeout_ms / 1000
        if not finite_number(timeout) or not timeout > 0 or timeout * 1000 > limits.max_timeout_ms:
            raise GuestError(
                f"guest code: timeout must be a positive number of seconds up to "
                f"{limits.max_timeout_ms / 1000:g} (Policy.guest.max_timeout_ms), got "
                f"{shown_number(timeout)}"
            )
        return float(timeout)

    def check_code(self, code: object) -> str:
        """``code`` if it is a str within the size cap; GuestError otherwise."""
        if not isinstance(code, str):
            raise GuestError(
                f"guest code must be a str of Python source, got {type(code).__name__}"
            )
        limit = self.limits.max_code_kb * 1024
        try:
            size = len(code.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise GuestError(
                f"guest code is not valid text (a lone surrogate at index {exc.start}); "
                "pass the source as a normal str"
            ) from None
        if size > limit:
            raise GuestError(
                f"guest code is {size} bytes, over the limit of {limit} bytes "
                "(Policy.guest.max_code_kb); send a shorter snippet"
            )
        return code

    def run(
        self,
        code: str,
        *,
        timeout: float | None,
        catalog: GuestCatalog,
        handler: RequestHandler,
        cancel: threading.Event | None = None,
    ) -> GuestResult:
        """Run ``code`` in a fresh guest worker; every outcome is a GuestResult.

        ``cancel``: see :meth:`interrupt` (a cancelled snippet is a CRASHED result).
        """
        code = self.check_code(code)
        timeout_s = self.timeout_s(timeout)
        limits = self.limits
        request = GuestRequest(
            code=code,
            modules=catalog.modules,
            unavailable=catalog.unavailable,
            max_output_chars=limits.max_output_chars,
            max_value_bytes=limits.max_output_chars,
        )
        guest = self.pool.take()
        thread = threading.get_ident()
        self._inflight[thread] = guest.worker
        try:
            value = guest.worker.call(
                GUEST_MODULE,
                GUEST_FUNCTION,
                [encode_request(request)],
                {},
                timeout_s=timeout_s,
                on_request=handler,
                cancel=cancel,
            )
            reply = decode_reply(
                value,
                max_output_chars=limits.max_output_chars,
                max_value_bytes=limits.max_output_chars,
            )
        except CallTimeoutError:
            return _failed(
                GuestStatus.TIMEOUT,
                TIMEOUT_TYPE,
                f"the snippet did not finish within {round(timeout_s * 1000)} ms; its sandbox "
                "was killed and its output is lost (make it faster, or pass a longer timeout)",
            )
        except PluginCallError as exc:
            # guest.run itself raised: the snippet broke the runner it shares
            # its interpreter with.
            return _failed(
                GuestStatus.CRASHED,
                CRASHED_TYPE,
                f"the snippet broke the guest runner ({exc.exc_type}); its output is lost",
            )
        except WorkerCrashedError:
            return _failed(
                GuestStatus.CRASHED,
                CRASHED_TYPE,
                "the snippet's sandbox died before it finished (os._exit, a signal, or a "
                "resource limit); its output is lost",
            )
        except ProtocolError as exc:
            return _failed(
                GuestStatus.CRASHED,
                CRASHED_TYPE,
                f"the snippet's sandbox broke the protocol and was killed ({_short(exc)}); "
                "its output is lost",
            )
        except SandboxError as exc:
            return _failed(GuestStatus.CRASHED, CRASHED_TYPE, f"the snippet failed: {_short(exc)}")
        except Exception as exc:
            # A bug of the host's, never the snippet's doing (issue 13): still a
            # result, since exec never raises for what happened while it ran.
            logger.exception("guest code: the host failed while a snippet ran")
            return _failed(
                GuestStatus.CRASHED,
                CRASHED_TYPE,
                f"the host failed while the snippet ran ({type(exc).__name__}); its output is "
                "lost; the host logged the details (report it as a caplet bug if it repeats)",
            )
        finally:
            self._inflight.pop(thread, None)
            # One worker, one snippet: whatever happened, this one is done.
            self.pool.discard(guest)
        return GuestResult(
            status=GuestStatus.OK if reply.error is None else GuestStatus.ERROR,
            stdout=reply.stdout,
            stderr=reply.stderr,
            value=reply.value,
            value_repr=reply.value_repr,
            error=reply.error,
            error_type=reply.error_type,
            truncated=reply.truncated,
        )

    def close(self) -> None:
        """Close every guest worker and remove the runner snapshot. Idempotent."""
        self.pool.close()
        with self._lock:
            if self._snapshot is not None:
                remove_snapshot(self._snapshot)
                self._snapshot = None


def _failed(status: GuestStatus, error_type: str, message: str) -> GuestResult:
    return GuestResult(status=status, error=f"{error_type}: {message}\n", error_type=error_type)


def _short(exc: Exception, limit: int = 300) -> str:
    """The failure, without the worker's name (it is no plugin) and cut to ``limit``."""
    text = str(exc).removeprefix(f"plugin '{GUEST_PLUGIN}': ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
