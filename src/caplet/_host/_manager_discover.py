"""The manager's discovery: which plugins are here, and whether each may load.

``discover`` finds the plugins (finishing interrupted updates first), checks
their signatures against the trusted keys and reads the lock file; the
lookups (``get_plugin``, ``list_plugins``…) present them, and
``inert_reason``, ``verify`` and ``lock_entry`` say what the allowlist, the
lock file and the signature policy make of each. Apart from approval and
enabling, which act on what is found here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping

from caplet._audit._model import STATIC_ONLY, AuditResult
from caplet._errors import (
    LockedModeError,
    LockfileError,
    SignatureError,
)
from caplet._host._capdiff import parse_approved
from caplet._host._discovery import discover_plugins
from caplet._host._journal import recover
from caplet._host._locked import (
    LockProblem,
    LockVerdict,
    check_entry,
    stale_entries,
)
from caplet._host._manager_audit import ManagerAudit
from caplet._host._plugin_record import PluginRecord
from caplet._host._records import (
    BrokenPlugin,
    PluginInfo,
    PluginState,
)
from caplet._host._review_pins import AT, server_of
from caplet._logs import caplet_logger
from caplet._trust._keyring import Keyring
from caplet._trust._lockfile import LockEntry, Lockfile, LockSignature, read_lockfile
from caplet._trust._signing import (
    PublicKey,
    SignatureStatus,
    check_plugin_signature,
    parse_public_key,
)

__all__ = ["ManagerDiscover"]

logger = caplet_logger()


class ManagerDiscover(ManagerAudit):
    """Discovery, signatures, the lock file and lookups (see the module docstring)."""

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
            approved_at=dt.datetime.fromtimestamp(int(approval.approved_at), dt.UTC),
            signature=signature,
            **_lock_review(approval.review, record.audit),
        )

    def broken_plugins(self) -> list[BrokenPlugin]:
        """Directories the last :meth:`discover` skipped, with the reason."""
        return list(self._broken)

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
        quarantine = self.store.get_quarantine(
            record.name, record.location, record.enabled_hash or record.content_hash
        )
        inert = self.inert_reason(record.name)
        state = record.state
        if quarantine is not None:
            state = PluginState.QUARANTINED
        elif inert and state is not PluginState.ENABLED:
            state = PluginState.INERT
        enabled = record.state is PluginState.ENABLED
        # An enabled plugin is described by the content it runs (its grants too,
        # below): the agent's text is built from this view (textpin).
        manifest = record.enabled_manifest if enabled else None
        # Its hash, approval and audit too (steer31): the folder may have changed under a
        # running plugin, and "approved", with the new content's audit, was said of a
        # plugin running content nobody approved.
        running = record.enabled_hash if enabled else None
        content_hash = running or record.content_hash
        return PluginInfo(
            name=record.name,
            manifest=manifest or record.manifest,
            state=state,
            content_hash=content_hash,
            approved=approval is not None and approval.content_hash == content_hash,
            approval=approval,
            audit=record.enabled_audit if running else record.audit,
            config=dict(record.config),
            capabilities=record.resolved if enabled else record.manifest.capabilities,
            quarantine=quarantine,
            source=record.source,
            tier=record.tier,
            signature=record.signature,
            inert_reason=inert,
            location=record.location,
        )


def _lock_review(review: str | None, audit: AuditResult | None) -> dict[str, str]:
    """The lock entry's ``audit_provider``, ``audit_model`` and ``audit_endpoint``: the
    review the approval records (steer35). An approval whose review is not known (or is
    a model's at an unknown server) gives a provider and no model, which a reader takes as
    not known: it vouches for no later version's review, as the approval does not."""
    if review == STATIC_ONLY:
        return {"audit_provider": STATIC_ONLY}
    if review is not None and (endpoint := server_of(review)):
        named = review[: -len(AT + endpoint)]
        provider, _, model = named.partition(":")
        return {"audit_provider": provider, "audit_model": model, "audit_endpoint": endpoint}
    provider = audit.provider if audit is not None else STATIC_ONLY
    if provider == STATIC_ONLY:
        # Not known, and never the static review it is not (nothing says no model read it).
        provider = review.partition(":")[0] if review else "unknown"
    return {"audit_provider": provider}
