"""The plugin lifecycle: discover, audit, approve, configure, enable, disable.

This mirrors the Plugin Manager API of seed 000 in snake_case, with the
gaps it documents closed:

* approval requires an audit *of the current content hash* (the seed only
  checked that some audit existed);
* the content hash covers the whole tree, not only the entry file;
* the approved fast path re-checks the stored risk level against the policy
  in force now, so tightening ``max_risk_level`` binds after a restart too;
* ``requires`` between plugins is honoured in load order, on enable and on
  disable;
* with an LLM auditor configured (``auditor``, by default from the
  ``CAPLET_LLM_*`` environment), audits are deep audits with canaries, cached
  per content hash *and* model; a model that fails gives a labelled
  static-only result that is used for this process but not cached, so the
  next audit asks the model again.

Enablement and configuration live in memory only (per process, as in the
seed: configuration such as base paths is session-specific); approval,
audits, quarantine and the decision log persist in the :class:`TrustStore`.
Nothing here runs plugin code: workers are the :class:`PluginHost`'s job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from caplet._audit._deep import deep_audit, static_only_by_choice
from caplet._audit._model import AuditResult
from caplet._audit._provider import AuditorProvider, ProviderSettings, settings_from_env
from caplet._audit._select import provider_from_settings
from caplet._audit._static import static_audit
from caplet._capabilities._lint import lint_composition
from caplet._capabilities._model import Capability, CapabilityKind
from caplet._capabilities._parse import parse_capability, substitute
from caplet._config._coerce import (
    coerce_inline,
    parse_inline,
    unknown_keys,
    unknown_keys_message,
    validate_value,
)
from caplet._config._prompt import Prompter, prompt_answers
from caplet._config._schema import ConfigValue
from caplet._errors import (
    AuditConfigError,
    CapabilityError,
    CapletError,
    ConfigError,
    LockedModeError,
    LockfileError,
    ManifestError,
    PluginNotFoundError,
    PluginTreeError,
    PolicyError,
    SignatureError,
    StoreError,
)
from caplet._findings import Finding, RiskLevel, Severity
from caplet._host._capdiff import parse_approved
from caplet._host._consent import (
    Consent,
    ConsentReason,
    ConsentRequest,
    Widening,
    changed_while_shown,
    consent_need,
    consent_refusal,
    why_consent,
)
from caplet._host._decision_log import DecisionLog
from caplet._host._defaults import template_defaults
from caplet._host._discovery import discover_plugins
from caplet._host._gates import danger_message, uncovered_dangers, withheld_refusal
from caplet._host._grant_check import (
    GrantPlan,
    ProtectedPaths,
    check_against,
    plan_grants,
    store_directory,
)
from caplet._host._journal import recover
from caplet._host._loading import LoadingRules
from caplet._host._locked import (
    LockProblem,
    LockVerdict,
    check_entry,
    stale_entries,
    withheld_message,
)
from caplet._host._plugin_record import PluginRecord
from caplet._host._policy import Policy, TrustTier
from caplet._host._records import (
    BrokenPlugin,
    DirtyFlags,
    InlineConfigResult,
    Outcome,
    PluginInfo,
    PluginState,
)
from caplet._host._run_dir import RunDir
from caplet._host._system_message import system_message
from caplet._host._validate import FunctionValidator, compile_validators
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Hook, Manifest
from caplet._sandbox._identity import WorkerIdentity, worker_identity
from caplet._sandbox._jail import runtime_grants
from caplet._scan._model import ScanReport
from caplet._scan._scanner import scan_tree
from caplet._suggest import closest
from caplet._trust._hashing import tree_hash
from caplet._trust._keyring import Keyring
from caplet._trust._lockfile import LOCKFILE_NAME, LockEntry, Lockfile, LockSignature, read_lockfile
from caplet._trust._open import open_store, store_from_environment
from caplet._trust._paths import default_state_dir, default_state_dirs
from caplet._trust._signing import (
    PublicKey,
    SignatureStatus,
    check_plugin_signature,
    parse_public_key,
)
from caplet._trust._snapshot import Snapshot, make_snapshot, remove_snapshot
from caplet._trust._store import ApprovalRecord, QuarantineRecord, TrustStore

__all__ = ["RED_TEAM_BANNER", "RED_TEAM_LABEL", "PluginManager"]

logger = logging.getLogger("caplet")

#: Prefixed to every decision a red-team host logs (see PluginManager.red_team).
RED_TEAM_LABEL = "[RED TEAM: static gate OFF]"
#: Said once per red-team host, and by the CLI on stderr.
RED_TEAM_BANNER = (
    "RED-TEAM MODE: the static gate is OFF for this host (red_team=True). Danger findings "
    "and the risk policy are measured, not enforced: plugins the review would refuse run, "
    "bounded by the sandbox alone. Never use this outside a red-team or selftest run."
)


class PluginManager:
    """Discovers plugins and drives their lifecycle.

    Plugins come from the folders of ``plugins_dir`` and, unless autoload is
    off, from installed distributions on ``dist_path`` (default
    ``sys.path``; :mod:`caplet._host._installed`). ``store`` is a
    :class:`TrustStore`, or an address for :func:`caplet._trust._open.open_store`
    (``postgresql://…`` for a fleet's shared store, a state directory); it
    defaults to what ``CAPLET_STORE`` names, else a :class:`SqliteStore` in
    ``state_dir`` (itself defaulting to ``$CAPLET_STATE_DIR`` or the
    platform's user state dir). The state directory stays node-local either
    way (run directory, snapshots, keys, update journals). ``lockfile``
    defaults to ``caplet.lock`` beside the plugins directory; ``loading``
    (locked mode, allowlist, autoload, strictness) defaults to what the
    environment says (:class:`LoadingRules`).
    ``auditor`` is the LLM auditor: ``"env"`` (the default) reads
    ``CAPLET_LLM_*`` when the first audit needs it (unset: static-only),
    ``None`` forces static-only, or pass an :class:`AuditorProvider`.
    """

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

    @property
    def locked(self) -> bool:
        """True in locked mode: only plugins ``caplet.lock`` pins may load."""
        return self.loading.locked

    # -- discovery -----------------------------------------------------------------

    def discover(self) -> int:
        """Find and validate every plugin; return how many are usable.

        Interrupted updates are finished first (rolled back, or forward when
        they had committed). Broken plugins are skipped with a warning naming
        them (see :meth:`broken_plugins`) and discovery keeps going; with
        strict loading, broken and inert plugins raise
        :class:`LockedModeError` instead. A missing plugins directory gives
        0, not an error. Re-discovery keeps the state and configuration of
        plugins already known; approvals are re-checked against current
        hashes whenever they are consulted.
        """
        recover(self.state_dir, self.store)
        found = discover_plugins(
            self.plugins_dir,
            allow_broad=self.policy.allow_broad_paths,
            loading=self.loading,
            dist_path=self.dist_path,
        )
        self._broken = list(found.broken)
        self._read_lock()
        keys = self._trusted_keys()
        previous = self._records
        # Built aside and swapped in at the end: a call on another thread
        # looking a plugin up meanwhile sees the old table, never a half-built one.
        records: dict[str, PluginRecord] = {}
        for name, plugin in found.plugins.items():
            record = previous.get(name)
            if record is None:
                record = PluginRecord(
                    manifest=plugin.manifest, content_hash=plugin.content_hash, source=plugin.source
                )
            else:
                record.manifest = plugin.manifest
                record.content_hash = plugin.content_hash
                record.source = plugin.source
            self._check_signature(record, keys)
            self._refresh_audit(record)
            records[name] = record
        self._records = records
        for name, record in previous.items():
            if name not in records and record.state is PluginState.ENABLED:
                # The folder is gone: its functions must go too.
                self._mark_dirty()
        if self.loading.strict:
            problems = [b.error for b in self._broken] + [
                reason for reason in map(self.inert_reason, self._records) if reason
            ]
            if problems:
                raise LockedModeError(
                    f"strict loading refused {len(problems)} plugin problem(s): "
                    + "; ".join(problems),
                    problems=tuple(problems),
                )
        return len(self._records)

    def _read_lock(self) -> None:
        self._lock = None
        self._lock_error = None
        try:
            self._lock = read_lockfile(self.lockfile_path, missing_ok=not self.locked)
        except LockfileError as exc:
            self._lock_error = exc
            if not self.locked:
                logger.warning("%s", exc)

    def _trusted_keys(self) -> dict[str, PublicKey]:
        """The keys in the state directory's keyring plus the policy's ``trusted_keys``."""
        keys = Keyring(self.state_dir).keys()
        for index, text in enumerate(self.policy.trusted_keys):
            try:
                key = parse_public_key(text)
            except SignatureError as exc:
                raise SignatureError(
                    f"Policy.trusted_keys[{index}] is not a minisign public key ({exc}); "
                    "give the base64 line of a .pub file"
                ) from exc
            keys[key.key_id_hex] = key
        return keys

    def _check_signature(self, record: PluginRecord, keys: Mapping[str, PublicKey]) -> None:
        record.signature = check_plugin_signature(
            record.manifest.plugin_dir, record.content_hash, keys
        )
        record.tier = self.policy.tier_for(record.source.kind, record.signature.status)

    def lockfile(self) -> Lockfile | None:
        """The lock file as the last discovery read it (None when missing or unreadable)."""
        return self._lock

    def lock_verdict(self, name: str) -> LockVerdict | None:
        """What the lock file says about *name* now (None without a readable lock file)."""
        record = self._record(name)
        if self._lock is None:
            return None
        return check_entry(
            self._lock,
            manifest=record.manifest,
            digest=record.content_hash,
            source=record.source,
            plugin_dir=record.manifest.plugin_dir,
        )

    def inert_reason(self, name: str) -> str:
        """Why *name* may not load in this process ("" when it may).

        The allowlist (``CAPLET_LOAD_PLUGINS``), then in locked mode the lock
        file, then the policy's ``require_signature``.
        """
        record = self._record(name)
        if not self.loading.allows(name):
            listed = ", ".join(sorted(self.loading.allowlist or ())) or "none"
            return (
                f"plugin {name!r} is not in CAPLET_LOAD_PLUGINS (allowed: {listed}); add it "
                "there to load it"
            )
        if self.locked:
            if self._lock_error is not None:
                return f"plugin {name!r} is inert in locked mode: {self._lock_error}"
            verdict = self.lock_verdict(name)
            if verdict is not None and verdict.problem is not None:
                return verdict.problem.message
        if self.policy.require_signature and record.signature.status is not SignatureStatus.VALID:
            return (
                f"plugin {name!r} has no valid signature by a trusted key "
                f"({record.signature.detail}) and the policy requires one; get a signed "
                "release, or trust its publisher's key (caplet trust add KEY)"
            )
        return ""

    def verify(self) -> list[LockProblem | str]:
        """Every reason ``caplet verify`` fails: broken plugins, lock problems, stale entries.

        Checks the lock file as locked mode would, whether or not this
        process is locked. An empty list means every plugin matches it.
        """
        try:
            lock = read_lockfile(self.lockfile_path)
        except LockfileError as exc:
            return [str(exc)]
        problems: list[LockProblem | str] = [b.error for b in self._broken]
        for record in self._records.values():
            verdict = check_entry(
                lock,
                manifest=record.manifest,
                digest=record.content_hash,
                source=record.source,
                plugin_dir=record.manifest.plugin_dir,
            )
            if verdict.problem is not None:
                problems.append(verdict.problem)
        problems.extend(stale_entries(lock, self._records))
        return problems

    def lock_entry(self, name: str, *, withhold: Collection[str] = ()) -> LockEntry:
        """The lock entry that pins *name*'s current, approved content.

        Raises :class:`LockfileError` unless the plugin is approved at its
        current hash; *withhold* names declared capabilities to leave out of
        the approved set (compared by meaning).
        """
        record = self._record(name)
        self._rehash(record)
        approval = self.store.get_approval(name)
        if approval is None or approval.content_hash != record.content_hash:
            state = "is not approved" if approval is None else "changed since it was approved"
            raise LockfileError(
                f"plugin {name!r} {state} (content {record.content_hash}); only approved "
                f"content can be pinned: caplet audit {name} && caplet approve {name}, then "
                f"caplet lock {name}",
                path=str(self.lockfile_path),
                plugin=name,
            )
        config_names = [f.name for f in record.manifest.config]
        approved = parse_approved(
            approval.capabilities, config_names=config_names, where=f"approval of {name!r}"
        )
        withheld = parse_approved(tuple(withhold), config_names=config_names, where="--withhold")
        unknown = [w.declared for w in withheld if w not in record.manifest.capabilities]
        if unknown:
            raise LockfileError(
                f"plugin {name!r} does not declare {', '.join(unknown)}, so it cannot be "
                f"withheld; declared: "
                f"{', '.join(c.declared for c in record.manifest.capabilities) or 'none'}",
                path=str(self.lockfile_path),
                plugin=name,
                field="capabilities",
            )
        granted = [
            c.declared for c in record.manifest.capabilities if c in approved and c not in withheld
        ]
        signature = None
        if record.signature.status is SignatureStatus.VALID and record.signature.key_id:
            key = self._trusted_keys()[record.signature.key_id]
            signature = LockSignature(key_id=key.key_id_hex, public_key=key.base64)
        return LockEntry(
            name=name,
            version=record.manifest.version,
            source=record.source.kind,
            distribution=record.source.distribution,
            digest=record.content_hash,
            capabilities=tuple(granted),
            risk_level=approval.risk_level,
            verdict=approval.verdict,
            audit_provider=record.audit.provider if record.audit else "static-only",
            approved_at=dt.datetime.fromtimestamp(int(approval.approved_at), dt.UTC),
            signature=signature,
        )

    def broken_plugins(self) -> list[BrokenPlugin]:
        """Directories the last :meth:`discover` skipped, with the reason."""
        return list(self._broken)

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

    def names(self) -> list[str]:
        """Names of discovered plugins, requirements first."""
        return list(self._records)

    def get_plugin(self, name: str) -> PluginInfo | None:
        """A view of one plugin, or None when no plugin has that name."""
        record = self._records.get(name)
        return None if record is None else self._info(record)

    def require_plugin(self, name: str) -> PluginInfo:
        """Like :meth:`get_plugin`, but raises :class:`PluginNotFoundError` with a suggestion."""
        return self._info(self._record(name))

    def list_plugins(self) -> list[PluginInfo]:
        """Every discovered plugin, requirements first."""
        return [self._info(r) for r in self._records.values()]

    def get_enabled_plugins(self) -> list[PluginInfo]:
        """Enabled plugins only, requirements first."""
        return [self._info(r) for r in self._records.values() if r.state is PluginState.ENABLED]

    def _info(self, record: PluginRecord) -> PluginInfo:
        approval = self.store.get_approval(record.name)
        quarantine = self.store.get_quarantine(record.name)
        inert = self.inert_reason(record.name)
        state = record.state
        if quarantine is not None:
            state = PluginState.QUARANTINED
        elif inert and state is not PluginState.ENABLED:
            state = PluginState.INERT
        enabled = record.state is PluginState.ENABLED
        return PluginInfo(
            name=record.name,
            manifest=record.manifest,
            state=state,
            content_hash=record.content_hash,
            approved=approval is not None and approval.content_hash == record.content_hash,
            approval=approval,
            audit=record.audit,
            config=dict(record.config),
            capabilities=record.resolved if enabled else record.manifest.capabilities,
            quarantine=quarantine,
            source=record.source,
            tier=record.tier,
            signature=record.signature,
            inert_reason=inert,
        )

    # -- source, scan, audit -------------------------------------------------------------

    def current_hash(self, name: str) -> str:
        """Hash the plugin's tree now; if it changed, forget the stale audit."""
        record = self._record(name)
        self._rehash(record)
        return record.content_hash

    def _rehash(self, record: PluginRecord) -> None:
        """Describe the live folder as it is now: its hash, and the manifest of that content.

        The manifest is read between two hashes of the tree that must agree:
        a folder changing under the read is not taken for a consistent pair.
        (Enable, audit and scan work on one snapshot instead, see _take.)
        """
        directory = record.manifest.plugin_dir
        content_hash = tree_hash(directory)
        if content_hash == record.content_hash:
            return
        for _ in range(3):
            manifest = load_manifest(directory, allow_broad=self.policy.allow_broad_paths)
            again = tree_hash(directory)
            if again == content_hash:
                record.manifest = manifest
                record.content_hash = content_hash
                self._refresh_audit(record)
                return
            content_hash = again
        raise PluginTreeError(
            f"plugin {record.name!r} at {directory} keeps changing while it is read; wait until "
            "whatever writes it has finished, then try again"
        )

    def _refresh_audit(self, record: PluginRecord) -> None:
        """Attach the cached audit of the record's current hash (or none).

        A broken ``CAPLET_LLM_*`` setting attaches none here (discovery must
        not fail on it); the next audit raises it with the fix.
        """
        try:
            record.audit = self.get_cached_audit(record.name, record.content_hash)
        except AuditConfigError:
            record.audit = None
        if record.audit is None and record.state is PluginState.AUDITED:
            record.state = PluginState.DISCOVERED

    def load_source(self, name: str) -> str | None:
        """The entry module's source text, or None when it cannot be read."""
        manifest = self._record(name).manifest
        try:
            return (manifest.plugin_dir / manifest.entry).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def run_static_scan(self, name: str) -> list[Finding]:
        """Scan the plugin's files and lint its capabilities; nothing is executed."""
        return list(self.scan_report(name).findings)

    def scan_report(self, name: str) -> ScanReport:
        """The plugin's scan report (plugin mode, declared capabilities), lint included."""
        record = self._record(name)
        report = self._scan(record)[0]
        findings = sorted((*report.findings, *self._lint(record)), key=Finding.sort_key)
        return dataclasses.replace(report, findings=tuple(findings))

    def _lint(self, record: PluginRecord) -> list[Finding]:
        return lint_composition(record.manifest.capabilities)

    def _scan(
        self, record: PluginRecord, capabilities: Sequence[Capability] | None = None
    ) -> tuple[ScanReport, str]:
        """Scan a private snapshot so the findings belong to exactly one content hash.

        *capabilities* (default: the declared ones) are the grants the
        scanner's severities take into account.
        """
        snapshot, manifest = self._take(record)
        try:
            report = scan_tree(
                snapshot.path, manifest.capabilities if capabilities is None else capabilities
            )
        finally:
            remove_snapshot(snapshot)
        return report, snapshot.content_hash

    def _settings_from_env(self) -> ProviderSettings | None:
        if not self._env_read:
            self._env_settings = settings_from_env()
            self._env_read = True
        return self._env_settings

    @property
    def auditor(self) -> AuditorProvider | None:
        """The LLM auditor in use, or ``None`` for static-only audits.

        Built from ``CAPLET_LLM_*`` on first use when the manager was made
        with ``auditor="env"``; a bad setting raises :class:`AuditConfigError`.
        """
        if self._auditor is None and self._auditor_choice == "env":
            settings = self._settings_from_env()
            if settings is not None:
                self._auditor = provider_from_settings(settings)
        return self._auditor

    def auditor_id(self) -> str:
        """``"<provider>:<model>"`` of the auditor, ``""`` when static-only: the cache key.

        Needs no provider to be built (discovery uses it to find cached audits).
        """
        if self._auditor_choice == "env":
            settings = self._settings_from_env()
            return "" if settings is None else f"{settings.kind.value}:{settings.model}"
        auditor = self._auditor_choice
        return "" if auditor is None else f"{auditor.name}:{auditor.model}"

    def audit(self, name: str, *, fresh: bool = False, static_only: bool = False) -> AuditResult:
        """Audit the current content, deep when an auditor is configured; cached.

        The cached audit of the current content by the current auditor is
        returned unless ``fresh``. Otherwise the scan (and the model's
        reading) runs on a private snapshot and the audit is keyed by the
        snapshot's hash, so a file changed mid-audit cannot end up approved.
        A model that could not be consulted fails closed (HIGH, reject,
        labelled static-only with the reason); that result is used now but
        not cached, so the next audit asks the model again.

        ``static_only`` is the operator's choice of a static-only audit
        although a model is configured (issue 14): it is labelled so, used
        for this process (an ``approve`` right after it approves on it) and
        never cached, so it does not stand in for the model's next time.
        """
        record = self._record(name)
        self._rehash(record)
        if not fresh and not static_only:
            cached = self.get_cached_audit(name, record.content_hash)
            if cached is not None:
                record.audit = cached
                if record.state is PluginState.DISCOVERED:
                    record.state = PluginState.AUDITED
                return cached
        chosen = self._configured_label() if static_only else ""
        auditor = None if static_only else self.auditor
        snapshot, manifest = self._take(record)
        try:
            result = self._audit_snapshot(record.name, snapshot, manifest, auditor)
        finally:
            remove_snapshot(snapshot)
        return self._keep_audit(record, result, chosen)

    def _audit_snapshot(
        self,
        name: str,
        snapshot: Snapshot,
        manifest: Manifest,
        auditor: AuditorProvider | None,
    ) -> AuditResult:
        """Audit exactly the snapshot: its files, with its own manifest's capabilities."""
        report = scan_tree(snapshot.path, manifest.capabilities)
        declared = [c.declared for c in manifest.capabilities]
        result = static_audit(
            name,
            snapshot.content_hash,
            report,
            lint_composition(manifest.capabilities),
            now=time.time(),
            declared_capabilities=declared,
        )
        if auditor is not None:
            result = deep_audit(
                auditor, snapshot.path, snapshot.content_hash, manifest=manifest, static=result
            )
        return result

    def _keep_audit(
        self, record: PluginRecord, result: AuditResult, chosen: str, *, rehash: bool = True
    ) -> AuditResult:
        """Cache a model's audit, or use a chosen or fallback static-only one for now.

        ``rehash=False`` (an enable): the record already describes exactly the
        audited snapshot, and must not be moved to whatever the live folder
        holds by now.
        """
        if chosen:
            result = static_only_by_choice(result, chosen)
            self._attach(
                record, result, f"static-only by the operator's choice ({chosen})", rehash=rehash
            )
        elif result.fallback_reason:
            self._attach(
                record, result, f"static-only fallback: {result.fallback_reason}", rehash=rehash
            )
        else:
            self.store.put_audit(result)
            self._cache_audit(record, result, rehash=rehash)
        return result

    def _configured_label(self) -> str:
        """``"<provider>:<model>"`` of the configured auditor, or a note when it is broken."""
        try:
            return self.auditor_id()
        except AuditConfigError:
            return "a broken CAPLET_LLM_* setting"

    def _attach(
        self, record: PluginRecord, audit: AuditResult, why: str, *, rehash: bool = True
    ) -> None:
        """Use ``audit`` for this process without caching it (a failed model, a chosen
        static-only audit)."""
        if rehash:
            self._rehash(record)
        if audit.content_hash != record.content_hash:
            return
        record.audit = audit
        if record.state is PluginState.DISCOVERED:
            record.state = PluginState.AUDITED
        self._log(
            record.name,
            "audit",
            audit.content_hash,
            True,
            f"risk {audit.risk_level.value} {why}",
        )

    def set_audit_result(self, name: str, audit: AuditResult) -> bool:
        """Cache an audit; it only counts if it is of the plugin's current content."""
        record = self._record(name)
        if audit.plugin != name:
            return False
        self.store.put_audit(audit)
        return self._cache_audit(record, audit, rehash=True)

    def _cache_audit(self, record: PluginRecord, audit: AuditResult, *, rehash: bool) -> bool:
        """Attach a stored audit to the record when it is of the record's content."""
        name = record.name
        if rehash:
            self._rehash(record)
        if audit.content_hash != record.content_hash:
            return False
        record.audit = audit
        if record.state is PluginState.DISCOVERED:
            record.state = PluginState.AUDITED
        canaries = f", canaries {audit.canary_status.value}" if audit.canary_status else ""
        self._log(
            name,
            "audit",
            audit.content_hash,
            True,
            f"risk {audit.risk_level.value} ({audit.model_id or audit.provider}{canaries})",
        )
        return True

    def get_cached_audit(self, name: str, content_hash: str | None = None) -> AuditResult | None:
        """The stored audit of ``content_hash`` (default: the current one) by this auditor."""
        if content_hash is None:
            content_hash = self.current_hash(name)
        audit = self.store.get_audit(content_hash, self.auditor_id())
        if audit is None or audit.plugin != name:
            return None
        return audit

    # -- approval --------------------------------------------------------------------------

    def approve(self, name: str, *, content_hash: str | None = None) -> Outcome:
        """Persistently approve the plugin's current content and capabilities.

        Refused without an audit of the current hash, when the audit's risk
        is above the policy's ``max_risk_level``, or when danger findings no
        declared capability covers would stop it loading anyway.
        ``content_hash``: the content whose audit a person was shown; other
        content (the folder changed meanwhile) is refused, not approved.
        """
        record = self._record(name)
        self._rehash(record)
        if content_hash is not None and record.content_hash != content_hash:
            # Red-team round 4: the content swapped in while the question was open
            # (its audit cached from earlier) was approved, unseen.
            return self._refuse(name, "approve", changed_while_shown(name, content_hash))
        audit = record.audit
        if audit is None:
            return self._refuse(
                name,
                "approve",
                f"plugin {name!r} has no audit of its current content ({record.content_hash}); "
                f"run `caplet audit {name}` first",
            )
        refusal = self._trust_refusal(name, audit)
        if refusal:
            return self._refuse(name, "approve", refusal)
        self.store.put_approval(
            ApprovalRecord(
                name=name,
                content_hash=record.content_hash,
                capabilities=tuple(c.declared for c in record.manifest.capabilities),
                approved_at=time.time(),
                risk_level=audit.risk_level,
                verdict=audit.verdict,
                version=record.manifest.version,
                requires=tuple(r.name for r in record.manifest.requires),
                defaults=template_defaults(record.manifest),
                hooks=tuple(h.event for h in record.manifest.hooks),
            )
        )
        self._log(name, "approve", record.content_hash, True, f"risk {audit.risk_level.value}")
        return Outcome(True, f"plugin {name!r} approved at {record.content_hash}")

    def unapprove(self, name: str) -> Outcome:
        """Remove the approval; a running plugin keeps running for this session."""
        self._record(name)
        if not self.store.delete_approval(name):
            return Outcome(False, f"plugin {name!r} is not approved")
        self._log(name, "unapprove", name, True)
        return Outcome(True, f"plugin {name!r} is no longer approved")

    def is_approved(self, name: str) -> bool:
        """True when an approval exists for exactly the plugin's current content."""
        record = self._record(name)
        approval = self.store.get_approval(name)
        if approval is None:
            return False
        self._rehash(record)
        return approval.content_hash == record.content_hash

    def get_approval_record(self, name: str) -> ApprovalRecord | None:
        """The stored approval, even if stale (compare its hash to check)."""
        self._record(name)
        return self.store.get_approval(name)

    def _trust_refusal(self, name: str, audit: AuditResult) -> str:
        """Why ``audit`` does not allow approving or enabling (``""`` when it does).

        The uncovered danger findings are named first (they are the cause);
        a risk above the policy is named too, with both levels, so the
        refusal says everything the report would.
        """
        dangers = uncovered_dangers(audit)
        risk = self._risk_refusal(name, audit.risk_level)
        if risk and audit.fallback_reason:
            risk += (
                f"; the LLM auditor failed ({audit.fallback_reason}), so the audit failed "
                f"closed: re-run `caplet audit {name} --fresh` when the model answers, or "
                f"approve it on a static-only audit you choose (`caplet approve {name} "
                "--static-only`)"
            )
        if dangers and risk:
            return f"{danger_message(name, dangers)}; and {risk}"
        if dangers:
            return danger_message(name, dangers)
        return risk

    def _risk_refusal(self, name: str, risk: RiskLevel) -> str:
        limit = self.policy.max_risk_level
        if risk.order > limit.order:
            return (
                f"plugin {name!r} was audited {risk.value} risk, above the policy's "
                f"max_risk_level {limit.value}; review the findings (`caplet audit {name}`) and "
                "fix the plugin, or raise max_risk_level in the policy"
            )
        return ""

    # -- configuration ----------------------------------------------------------------------

    def apply_inline_config(self, name: str, entries: Iterable[str]) -> InlineConfigResult:
        """Apply ``key=value`` entries; unknown keys are reported, never applied.

        Invalid values raise :class:`ConfigError` naming plugin and field;
        nothing is applied unless every known entry is valid.
        """
        record = self._record(name)
        pairs = parse_inline(entries)
        unknown = tuple(unknown_keys(record.manifest.config, [k for k, _ in pairs]))
        staged: dict[str, ConfigValue] = {}
        for key, raw in pairs:
            config_field = record.manifest.config_field(key)
            if config_field is None:
                continue
            staged[key] = validate_value(name, config_field, coerce_inline(name, config_field, raw))
        record.config.update(staged)
        record.explicit.update(staged)
        if staged:
            self._config_changed(record)
        if staged and record.state in (PluginState.DISCOVERED, PluginState.AUDITED):
            record.state = PluginState.CONFIGURED
        return InlineConfigResult(applied=tuple(staged), unknown=unknown)

    def prompt_config(self, prompter: Prompter, name: str, skip_keys: Collection[str] = ()) -> bool:
        """Ask for the fields that must be asked (``prompt``, or no default)."""
        record = self._record(name)
        answers = prompt_answers(name, record.manifest.config, record.config, prompter, skip_keys)
        values = answers.values
        record.config.update(values)
        # A blank answer took what was offered (the default): not the operator's own value.
        record.explicit.update(answers.typed)
        if values:
            self._config_changed(record)
        if record.state in (PluginState.DISCOVERED, PluginState.AUDITED):
            record.state = PluginState.CONFIGURED
        return True

    def set_config(self, name: str, config: Mapping[str, object]) -> Outcome:
        """Replace the configuration with validated values (unknown keys refused)."""
        record = self._record(name)
        unknown = unknown_keys(record.manifest.config, config)
        if unknown:
            return Outcome(False, unknown_keys_message(name, record.manifest.config, unknown))
        validated: dict[str, ConfigValue] = {}
        for key, value in config.items():
            config_field = record.manifest.config_field(key)
            assert config_field is not None  # unknown keys were refused above
            validated[key] = validate_value(name, config_field, value)
        record.config = validated
        record.explicit = set(validated)
        self._config_changed(record)
        if record.state in (PluginState.DISCOVERED, PluginState.AUDITED):
            record.state = PluginState.CONFIGURED
        return Outcome(True)

    def _complete_config(self, record: PluginRecord) -> dict[str, ConfigValue]:
        """Current values plus schema defaults for unset keys; every field must have one."""
        config = dict(record.config)
        missing: list[str] = []
        for config_field in record.manifest.config:
            if config_field.name in config:
                continue
            if config_field.default is not None:
                config[config_field.name] = config_field.default
            else:
                missing.append(config_field.name)
        if missing:
            example = " ".join(f"{m}=..." for m in missing)
            raise ConfigError(
                f"plugin {record.name!r}: config field(s) {', '.join(missing)} have no value "
                f"and no default; pass them inline ({example}) or answer the prompt"
            )
        return config

    # -- enable / disable -----------------------------------------------------------------------

    def enable(self, name: str, *, consent: bool | Consent = False) -> Outcome:
        """Enable for this process: requirements, trust, danger gate, config, capabilities,
        consent.

        An approved plugin (approval of its current hash, stored risk within
        today's policy; in locked mode its lock entry) takes the fast path;
        any other plugin needs an audit of its current content, which is run
        here when none is cached, and then a person's **consent**
        (:mod:`caplet._host._consent`, issue 14): ``consent`` is a callback
        shown a :class:`ConsentRequest` that returns ``True`` to consent, or
        ``True`` when the caller has shown the audit and capabilities to a
        person itself; without it the enable is refused with the fix. A
        changed plugin whose approval covers everything it now asks for is
        enabled on that approval's consent. Enabling an already enabled
        plugin reconfigures it in place (without asking again while its
        content and grants stay the same).
        """
        if not (isinstance(consent, bool) or callable(consent)):
            raise TypeError(
                f"enable({name!r}, consent=...) takes a callback or True/False, got "
                f"{type(consent).__name__}"
            )
        record = self._record(name)
        quarantine = self.store.get_quarantine(name)
        if quarantine is not None:
            return self._refuse(
                name,
                "enable",
                f"plugin {name!r} is quarantined ({quarantine.reason}); "
                f"release it with `caplet release {name}` after fixing the cause",
            )
        refusal = self._requirement_refusal(record)
        if refusal:
            return self._refuse(name, "enable", refusal)
        try:
            snapshot, manifest = self._take(record)
        except CapletError as exc:
            return self._refuse(name, "enable", str(exc))
        try:
            outcome = self._enable_snapshot(record, snapshot, manifest, consent)
        except BaseException:
            remove_snapshot(snapshot)
            raise
        if not outcome:
            remove_snapshot(snapshot)
            return outcome
        retired, record.snapshot = record.snapshot, snapshot
        if retired is not None:
            remove_snapshot(retired)
        return outcome

    def _enable_snapshot(
        self, record: PluginRecord, snapshot: Snapshot, manifest: Manifest, consent: bool | Consent
    ) -> Outcome:
        """:meth:`enable` of exactly ``snapshot`` (its manifest, its hash, its audit)."""
        name = record.name
        try:
            self._adopt(record, snapshot, manifest)
            # The content may have changed since discovery: its signature too.
            self._check_signature(record, self._trusted_keys())
        except CapletError as exc:
            return self._refuse(name, "enable", str(exc))
        inert = self.inert_reason(name)
        if inert:
            return self._refuse(name, "enable", inert)
        declared = record.manifest.capabilities
        granted_declared: tuple[Capability, ...] = declared
        withheld: tuple[Capability, ...] = ()
        approval = self.store.get_approval(name)
        if self.locked:
            # The lock entry is the approval in locked mode (seed 001): it was
            # reviewed and committed; a state directory in CI starts empty.
            verdict = self.lock_verdict(name)
            assert verdict is not None  # inert_reason checked the lock is readable
            assert verdict.entry is not None
            approved = True
            approved_risk = verdict.entry.risk_level
            granted_declared, withheld = verdict.granted, verdict.withheld
        else:
            approved = approval is not None and approval.content_hash == record.content_hash
            approved_risk = approval.risk_level if approval is not None else RiskLevel.LOW
        if approved:
            refusal = self._risk_refusal(name, approved_risk)
            if refusal:
                return self._refuse(
                    name, "enable", f"approval no longer satisfies policy: {refusal}"
                )
        untrusted = record.tier is TrustTier.UNTRUSTED
        # No approved fast path for an untrusted plugin: it is audited afresh.
        if untrusted or record.audit is None:
            try:
                audit = self._keep_audit(
                    record,
                    self._audit_snapshot(name, snapshot, manifest, self.auditor),
                    "",
                    rehash=False,
                )
            except AuditConfigError as exc:
                return self._refuse(name, "enable", str(exc))
        else:
            audit = record.audit
        if withheld:
            # Findings the withheld capabilities covered are uncovered again.
            report = scan_tree(snapshot.path, granted_declared)
            dangers = [
                f for f in report.findings if f.severity is Severity.DANGER and not f.covered
            ]
            if dangers:
                return self._refuse(
                    name, "enable", withheld_refusal(name, dangers, withheld, self.lockfile_path)
                )
        refusal = self._trust_refusal(name, audit)
        if refusal and self.red_team:
            # Measured, not enforced: the red team wants the kernel layers alone.
            self._log(name, "gate", record.content_hash, True, f"not enforced: {refusal}")
        elif refusal:
            return self._refuse(name, "enable", refusal)
        allow_broad = self.policy.allow_broad_paths and record.tier is TrustTier.TRUSTED
        try:
            if self.policy.allow_broad_paths and not allow_broad:
                self._check_not_broad(record, granted_declared)
            config = self._complete_config(record)
            resolved = tuple(
                substitute(c, config, allow_broad=allow_broad) for c in granted_declared
            )
        except (ConfigError, CapabilityError) as exc:
            return self._refuse(name, "enable", str(exc))
        try:
            # Resolved once, without links, and pinned: the jail mounts these inodes.
            plan = plan_grants(
                name,
                resolved,
                protected=self._protected_paths,
                identity=self._worker_identity(),
                enabled={
                    # Other caplet processes on this state directory too (round 4).
                    **(self._run_directory().peer_plans() if _shares(resolved) else {}),
                    **{
                        other.name: other.grant_plan
                        for other in self._records.values()
                        if other.state is PluginState.ENABLED
                    },
                },
            )
        except (CapabilityError, PolicyError) as exc:
            return self._refuse(name, "enable", str(exc))
        try:
            # Checked and compiled once per enable, never per call.
            validators = compile_validators(record.manifest)
        except ManifestError as exc:
            return self._refuse(name, "enable", str(exc))
        if approved and not self.locked:
            assert approval is not None
            granted = set(approval.capabilities)
            extra = [c.declared for c in declared if c.declared not in granted]
            if extra:
                return self._refuse(
                    name,
                    "enable",
                    f"plugin {name!r} declares capabilities its approval does not grant: "
                    f"{', '.join(extra)}; re-audit and re-approve it",
                )
        given = carried = ""
        if not approved:
            need = self._consent_need(record, approval, audit)
            if need is None:
                assert approval is not None
                carried = f"approval of {approval.content_hash} carried over: nothing widened"
            elif not self._same_grants(record, resolved):
                request = self._request(record, need, audit, approval, resolved)
                agreed = consent(request) is True if callable(consent) else consent is True
                if not agreed:
                    return self._refuse(
                        name, "enable", consent_refusal(request, asked=callable(consent))
                    )
                given = "by a consent callback" if callable(consent) else "by consent=True"
                self._log(name, "consent", record.content_hash, True, f"{given}: {request.why}")
        for capability in withheld:
            self._log(
                name,
                "grant",
                capability.declared,
                False,
                withheld_message(name, (capability,), self.lockfile_path),
            )
        was_enabled = record.state is PluginState.ENABLED
        record.config = config
        record.resolved = resolved
        record.withheld = withheld
        record.enabled_hash = record.content_hash
        record.validators = validators
        if _published(plan) or _published(record.grant_plan):
            try:
                # Checked again against the other caplet processes under their lock
                # (one may have enabled a writer since the plan), then published.
                self._publish_grants(
                    {name: plan}, check=functools.partial(check_against, name, plan)
                )
            except (StoreError, CapabilityError) as exc:
                return self._refuse(name, "enable", str(exc))
        record.grant_plan = plan
        record.state = PluginState.ENABLED
        for note in plan.notes:
            self._log(name, "grant", note.partition(":")[0], True, note)
        self._mark_dirty()
        if self.locked:
            path = f"locked: {self.lockfile_path}"
        elif approved and not untrusted:
            path = "approved fast path"
        elif given:
            path = f"audited {audit.provider}; not approved, consented for this process"
        elif carried:
            path = f"audited {audit.provider}; {carried}"
        else:
            path = f"audited {audit.provider}"
        path += f", tier {record.tier.value}"
        if self.red_team:
            path = f"{RED_TEAM_LABEL} {path}"
        self._log(name, "enable", record.content_hash, True, path)
        return Outcome(True, "reconfigured" if was_enabled else f"enabled ({path})")

    # -- consent (issue 14; caplet._host._consent) ------------------------------------------

    def _consent_need(
        self, record: PluginRecord, approval: ApprovalRecord | None, audit: AuditResult
    ) -> tuple[ConsentReason, Widening | None] | None:
        """Why enabling *record*'s current, unapproved content needs consent (None: it
        does not, its earlier approval covers everything it asks for)."""
        return consent_need(
            approval, record.manifest, audit, config=record.config, explicit=record.explicit
        )

    def _same_grants(self, record: PluginRecord, resolved: tuple[Capability, ...]) -> bool:
        """Enabled now at this content with these grants: a reconfiguration needs no new consent."""
        return (
            record.state is PluginState.ENABLED
            and record.enabled_hash == record.content_hash
            and record.resolved == resolved
        )

    def _request(
        self,
        record: PluginRecord,
        need: tuple[ConsentReason, Widening | None],
        audit: AuditResult,
        approval: ApprovalRecord | None,
        granted: tuple[Capability, ...] | None,
    ) -> ConsentRequest:
        reason, change = need
        manifest = record.manifest
        return ConsentRequest(
            plugin=record.name,
            version=manifest.version,
            description=manifest.description,
            source=record.source,
            content_hash=record.content_hash,
            tier=record.tier,
            reason=reason,
            why=why_consent(record.name, reason, record.content_hash, approval, change),
            audit=audit,
            declared=manifest.capabilities,
            granted=granted,
            composition=tuple(self._lint(record)),
            requires=tuple(r.name for r in manifest.requires),
            approval=approval,
            widening=change,
        )

    def consent_request(self, name: str) -> ConsentRequest | None:
        """What enabling *name* now would ask a person, or None when it needs no consent.

        None too when the enable would be refused anyway (quarantine, missing
        requirements, an inert plugin, the danger gate or the risk policy):
        there is nothing to consent to. Runs the audit when none is cached,
        as enable would; changes nothing else. The CLI and the shell use it
        to show the audit and ask before any configuration is entered.
        """
        record = self._record(name)
        self._rehash(record)
        if self.locked or self.inert_reason(name) or self.store.get_quarantine(name):
            return None
        if self._requirement_refusal(record):
            return None
        approval = self.store.get_approval(name)
        if approval is not None and approval.content_hash == record.content_hash:
            return None
        untrusted = record.tier is TrustTier.UNTRUSTED
        audit = self.audit(name) if untrusted or record.audit is None else record.audit
        if self._trust_refusal(name, audit) and not self.red_team:
            return None  # refused anyway (the red team's enable measures it, not refuses)
        need = self._consent_need(record, approval, audit)
        if need is None:
            return None
        return self._request(record, need, audit, approval, None)

    def _check_not_broad(self, record: PluginRecord, capabilities: Sequence[Capability]) -> None:
        """Broad paths (``/``, home roots) are granted only to trusted plugins."""
        config_names = [f.name for f in record.manifest.config]
        for capability in capabilities:
            if capability.templated:
                continue  # substitute() checks the configured value
            try:
                parse_capability(capability.declared, config_names=config_names)
            except CapabilityError as exc:
                raise CapabilityError(
                    f"plugin {record.name!r} is {record.tier.value}, and the policy grants broad "
                    f"paths (allow_broad_paths) only to trusted plugins: {exc}; sign the plugin "
                    "with a key you trust (caplet sign, caplet trust add) or narrow the path"
                ) from exc

    def _requirement_refusal(self, record: PluginRecord) -> str:
        for requirement in record.manifest.requires:
            other = self._records.get(requirement.name)
            if other is None or other.state is not PluginState.ENABLED:
                return (
                    f"plugin {record.name!r} requires {requirement.name!r}, which is not enabled; "
                    f"enable {requirement.name!r} first"
                )
            try:
                specifier = SpecifierSet(requirement.specifier)
            except InvalidSpecifier:  # the manifest loader validated it already
                specifier = SpecifierSet()
            if Version(other.manifest.version) not in specifier:
                return (
                    f"plugin {record.name!r} requires {requirement}, but {requirement.name!r} "
                    f"is version {other.manifest.version}; install a matching version"
                )
        return ""

    def disable(self, name: str) -> Outcome:
        """Disable for this process, and every enabled plugin that requires it."""
        record = self._record(name)
        if record.state is not PluginState.ENABLED:
            return Outcome(False, f"plugin {name!r} is not enabled (state: {record.state.value})")
        dependants = self._enabled_dependants(name)
        published = any(_published(self._records[n].grant_plan) for n in [*dependants, name])
        for dependant in [*dependants, name]:
            target = self._records[dependant]
            target.state = PluginState.DISABLED
            target.enabled_hash = None
            target.grant_plan = GrantPlan()
            if target.snapshot is not None:
                remove_snapshot(target.snapshot)
                target.snapshot = None
            target.withheld = ()
            self._log(dependant, "disable", dependant, True, "" if dependant == name else name)
        if published:
            with contextlib.suppress(StoreError):  # a stale list only refuses more elsewhere
                self._publish_grants()
        self._mark_dirty()
        return Outcome(True, f"plugin {name!r} disabled", affected=tuple(dependants))

    def _enabled_dependants(self, name: str) -> list[str]:
        """Enabled plugins that (transitively) require ``name``, dependants last-first."""
        found: list[str] = []
        frontier = [name]
        while frontier:
            current = frontier.pop()
            for other in self._records.values():
                if other.state is not PluginState.ENABLED or other.name in found:
                    continue
                if any(r.name == current for r in other.manifest.requires):
                    found.append(other.name)
                    frontier.append(other.name)
        order = list(self._records)
        return sorted(found, key=order.index, reverse=True)

    def hook_subscribers(self, event: str) -> list[tuple[str, Hook, tuple[Capability, ...]]]:
        """``(plugin, hook, granted capabilities)`` of each enabled plugin subscribed to *event*.

        Read from the records directly (no store queries), because an
        application may emit on a hot path.
        """
        found: list[tuple[str, Hook, tuple[Capability, ...]]] = []
        for record in self._records.values():
            if record.state is not PluginState.ENABLED:
                continue
            hook = record.manifest.hook(event)
            if hook is not None:
                found.append((record.name, hook, record.resolved))
        return found

    def requirement_graph(self) -> dict[str, tuple[str, ...]]:
        """``{plugin: names of the plugins it requires}`` for every discovered plugin."""
        return {
            name: tuple(r.name for r in record.manifest.requires)
            for name, record in self._records.items()
        }

    def grant_plan(self, name: str) -> GrantPlan:
        """The pinned fs grants of the enabled plugin (empty when it is not enabled)."""
        return self._record(name).grant_plan

    def _protected_paths(self) -> ProtectedPaths:
        """caplet's own files, which no grant may expose or make writable."""
        return ProtectedPaths(
            state_dir=self.state_dir,
            lockfile=self.lockfile_path,
            plugins_dir=self.plugins_dir,
            runtime=_runtime_paths(),
            other_states=_other_state_dirs(self.state_dir),
            store_dir=store_directory(self.store),
            policy_file=self.policy_file,
        )

    def enabled_hash(self, name: str) -> str | None:
        """The content hash verified when ``name`` was enabled (None if not enabled)."""
        return self._record(name).enabled_hash

    def withheld_reason(self, name: str, wanted: Capability | None, kind: CapabilityKind) -> str:
        """Why the enabled plugin *name* lacks *wanted* (or any capability of *kind*) when
        the lock withholds a declared one ("" when nothing withheld explains it).

        A ``ctx`` refusal quotes it instead of "declare it": it is declared.
        """
        related = tuple(
            c
            for c in self._record(name).withheld
            if c.kind is kind and (wanted is None or c == wanted)
        )
        return withheld_message(name, related, self.lockfile_path) if related else ""

    def validators(self, name: str) -> Mapping[str, FunctionValidator]:
        """The compiled function schemas of the enabled content (empty when none are declared)."""
        return self._record(name).validators

    # -- quarantine ----------------------------------------------------------------------------

    def quarantine(self, name: str, reason: str) -> Outcome:
        """Take a plugin out of service until :meth:`release` (persisted).

        An enabled plugin is disabled, with its enabled dependants; the
        outcome's ``affected`` names those dependants.
        """
        record = self._record(name)
        self.store.put_quarantine(QuarantineRecord(name=name, reason=reason, since=time.time()))
        affected: tuple[str, ...] = ()
        if record.state is PluginState.ENABLED:
            affected = self.disable(name).affected
        self._log(name, "quarantine", name, False, reason)
        return Outcome(True, f"plugin {name!r} quarantined: {reason}", affected=affected)

    def follow_quarantine(self, name: str) -> Outcome:
        """Disable *name* here if the store says it is quarantined but it is still enabled.

        Another process or node recorded the quarantine (issue 18): this one
        takes the plugin (and its enabled dependants) out of service as the
        quarantining one did, so a later release leaves it disabled on every
        node alike. Falsy when there was nothing to do.
        """
        record = self._record(name)
        quarantine = self.store.get_quarantine(name)
        if quarantine is None or record.state is not PluginState.ENABLED:
            return Outcome(False, f"plugin {name!r} has no quarantine to follow here")
        outcome = self.disable(name)
        logger.warning(
            "plugin %s was quarantined elsewhere (%s); disabled here", name, quarantine.reason
        )
        return Outcome(True, f"plugin {name!r} quarantined elsewhere", affected=outcome.affected)

    def release(self, name: str) -> bool:
        """Lift a quarantine; False when the plugin was not quarantined."""
        self._record(name)
        released = self.store.delete_quarantine(name)
        if released:
            self._log(name, "release", name, True)
        return released

    # -- agent integration -----------------------------------------------------------------------

    def get_system_message_additions(self) -> list[str]:
        """One text block per enabled plugin telling an agent how to use it."""
        return [
            system_message(r.manifest)
            for r in self._records.values()
            if r.state is PluginState.ENABLED
        ]

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
        return self._run

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
        self._run_directory().publish({**plans, **(changed or {})}, check)

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

    def _adopt(self, record: PluginRecord, snapshot: Snapshot, manifest: Manifest) -> None:
        """Make the record describe exactly the snapshot's content."""
        if snapshot.content_hash != record.content_hash or manifest != record.manifest:
            record.manifest = manifest
            record.content_hash = snapshot.content_hash
            self._refresh_audit(record)

    def enabled_snapshot(self, name: str) -> Snapshot | None:
        """The snapshot the plugin was enabled from (None when it is not enabled)."""
        return self._record(name).snapshot

    def __enter__(self) -> PluginManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


#: Manifests kept by _take (one per plugin version in use, a few kilobytes each).
_MANIFESTS_KEPT = 256


@functools.cache
def _runtime_paths() -> tuple[str, ...]:
    """The directories a worker's Python and caplet are loaded from (computed once)."""
    return tuple(grant.path for grant in runtime_grants())


def _other_state_dirs(own: Path) -> tuple[Path, ...]:
    """The state directories this user's other hosts use by default (the platform's, the
    one ``CAPLET_STATE_DIR`` names), other than *own*: guarded against grants too."""
    return tuple(path for path in default_state_dirs() if path != own)


def _shares(capabilities: Sequence[Capability]) -> bool:
    """Whether an enable with ``capabilities`` is judged against other caplet processes
    (a writable grant or a program; nothing else of theirs can conflict)."""
    return any(c.kind in (CapabilityKind.FS_WRITE, CapabilityKind.PROC_EXEC) for c in capabilities)


def _published(plan: GrantPlan) -> bool:
    """Whether ``plan`` has anything other caplet processes are told about."""
    return bool(plan.programs) or any(grant.writable for grant in plan.grants)
