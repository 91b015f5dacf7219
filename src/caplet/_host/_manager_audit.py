"""The manager's audits: the live folder's hash, scans, static and deep audits, their cache.

An audit belongs to exactly one content hash and one auditor: ``_rehash``
describes the live folder as it is now, ``audit`` reads a private snapshot,
and only a model's audit is cached (per hash and model); a fallback or a
chosen static-only audit is used for this process alone. Apart from
discovery, approval and enabling, which all consult an audit but never
make one differently.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
from collections.abc import Sequence

from caplet._audit._deep import deep_audit, static_only_by_choice
from caplet._audit._model import AuditResult
from caplet._audit._provider import (
    AuditorProvider,
    ProviderSettings,
    provider_endpoint,
    settings_from_env,
)
from caplet._audit._rules_digest import rules_digest
from caplet._audit._select import provider_from_settings
from caplet._audit._static import static_audit
from caplet._capabilities._lint import lint_composition
from caplet._capabilities._model import Capability
from caplet._errors import (
    AuditConfigError,
    PluginTreeError,
)
from caplet._findings import Finding
from caplet._host._discovery import hash_keeping_manifest
from caplet._host._manager_state import ManagerState
from caplet._host._plugin_record import PluginRecord
from caplet._host._records import (
    PluginState,
)
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Manifest
from caplet._scan._model import ScanReport
from caplet._scan._scanner import scan_tree
from caplet._trust._hashing import list_tree, open_entry, read_entry
from caplet._trust._snapshot import Snapshot, remove_snapshot

__all__ = ["ManagerAudit"]


class ManagerAudit(ManagerState):
    """Hashing, scanning and auditing a plugin's content (see the module docstring)."""

    # -- source, scan, audit -------------------------------------------------------------

    def current_hash(self, name: str) -> str:
        """Hash the plugin's tree now; if it changed, forget the stale audit."""
        record = self._record(name)
        self._rehash(record)
        return record.content_hash

    def _rehash(self, record: PluginRecord) -> None:
        """Describe the live folder as it is now: its hash, and the manifest of that content.

        The manifest is parsed from the bytes the hash read (attack13d; two
        agreeing hashes around a read by name still let a folder swapped back
        and forth pair another content's manifest with this hash). Enable,
        audit and scan work on one snapshot instead, see _take.
        """
        directory = record.manifest.plugin_dir
        content_hash, kept = hash_keeping_manifest(directory)
        if content_hash == record.content_hash:
            return
        record.manifest = load_manifest(
            directory, allow_broad=self.policy.allow_broad_paths, hashed=kept
        )
        record.content_hash = content_hash
        self._refresh_audit(record)

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
        """The entry module's source as the import system decodes it, or None when it
        cannot be read.

        Read like the hashed tree (:func:`list_tree`, :func:`open_entry`): no link is
        followed. Read by name, an entry replaced by a link after discovery handed the
        application any file the host can read (red-team round 5).
        """
        manifest = self._record(name).manifest
        root, entry_path = manifest.plugin_dir, manifest.entry
        try:
            entry = next((e for e in list_tree(root) if e.path == entry_path), None)
            if entry is None:
                return None
            with open_entry(root, entry) as fd:
                data = b"".join(read_entry(root, entry, fd))
            return importlib.util.decode_source(data)
        except (PluginTreeError, SyntaxError, UnicodeDecodeError, LookupError):
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

    def auditor_endpoint(self) -> str:
        """The API root the configured auditor posts to (``""``: static-only, or an
        application's provider that names none): a cached audit another server made is
        not this auditor's (steer35)."""
        if self._auditor_choice == "env":
            settings = self._settings_from_env()
            return "" if settings is None else settings.endpoint
        auditor = self._auditor_choice
        return "" if auditor is None else provider_endpoint(auditor)

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
            self._store_audit(result)
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
    ) -> bool:
        """Use ``audit`` for this process when it is of the record's content (a failed
        model, a chosen static-only audit, or one the store holds); True when it was."""
        if rehash:
            self._rehash(record)
        if audit.content_hash != record.content_hash:
            return False
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
        return True

    def set_audit_result(self, name: str, audit: AuditResult) -> bool:
        """Cache an audit; it only counts if it is of the plugin's current content."""
        record = self._record(name)
        if audit.plugin != name:
            return False
        if not audit.rules:
            # The application's own audit is made by the rules of its time, this one.
            audit = dataclasses.replace(audit, rules=rules_digest())
        self._store_audit(audit)
        return self._cache_audit(record, audit, rehash=True)

    def _cache_audit(self, record: PluginRecord, audit: AuditResult, *, rehash: bool) -> bool:
        """Attach a stored audit to the record when it is of the record's content."""
        canaries = f", canaries {audit.canary_status.value}" if audit.canary_status else ""
        why = f"({audit.model_id or audit.provider}{canaries})"
        return self._attach(record, audit, why, rehash=rehash)

    def get_cached_audit(self, name: str, content_hash: str | None = None) -> AuditResult | None:
        """The stored audit of ``content_hash`` (default: the current one) by this auditor."""
        if content_hash is None:
            content_hash = self.current_hash(name)
        auditor = self.auditor_id()
        if self._unvouched() and (content_hash, auditor) not in self._audits_here:
            return None  # a project's store's audit is its author's (decide14)
        audit = self.store.get_audit(content_hash, auditor)
        if audit is None or audit.plugin != name:
            return None
        if auditor and audit.endpoint != self.auditor_endpoint():
            # The same provider and model name served from another place (a base URL
            # changed since, or an earlier caplet's audit that recorded none): not this
            # auditor's reading, so it reads the content itself (steer35).
            return None
        if not audit.rules or audit.rules != rules_digest():
            # Made by other rules (an earlier caplet: a rule added since would have
            # refused it) or by rules nobody recorded: not today's audit, so the plugin
            # is audited again and that audit is what is shown and judged (steer22).
            return None
        return audit

    def _store_audit(self, audit: AuditResult) -> None:
        self.store.put_audit(audit)
        self._audits_here.add((audit.content_hash, audit.model_id))

    def _adopt(self, record: PluginRecord, snapshot: Snapshot, manifest: Manifest) -> None:
        """Make the record describe exactly the snapshot's content."""
        if snapshot.content_hash != record.content_hash or manifest != record.manifest:
            record.manifest = manifest
            record.content_hash = snapshot.content_hash
            self._refresh_audit(record)
