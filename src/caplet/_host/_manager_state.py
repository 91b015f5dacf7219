"""The plugin manager's state and its bookkeeping: the base the lifecycle builds on.

:class:`ManagerState` holds what every concern of :class:`PluginManager`
shares: its settings (policy, store, lock file path, loading rules, the
red-team switch), the table of plugin records, the dirty flags and generation
a host watches, the decision log, the run directory and the snapshots
(``_take``) that everything audited, gated and enabled is read from. It is
apart from the concerns (:mod:`._manager_audit`, :mod:`._manager_discover`,
:mod:`._manager_approval`, :mod:`._manager_config`, :mod:`._manager_enable`)
so that each of those reads one state and none imports another sideways.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from caplet._audit._provider import AuditorProvider, ProviderSettings
from caplet._errors import (
    LockfileError,
    ManifestError,
    PluginNotFoundError,
    PolicyError,
    StoreError,
)
from caplet._host._decision_log import DecisionLog
from caplet._host._grant_check import GrantPlan
from caplet._host._import_paths import import_paths, runtime_paths
from caplet._host._loading import LoadingRules
from caplet._host._plugin_record import PluginRecord
from caplet._host._policy import Policy
from caplet._host._records import (
    BrokenPlugin,
    DirtyFlags,
    Outcome,
    PluginState,
)
from caplet._host._run_dir import RunDir, unchecked_warning, unseen_warning
from caplet._logs import caplet_logger
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Manifest
from caplet._sandbox._identity import WorkerIdentity, worker_identity
from caplet._suggest import closest
from caplet._trust._lockfile import LOCKFILE_NAME, Lockfile
from caplet._trust._open import open_store, store_from_environment
from caplet._trust._paths import default_state_dir
from caplet._trust._snapshot import Snapshot, make_snapshot, remove_snapshot
from caplet._trust._source import SourceKind
from caplet._trust._store import TrustStore

__all__ = ["RED_TEAM_BANNER", "RED_TEAM_LABEL", "ManagerState"]

logger = caplet_logger()


#: Prefixed to every decision a red-team host logs (see PluginManager.red_team).
RED_TEAM_LABEL = "[RED TEAM: static gate OFF]"
#: Said once per red-team host, and by the CLI on stderr.
RED_TEAM_BANNER = (
    "RED-TEAM MODE: the static gate is OFF for this host (red_team=True). Danger findings "
    "and the risk policy are measured, not enforced: plugins the review would refuse run, "
    "bounded by the sandbox alone. Never use this outside a red-team or selftest run."
)


class ManagerState:
    """The shared state of a :class:`PluginManager` (see the module docstring)."""

    def __init__(
        self,
        plugins_dir: Path | str,
        *,
        state_dir: Path | str | None = None,
        store: TrustStore | str | None = None,
        policy: Policy | None = None,
        auditor: AuditorProvider | Literal["env"] | None = "env",
        lockfile: Path | str | None = None,
        loading: LoadingRules | None = None,
        dist_path: Sequence[Path | str] | None = None,
        red_team: bool = False,
    ) -> None:
        self.plugins_dir = Path(plugins_dir)
        self.policy = policy if policy is not None else Policy()
        #: The policy file in force, guarded like the lock file (PluginHost sets it).
        self.policy_file: Path | None = None
        #: ``store = VALUE (FILE)`` when only a project's policy file named the store
        #: (PluginHost sets it, ``_policy_file.project_store``): its approvals and cached
        #: audits are the project author's, so outside locked mode they vouch for nothing,
        #: are shown, and consent is asked (decide14). "" when the operator named it.
        self.unvouched_store = ""
        #: ``(content hash, auditor id)`` of the audits this process stored: the only
        #: cached audits a store of ``unvouched_store`` may give back (decide14).
        self._audits_here: set[tuple[str, str]] = set()
        self._auditor_choice = auditor
        #: The auditor built from the environment (lazily: building one costs an
        #: httpx import and client), or the one passed in.
        self._auditor: AuditorProvider | None = None if auditor == "env" else auditor
        self._env_settings: ProviderSettings | None = None
        self._env_read = False
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.lockfile_path = (
            Path(lockfile) if lockfile is not None else self.plugins_dir.parent / LOCKFILE_NAME
        )
        self.loading = loading if loading is not None else LoadingRules.from_environment(os.environ)
        self.dist_path = dist_path
        #: The public red-team switch (issue 13, point 9): the static gate is
        #: off, so a red team measures the kernel layers alone. Only ever set by
        #: this explicit argument (never a policy file or the environment),
        #: refused in locked mode, and written into every decision logged.
        self.red_team = red_team
        if red_team:
            if self.loading.locked:
                raise PolicyError(
                    "red_team=True cannot run in locked mode: locked mode loads only what the "
                    "lock file pins after review, and red-team mode skips that review's gate; "
                    "unset CAPLET_LOCKED/CI or pass locked=False for the red-team run"
                )
            logger.warning("%s", RED_TEAM_BANNER)
        self._owns_store = store is None or isinstance(store, str)
        if store is None:
            store = store_from_environment(self.state_dir, configured=self.policy.store)
        elif isinstance(store, str):
            store = open_store(store, state_dir=self.state_dir)
        self.store: TrustStore = store
        #: Refusals at a bounded rate, rows kept as long as the policy says (issue 15).
        self._decisions = DecisionLog(store, self.policy.log)
        self._decisions.prune()
        self._records: dict[str, PluginRecord] = {}
        self._broken: list[BrokenPlugin] = []
        self._lock: Lockfile | None = None
        self._lock_error: LockfileError | None = None
        self._sandbox_dirty = False
        self._session_dirty = False
        #: Bumped by every enable/disable, so a PluginHost can tell cheaply
        #: whether a cached worker must be re-validated before a call.
        self.generation = 0
        #: Where snapshots live (made on first use): in the state directory,
        #: where no grant reaches (:mod:`caplet._host._run_dir`).
        self._run: RunDir | None = None
        #: The policy's (worker_uid, worker_gid) and the identity they gave (see
        #: _worker_identity).
        self._identity: tuple[tuple[int | None, int | None], WorkerIdentity] | None = None
        #: Manifests read from snapshots, by what their reading depends on (see _take).
        self._manifests: dict[tuple[str, Path, bool, str | None], Manifest] = {}

    def _unvouched(self) -> bool:
        """Approvals and cached audits are a project file's store's, outside locked mode."""
        return bool(self.unvouched_store) and not self.locked

    @property
    def locked(self) -> bool:
        """True in locked mode: only plugins ``caplet.lock`` pins may load."""
        return self.loading.locked

    # -- lookup ----------------------------------------------------------------------

    def _record(self, name: str) -> PluginRecord:
        record = self._records.get(name)
        if record is None:
            broken = next((b for b in self._broken if b.directory.name == name), None)
            if broken is not None:
                # Its folder is there but could not be read: say why (issue 15).
                raise PluginNotFoundError(
                    f"plugin {name!r} was skipped: {broken.error}", name=name, suggestion=None
                )
            suggestion = closest(name, self._records)
            hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
            raise PluginNotFoundError(
                f"no plugin named {name!r} in {self.plugins_dir}{hint}; "
                "run `caplet list` to see the discovered plugins",
                name=name,
                suggestion=suggestion,
            )
        return record

    def is_dirty(self) -> DirtyFlags:
        return DirtyFlags(sandbox=self._sandbox_dirty, session=self._session_dirty)

    def consume_sandbox_dirty(self) -> bool:
        """True once after an enable/disable: the guest sandbox needs rebuilding."""
        dirty, self._sandbox_dirty = self._sandbox_dirty, False
        return dirty

    def consume_session_dirty(self) -> bool:
        """True once after an enable/disable or a configuration change of an enabled
        plugin: the system message changed."""
        dirty, self._session_dirty = self._session_dirty, False
        return dirty

    def _config_changed(self, record: PluginRecord) -> None:
        """The system message shows an enabled plugin's configuration: it must be rebuilt."""
        if record.state is PluginState.ENABLED:
            self._session_dirty = True

    def _mark_dirty(self) -> None:
        self.generation += 1
        self._sandbox_dirty = True
        self._session_dirty = True

    # -- log

    def log_decision(
        self, plugin: str, action: str, target: str, allowed: bool, detail: str = ""
    ) -> None:
        """Record one decision in the permission log."""
        self._log(plugin, action, target, allowed, detail)

    def _log(self, plugin: str, action: str, target: str, allowed: bool, detail: str = "") -> None:
        if self.red_team:
            detail = f"{RED_TEAM_LABEL} {detail}".rstrip()
        self._decisions.record(plugin, action, target, allowed, detail)

    def _refuse(self, name: str, action: str, reason: str) -> Outcome:
        self._log(name, action, name, False, reason)
        return Outcome(False, reason)

    def close(self) -> None:
        """Close the store and the auditor if this manager opened them; remove snapshots."""
        self._decisions.flush()
        if self._auditor_choice == "env" and self._auditor is not None:
            self._auditor.close()
            self._auditor = None
        for record in self._records.values():
            record.snapshot = None
        if self._run is not None:
            self._run.close()
            self._run = None
        if self._owns_store:
            self.store.close()

    @property
    def run_dir(self) -> Path:
        """This process's private run directory (snapshots, work directories)."""
        return self._run_directory().path

    def _run_directory(self) -> RunDir:
        if self._run is None:
            self._run = RunDir(self.state_dir)
            if self._run.unseen:
                logger.warning("caplet: %s", unseen_warning(self._run.unseen))
            for note in self._run.meeting_notes:
                logger.warning("caplet: %s", note)
            problem = self._run.meeting_problem()
            if problem:
                logger.warning("caplet: %s", unchecked_warning(problem))
            # Best effort here (an audit, an approval on a full disk fail on their own
            # writes, as before); every enable publishes again and fails closed.
            with contextlib.suppress(StoreError):
                self._run.publish_code(self._code_folders())
        return self._run

    def _code_folders(self) -> tuple[tuple[Path, bool], ...]:
        """The folders this process runs Python code from, for the other hosts on the
        state directory (:meth:`RunDir.publish_code`): its ``sys.path``, its runtime, its
        plugins directory and installed plugins."""
        code = (self.plugins_dir, *self._installed_folders())
        return (
            *import_paths(),
            *((Path(path), True) for path in runtime_paths()),
            *((path, True) for path in code),
        )

    def _installed_folders(self) -> tuple[Path, ...]:
        """The folders of the installed plugins discovered (their code)."""
        return tuple(
            record.manifest.plugin_dir
            for record in self._records.values()
            if record.source.kind is SourceKind.DISTRIBUTION
        )

    def _publish_grants(
        self,
        changed: Mapping[str, GrantPlan] | None = None,
        check: Callable[[Mapping[str, GrantPlan]], None] | None = None,
    ) -> None:
        """What the enabled plugins (and ``changed``, about to be) may write and run,
        for the other hosts' enables (``check`` first, see :meth:`RunDir.publish`).
        StoreError when it cannot be written."""
        plans = {
            record.name: record.grant_plan
            for record in self._records.values()
            if record.state is PluginState.ENABLED
        }
        run = self._run_directory()
        run.publish_code(self._code_folders())  # sys.path and the plugins may have changed
        run.publish({**plans, **(changed or {})}, check)

    def _worker_identity(self) -> WorkerIdentity:
        """Who workers run as, looked up once per policy (a passwd lookup, ~0.15 ms
        of every enable here): the sandbox launcher fixes its own when it is made,
        so a later change to the account would not reach the workers either."""
        key = (self.policy.worker_uid, self.policy.worker_gid)
        if self._identity is None or self._identity[0] != key:
            self._identity = (key, worker_identity(*key))
        return self._identity[1]

    def _take(self, record: PluginRecord) -> tuple[Snapshot, Manifest]:
        """One private copy of the plugin's files, and the manifest read from that copy.

        Issue 13, point 5: whatever is audited, gated, hashed, recorded and
        loaded comes from this one copy, taken once; the live folder may
        change at any moment in between (a thread swapping ``plugin.py``)
        and changes nothing. The manifest, capabilities included, is the
        copy's own: an approval pins a hash, and the hash covers the manifest.
        """
        snapshot = make_snapshot(record.manifest.plugin_dir, self.run_dir, named=True)
        # A copy's manifest follows from its bytes (the hash covers every file
        # the reading looks at, the entry module included), the folder it is
        # named after, the broad-paths policy and the home directory (fs
        # capabilities are refused under it): with all four the same, the
        # parse (~0.5 ms of every enable) is not repeated.
        key = (
            snapshot.content_hash,
            record.manifest.plugin_dir,
            self.policy.allow_broad_paths,
            os.environ.get("HOME"),
        )
        cached = self._manifests.get(key)
        if cached is not None:
            return snapshot, cached
        try:
            manifest = load_manifest(snapshot.path, allow_broad=self.policy.allow_broad_paths)
        except ManifestError as exc:
            remove_snapshot(snapshot)
            raise ManifestError(
                str(exc).replace(str(snapshot.path), str(record.manifest.plugin_dir)),
                path=str(record.manifest.path),
                field=exc.field,
            ) from exc
        # Messages name the plugin's own folder, never the run directory.
        manifest = dataclasses.replace(
            manifest, path=record.manifest.plugin_dir / manifest.path.name
        )
        if len(self._manifests) >= _MANIFESTS_KEPT:
            self._manifests.pop(next(iter(self._manifests)))  # the oldest
        self._manifests[key] = manifest
        return snapshot, manifest


#: Manifests kept by _take (one per plugin version in use, a few kilobytes each).
_MANIFESTS_KEPT = 256
