"""PluginHost: the object an application embeds.

It owns a :class:`PluginManager` (lifecycle and trust) and one worker per
enabled plugin (through a :class:`Launcher`), and turns
``host.call("hello", "greet.say", "world")`` into a request to that worker.

The path of one call (docs/architecture.md has the picture):

1. ``enable`` has verified trust (approval or a fresh audit of the current
   content hash), the danger gate, configuration and capabilities, and
   recorded the verified hash.
2. The first call (or ``enable`` itself) copies the plugin tree into a private
   read-only snapshot, hashes the snapshot, and refuses if the hash is not the
   verified one: code is only ever loaded from that snapshot (layer 9).
3. The launcher starts a worker on the snapshot with the resolved
   configuration and the declared modules; the worker registers only declared
   functions and reports the rest, which the host logs as refused.
4. Each call is one request frame and one reply frame, with a deadline; a
   timeout or crash kills the worker, the host survives and the next call
   starts a fresh worker from a fresh, re-verified snapshot.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from caplet._audit._model import AuditResult
from caplet._config._coerce import unknown_keys_message
from caplet._config._prompt import Prompter
from caplet._errors import LifecycleError, SandboxError
from caplet._findings import Finding
from caplet._host._manager import PluginManager
from caplet._host._policy import Policy
from caplet._host._records import DirtyFlags, InlineConfigResult, Outcome, PluginInfo, PluginState
from caplet._sandbox._launcher import Launcher, Worker, WorkerSpec
from caplet._sandbox._subprocess import SubprocessLauncher
from caplet._suggest import did_you_mean
from caplet._trust._snapshot import Snapshot, make_snapshot, remove_snapshot
from caplet._trust._store import ApprovalRecord, TrustStore

__all__ = ["PluginHost"]

PluginFunction = Callable[..., Any]


class _Running:
    """A live worker, the snapshot it was started from, and what the call path needs.

    ``targets`` maps each declared ``"module.function"`` to its parts and
    ``timeout_s`` is the per-call deadline, both computed once at start so a
    warm call does no lookups beyond one dict access.
    """

    __slots__ = ("generation", "snapshot", "targets", "timeout_s", "workdir", "worker")

    def __init__(
        self,
        worker: Worker,
        snapshot: Snapshot,
        workdir: Path,
        targets: dict[str, tuple[str, str]],
        timeout_s: float,
    ) -> None:
        self.worker = worker
        self.snapshot = snapshot
        self.workdir = workdir
        self.targets = targets
        self.timeout_s = timeout_s
        #: The manager's lifecycle generation this worker was last validated at.
        self.generation = -1


class PluginHost:
    """Discover, trust, configure and call plugins, each in its own worker.

    ``host.manager`` exposes the full lifecycle API; the methods here are the
    everyday subset plus everything that needs a worker. Use it as a context
    manager (or call :meth:`close`) so workers and snapshots are cleaned up.
    """

    def __init__(
        self,
        plugins_dir: Path | str,
        *,
        state_dir: Path | str | None = None,
        policy: Policy | None = None,
        store: TrustStore | None = None,
        launcher: Launcher | None = None,
        prompter: Prompter | None = None,
        discover: bool = True,
    ) -> None:
        self.manager = PluginManager(plugins_dir, state_dir=state_dir, store=store, policy=policy)
        self.launcher: Launcher = launcher if launcher is not None else SubprocessLauncher()
        self.prompter = prompter
        self._running: dict[str, _Running] = {}
        self._run_dir = Path(tempfile.mkdtemp(prefix="caplet-run-"))
        self._closed = False
        if discover:
            self.manager.discover()

    # -- delegated lifecycle --------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        return self.manager.policy

    def discover(self) -> int:
        """Re-scan the plugins directory; workers of vanished plugins are stopped."""
        count = self.manager.discover()
        for name in list(self._running):
            info = self.manager.get_plugin(name)
            if info is None or info.state is not PluginState.ENABLED:
                self._stop(name)
        return count

    def list_plugins(self) -> list[PluginInfo]:
        return self.manager.list_plugins()

    def get_plugin(self, name: str) -> PluginInfo | None:
        return self.manager.get_plugin(name)

    def scan(self, name: str) -> list[Finding]:
        """Static findings of the plugin's current content (nothing is executed)."""
        return self.manager.run_static_scan(name)

    def audit(self, name: str) -> AuditResult:
        """Static-only audit of the current content, cached by content hash."""
        return self.manager.audit(name)

    def approve(self, name: str) -> Outcome:
        return self.manager.approve(name)

    def unapprove(self, name: str) -> Outcome:
        """Remove approval; a running worker keeps serving this session."""
        return self.manager.unapprove(name)

    def is_approved(self, name: str) -> bool:
        return self.manager.is_approved(name)

    def get_approval_record(self, name: str) -> ApprovalRecord | None:
        return self.manager.get_approval_record(name)

    def configure(
        self,
        name: str,
        inline: Iterable[str] = (),
        *,
        prompter: Prompter | None = None,
    ) -> InlineConfigResult:
        """Apply inline ``key=value`` entries, then prompt for what must be asked."""
        result = self.manager.apply_inline_config(name, inline)
        prompter = prompter if prompter is not None else self.prompter
        # A typo'd key is refused before anything is asked: prompting for the
        # field the user meant to set would only hide the typo.
        if prompter is not None and not result.unknown:
            self.manager.prompt_config(prompter, name, skip_keys=result.applied)
        return result

    # -- enable / disable ----------------------------------------------------------------

    def enable(
        self,
        name: str,
        inline: Iterable[str] = (),
        *,
        config: Mapping[str, object] | None = None,
        prompter: Prompter | None = None,
    ) -> Outcome:
        """Configure (``config`` replaces, ``inline`` overrides, prompts fill in) and enable.

        The worker is started here, so a plugin that fails to load or
        returns undeclared functions is reported at enable time, not at its
        first call. Enabling an enabled plugin reconfigures it and restarts
        its worker.
        """
        if config is not None:
            outcome = self.manager.set_config(name, config)
            if not outcome:
                return outcome
        result = self.configure(name, inline, prompter=prompter)
        if result.unknown:
            fields = self.manager.require_plugin(name).manifest.config
            return Outcome(False, unknown_keys_message(name, fields, result.unknown))
        outcome = self.manager.enable(name)
        if not outcome:
            return outcome
        self._stop(name)
        try:
            self._start(name)
        except SandboxError as exc:
            self.manager.disable(name)
            return Outcome(False, str(exc))
        return outcome

    def disable(self, name: str) -> Outcome:
        """Disable (and stop the workers of) the plugin and its enabled dependants."""
        outcome = self.manager.disable(name)
        if outcome:
            for stopped in (*outcome.affected, name):
                self._stop(stopped)
        return outcome

    # -- calling --------------------------------------------------------------------------

    def call(self, name: str, target: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``module.function`` of an enabled plugin in its worker.

        Raises :class:`LifecycleError` when the plugin is not enabled or does
        not declare the function, and the :class:`SandboxError` family for
        what happens in the worker (timeout, crash, the plugin's exception).
        """
        running = self._running.get(name)
        parts = running.targets.get(target) if running is not None else None
        if (
            running is None
            or parts is None
            or running.generation != self.manager.generation
            or not running.worker.alive
        ):
            # Slow path: explain what is wrong, or start a fresh worker.
            running, parts = self._prepare_call(name, target)
        try:
            return running.worker.call(
                parts[0], parts[1], args, kwargs, timeout_s=running.timeout_s
            )
        except SandboxError as exc:
            if not running.worker.alive:
                self.manager.log_decision(name, "call", target, False, str(exc))
                self._stop(name)
            raise

    def _prepare_call(self, name: str, target: str) -> tuple[_Running, tuple[str, str]]:
        try:
            info = self._enabled_info(name)
        except LifecycleError:
            self._stop(name)  # disabled behind our back (through the manager)
            raise
        module, _, function = target.partition(".")
        self._check_declared(info, module, function)
        running = self._running.get(name)
        if running is None or not running.worker.alive:
            self._stop(name)
            running = self._start(name)
        running.generation = self.manager.generation
        return running, (module, function)

    def functions(self, name: str) -> dict[str, dict[str, PluginFunction]]:
        """``{module: {function: callable}}`` for an enabled plugin's declared functions.

        Each callable is a proxy that calls into the worker; it holds no
        reference to anything in the worker.
        """
        info = self._enabled_info(name)
        table: dict[str, dict[str, PluginFunction]] = {}
        for module in info.manifest.modules:
            table[module.name] = {
                fn: _proxy(self, name, f"{module.name}.{fn}") for fn in module.function_names
            }
        return table

    def _enabled_info(self, name: str) -> PluginInfo:
        info = self.manager.require_plugin(name)
        if info.state is not PluginState.ENABLED:
            raise LifecycleError(
                f"plugin {name!r} is not enabled (state: {info.state.value}); enable it first "
                f"(enablement lasts for one process: `caplet call --enable {name} ...`)"
            )
        return info

    @staticmethod
    def _check_declared(info: PluginInfo, module: str, function: str) -> None:
        declared = [f"{m.name}.{f}" for m in info.manifest.modules for f in m.function_names]
        if f"{module}.{function}" not in declared:
            hint = did_you_mean(f"{module}.{function}", declared)
            raise LifecycleError(
                f"plugin {info.name!r} does not declare {module}.{function}{hint}; "
                f"declared functions: {', '.join(declared)}"
            )

    # -- workers --------------------------------------------------------------------------

    def _start(self, name: str) -> _Running:
        info = self._enabled_info(name)
        expected = self.manager.enabled_hash(name)
        snapshot = make_snapshot(info.path, self._run_dir, expected_hash=expected)
        workdir = Path(tempfile.mkdtemp(prefix=f"{name}-work-", dir=self._run_dir))
        spec = WorkerSpec(
            plugin=name,
            snapshot_dir=snapshot.path,
            entry=info.manifest.entry,
            config=dict(info.config),
            modules={m.name: m.function_names for m in info.manifest.modules},
            workdir=workdir,
            start_timeout_s=self.policy.start_timeout_s,
            max_frame_bytes=self.policy.max_frame_bytes,
        )
        try:
            worker = self.launcher.start(spec)
        except BaseException:
            remove_snapshot(snapshot)
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        for rejected in worker.started.rejected:
            self.manager.log_decision(
                name, "register", rejected, False, "not declared in the manifest; rejected"
            )
        targets = {
            f"{m.name}.{f}": (m.name, f) for m in info.manifest.modules for f in m.function_names
        }
        timeout_s = self.policy.timeout_ms(info.manifest.limits.timeout_ms) / 1000
        running = _Running(worker, snapshot, workdir, targets, timeout_s)
        self._running[name] = running
        return running

    def _stop(self, name: str) -> None:
        running = self._running.pop(name, None)
        if running is None:
            return
        running.worker.close()
        remove_snapshot(running.snapshot)
        shutil.rmtree(running.workdir, ignore_errors=True)

    def worker_pid(self, name: str) -> int | None:
        """The pid of the plugin's live worker, if one is running."""
        running = self._running.get(name)
        return running.worker.pid if running is not None and running.worker.alive else None

    def rejected_registrations(self, name: str) -> Sequence[str]:
        """What the running worker's ``create_functions`` returned without declaring it."""
        running = self._running.get(name)
        return running.worker.started.rejected if running is not None else ()

    # -- agent integration --------------------------------------------------------------------

    def system_message_additions(self) -> list[str]:
        return self.manager.get_system_message_additions()

    def is_dirty(self) -> DirtyFlags:
        return self.manager.is_dirty()

    def consume_sandbox_dirty(self) -> bool:
        return self.manager.consume_sandbox_dirty()

    def consume_session_dirty(self) -> bool:
        return self.manager.consume_session_dirty()

    @property
    def isolation(self) -> str:
        """What isolation the launcher gives each worker (shown to users)."""
        return self.launcher.isolation

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker, remove snapshots, close the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for name in list(self._running):
            self._stop(name)
        shutil.rmtree(self._run_dir, ignore_errors=True)
        self.manager.close()

    def __enter__(self) -> PluginHost:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _proxy(host: PluginHost, name: str, target: str) -> PluginFunction:
    def call(*args: Any, **kwargs: Any) -> Any:
        return host.call(name, target, *args, **kwargs)

    call.__name__ = target.rpartition(".")[2]
    call.__qualname__ = f"{name}:{target}"
    return call
