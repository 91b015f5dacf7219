"""The live worker of each plugin: started from the enable's snapshot, taken out of service, closed.

A worker is started with its plugin's lock held and the previous one
detached; it is *detached* (taken out of service) under that lock and
*disposed of* (closed, its snapshot and work directory removed) after the
locks are released, because closing waits for a call still running in it.
Only the thread that detached a worker disposes of it (docs/architecture.md,
"Threads").
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from caplet._errors import LifecycleError, WorkerStartError
from caplet._host._context import ContextBroker
from caplet._host._guards import PluginGuards
from caplet._host._manager import PluginManager
from caplet._host._observe import Observer
from caplet._host._policy import Policy
from caplet._host._records import PluginInfo, PluginState
from caplet._host._running import REJECTED_LOGGED, RunningWorker, not_provided, worker_spec
from caplet._sandbox._launcher import Launcher
from caplet._trust._snapshot import Snapshot, make_snapshot, remove_snapshot

__all__ = ["Workers"]


class Workers:
    """The host's workers, one per enabled plugin that has been called or enabled."""

    def __init__(
        self,
        manager: PluginManager,
        launcher: Launcher,
        context: ContextBroker,
        observer: Observer,
        guards: PluginGuards,
    ) -> None:
        self.manager = manager
        self.launcher = launcher
        self.context = context
        self.observer = observer
        self._guards = guards
        #: The live worker of each plugin. Written only with that plugin's lock
        #: held; read without one on the warm path (one dict lookup).
        self.running: dict[str, RunningWorker] = {}
        #: Snapshots and work directories, in the state directory where no
        #: grant reaches (:mod:`caplet._host._run_dir`); the manager's.
        self._run_dir = manager.run_dir
        #: Set when the host closes: nothing is called or started after it.
        self.closed = False

    @property
    def policy(self) -> Policy:
        return self.manager.policy

    def enabled_info(self, name: str) -> PluginInfo:
        """The plugin's record, if it may be called now: the host open, no quarantine, enabled."""
        if self.closed:
            raise LifecycleError(
                f"plugin {name!r} cannot be called: the host is closed; "
                "call plugins before PluginHost.close(), or make a new host"
            )
        info = self.manager.require_plugin(name)
        if info.quarantine is not None:
            raise LifecycleError(
                f"plugin {name!r} is quarantined ({info.quarantine.reason}); release it with "
                f"`caplet release {name}` after fixing the cause, then enable it again"
            )
        if info.state is not PluginState.ENABLED:
            raise LifecycleError(
                f"plugin {name!r} is not enabled (state: {info.state.value}); enable it first "
                f"(enablement lasts for one process: `caplet call --enable {name} ...`)"
            )
        return info

    def start(self, name: str) -> RunningWorker:
        """Start the plugin's worker; the caller holds the plugin's lock and has
        detached the previous worker."""
        info = self.enabled_info(name)
        expected = self.manager.enabled_hash(name)
        if expected is None:
            # Disabled (as a dependant of another plugin) between the two reads:
            # without a verified hash nothing may be loaded.
            raise LifecycleError(
                f"plugin {name!r} was disabled while its worker was being started; enable it again"
            )
        plan = self.manager.grant_plan(name)
        enabled = self.manager.enabled_snapshot(name)
        if enabled is None:
            raise LifecycleError(
                f"plugin {name!r} was disabled while its worker was being started; enable it again"
            )
        # What was audited and gated is what loads, whatever the live folder
        # holds now (issue 13, point 5): a copy of the enable's own snapshot,
        # checked against the approved hash. A jail copies it into its own
        # tmpfs anyway and checks that copy, before any plugin code runs; a
        # copy here as well cost each start ~0.3 ms of file creation on the
        # state directory's disk (traced against the code before issue 13).
        # Such a jail's worker works in its own tmpfs, too: no host directory.
        snapshot = workdir = None
        if not self.launcher.copies_snapshot:
            snapshot = make_snapshot(enabled.path, self._run_dir, expected_hash=expected)
            try:
                workdir = Path(tempfile.mkdtemp(prefix=f"{name}-work-", dir=self._run_dir))
            except OSError as exc:
                _remove(snapshot)
                raise WorkerStartError(
                    f"plugin {name!r}: cannot create its working directory in {self._run_dir} "
                    f"({exc.strerror}); check free space and that the state directory is writable"
                ) from exc
        spec = worker_spec(
            info,
            enabled.path if snapshot is None else snapshot.path,
            workdir,
            plan,
            self.policy,
            context=self.context.grants(info),
            snapshot_hash=expected if snapshot is None else "",
        )
        try:
            worker = self.launcher.start(spec)
        except BaseException as exc:
            # A start that failed may still have tried denied syscalls: they
            # are what the approver needs to see (issue 3: every decision logged).
            denials: dict[str, int] = getattr(exc, "denials", None) or {}
            for syscall, count in sorted(denials.items()):
                self.manager.log_decision(
                    name, "seccomp", syscall, False, f"denied {count} time(s) during start"
                )
            _remove(snapshot)
            _remove_workdir(workdir)
            raise
        missing = not_provided(info, worker.started.registered)
        if missing:
            # Declared (and so advertised to agents) but never returned by
            # create_functions: refused at enable, naming them (issue 15).
            worker.close()
            _remove(snapshot)
            _remove_workdir(workdir)
            raise LifecycleError(
                f"plugin {name!r} declares {', '.join(missing)} in its manifest, but "
                f"create_functions did not return {'it' if len(missing) == 1 else 'them'}; "
                "return every declared function, or remove it from the manifest's [modules]"
            )
        # The real guarantee this worker runs under, on record (best-effort
        # isolation may have run it with fewer layers than strict would).
        self.manager.log_decision(
            name, "start", self.launcher.isolation, True, f"worker pid {worker.pid}"
        )
        rejected = worker.started.rejected
        for undeclared in rejected[:REJECTED_LOGGED]:
            self.manager.log_decision(
                name, "register", undeclared, False, "not declared in the manifest; rejected"
            )
        if len(rejected) > REJECTED_LOGGED:
            # One row each would let a plugin fill the state database (and bury
            # the decision log) at every start: the rest are counted, not listed.
            more = len(rejected) - REJECTED_LOGGED
            self.manager.log_decision(
                name,
                "register",
                f"{more} more",
                False,
                f"{more} more registrations not declared in the manifest; rejected (not "
                "listed one by one)",
            )
        schemas = self.manager.validators(name)
        targets = {
            f"{m.name}.{f}": (m.name, f, schemas.get(f"{m.name}.{f}"))
            for m in info.manifest.modules
            for f in m.function_names
        }
        timeout_s = self.policy.timeout_ms(info.manifest.limits.timeout_ms, info.tier) / 1000
        running = RunningWorker(
            worker,
            snapshot,
            workdir,
            targets,
            timeout_s,
            breaker=self._guards.breaker(name),
            on_request=self.context.handler(info),
            meter=self.observer.started(name, worker.pid),
        )
        assert name not in self.running, "the previous worker must be detached first"
        self.running[name] = running
        return running

    def stop(self, name: str, running: RunningWorker | None = None) -> None:
        """Stop the plugin's worker (only ``running``, if given and still current)."""
        with self._guards.lock(name):
            detached = self.detach(name, running)
        self.dispose(detached)

    def detach(self, name: str, running: RunningWorker | None = None) -> RunningWorker | None:
        """Take the plugin's worker out of service (plugin lock held) and return it.

        With ``running``, only when that is still the current worker: the
        thread that detaches a worker is the one that disposes of it.
        """
        current = self.running.get(name)
        if current is None or (running is not None and current is not running):
            return None
        del self.running[name]
        return current

    def detach_each(self, names: Iterable[str]) -> list[RunningWorker]:
        """Detach the workers of ``names``, each under its own plugin lock."""
        retired = []
        for name in names:
            with self._guards.lock(name):
                detached = self.detach(name)
            if detached is not None:
                retired.append(detached)
        return retired

    def dispose_each(self, retired: Iterable[RunningWorker]) -> None:
        for running in retired:
            self.dispose(running)

    def dispose(self, running: RunningWorker | None) -> None:
        """Close a detached worker and remove its snapshot, with no host lock held
        (closing waits for a call still running in it)."""
        if running is None:
            return
        name = running.on_request.plugin
        self.observer.stopping(name, running.worker.pid)  # its last reading, before it goes
        running.worker.close()
        # The worker is reaped now, so the seccomp denials the zygote counted
        # for it are known: one permission-log line per denied syscall.
        for syscall, count in sorted(running.worker.denials.items()):
            self.manager.log_decision(name, "seccomp", syscall, False, f"denied {count} time(s)")
        _remove(running.snapshot)
        _remove_workdir(running.workdir)


def _remove(snapshot: Snapshot | None) -> None:
    """Remove the host's copy a worker started from, if it has one."""
    if snapshot is not None:
        remove_snapshot(snapshot)


def _remove_workdir(workdir: Path | None) -> None:
    """Remove the host directory a worker worked in, if it has one."""
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
