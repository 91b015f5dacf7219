"""The manager's enable and disable: the gates a plugin passes to run in this process.

``enable`` reads one snapshot and passes it through quarantine,
requirements, the lock file or approval, a fresh audit when one is needed,
the danger gate and risk policy, the configuration, the pinned fs grants
(kept off caplet's own files), the function schemas and a person's consent
(:mod:`caplet._host._consent`); ``disable`` takes a plugin and its enabled
dependants out of service. Apart from discovery, audit and approval,
whose answers it combines and which never call it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from caplet._audit._model import AuditResult
from caplet._capabilities._model import Capability, CapabilityKind, glob_reaches
from caplet._capabilities._parse import parse_capability, substitute
from caplet._errors import (
    AuditConfigError,
    CapabilityError,
    CapletError,
    ConfigError,
    ManifestError,
    PolicyError,
    PromptTooLargeError,
    StoreError,
)
from caplet._findings import RiskLevel, Severity
from caplet._host._agent_text import agent_text
from caplet._host._consent import (
    Consent,
    ConsentReason,
    ConsentRequest,
    Widening,
    consent_need,
    consent_refusal,
    why_consent,
)
from caplet._host._gates import withheld_refusal
from caplet._host._grant_check import (
    GrantPlan,
    check_against,
    plan_grants,
)
from caplet._host._import_paths import import_paths, runtime_paths
from caplet._host._locked import (
    withheld_message,
)
from caplet._host._manager_approval import ManagerApproval
from caplet._host._manager_config import ManagerConfig
from caplet._host._manager_state import RED_TEAM_LABEL
from caplet._host._peer_code import check_code_against, check_plan_against_code
from caplet._host._plugin_record import PluginRecord
from caplet._host._policy import TrustTier
from caplet._host._program_reach import default_program_reach, program_changes
from caplet._host._protected import ProtectedPaths, store_directory
from caplet._host._records import (
    Outcome,
    PluginState,
)
from caplet._host._run_dir import unchecked_warning, unseen_warning
from caplet._host._validate import compile_validators
from caplet._manifest._model import Manifest
from caplet._scan._scanner import scan_tree
from caplet._trust._paths import default_state_dirs
from caplet._trust._snapshot import Snapshot, remove_snapshot
from caplet._trust._store import ApprovalRecord

__all__ = ["ManagerEnable"]


class ManagerEnable(ManagerApproval, ManagerConfig):
    """Enabling, consenting and disabling (see the module docstring)."""

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
        quarantine = self.store.get_quarantine(name, record.location, record.content_hash)
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
        # An approval in a store only a project file names is shown, never taken (decide14).
        unvouched = approval if self._unvouched() else None
        if unvouched is not None:
            approval = None
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
        # No approved fast path for an untrusted plugin: it is audited afresh; so is a
        # plugin whose cached audit is a project's store's (its author's rows, decide14).
        if untrusted or record.audit is None or self._unvouched():
            try:
                audit = self._keep_audit(
                    record,
                    self._audit_snapshot(name, snapshot, manifest, self.auditor),
                    "",
                    rehash=False,
                )
            except (AuditConfigError, PromptTooLargeError) as exc:
                # The model cannot read this content: refused (no review is no consent),
                # an Outcome like every other refusal, never an exception out of enable.
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
        shared = next((c for c in resolved if _shares((c,))), None)
        if shared is not None and self._run_directory().unseen:
            # Fail safe (attack24): what no other process can see, they could not refuse.
            return self._refuse(
                name,
                "enable",
                f"plugin {name!r}: capability {shared.declared!r}: "
                f"{unseen_warning(self._run_directory().unseen)}",
            )
        problem = self._run_directory().meeting_problem() if shared is not None else ""
        if shared is not None and problem:
            # Fail safe (attack28): a meeting folder whose hosts cannot be read.
            return self._refuse(
                name,
                "enable",
                f"plugin {name!r}: capability {shared.declared!r}: {unchecked_warning(problem)}",
            )
        try:
            # Resolved once, without links, and pinned: the jail mounts these inodes.
            plan = plan_grants(
                name,
                resolved,
                protected=self._protected_paths,
                identity=self._worker_identity(),
                enabled={
                    # Other caplet processes of this user too (round 4; attack22).
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
            # What this process imports, for its peers (sys.path may have changed), and
            # a writer another process enabled over it (round 19).
            code = self._code_folders()
            run = self._run_directory()
            run.publish_code(code, functools.partial(check_code_against, name, code))
        except (CapabilityError, StoreError) as exc:
            return self._refuse(name, "enable", str(exc))
        if (
            approved
            and not self.locked
            and approval is not None
            and program_changes(approval.programs, plan.reach)
        ):
            # The approved content, but a program brings files nobody was shown (its
            # #! line changed, PATH finds it elsewhere): consent again (round 19).
            approved = False
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
            need = (
                (ConsentReason.UNVOUCHED_STORE, None)
                if unvouched is not None
                else self._consent_need(record, approval, audit, plan.reach)
            )
            if need is None:
                assert approval is not None
                carried = (
                    f"approval of {approval.content_hash} carried over: nothing widened, "
                    "the same text for the agent"
                )
            elif not self._same_grants(record, resolved, plan):
                request = self._request(
                    record, need, audit, unvouched or approval, resolved, programs=plan.reach
                )
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
        record.enabled_manifest = record.manifest  # the snapshot's (_adopt)
        record.enabled_audit = audit
        record.validators = validators
        if _published(plan) or _published(record.grant_plan):
            try:
                # Checked again against the other caplet processes under their lock
                # (one may have enabled a writer since the plan), then published.
                self._publish_grants({name: plan}, check=self._published_check(name, plan))
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
        if approval is not None and not self.locked and (approved or carried):
            self._claim_unlocated(record, approval, approved=approved)
        return Outcome(True, "reconfigured" if was_enabled else f"enabled ({path})")

    # -- consent (issue 14; caplet._host._consent) ------------------------------------------

    def _consent_need(
        self,
        record: PluginRecord,
        approval: ApprovalRecord | None,
        audit: AuditResult,
        programs: tuple[str, ...] | None = None,
    ) -> tuple[ConsentReason, Widening | None] | None:
        """Why enabling *record*'s current, unapproved content needs consent (None: it
        does not, its earlier approval covers everything it asks for, the files its
        *programs* bring included)."""
        return consent_need(
            approval,
            record.manifest,
            audit,
            config=record.config,
            explicit=record.explicit,
            location=record.location,
            programs=programs,
        )

    def _same_grants(
        self, record: PluginRecord, resolved: tuple[Capability, ...], plan: GrantPlan
    ) -> bool:
        """Enabled now at this content with these grants (its programs bringing the same
        files: round 19): a reconfiguration needs no new consent."""
        return (
            record.state is PluginState.ENABLED
            and record.enabled_hash == record.content_hash
            and record.resolved == resolved
            and record.grant_plan.reach == plan.reach
        )

    def _request(
        self,
        record: PluginRecord,
        need: tuple[ConsentReason, Widening | None],
        audit: AuditResult,
        approval: ApprovalRecord | None,
        granted: tuple[Capability, ...] | None,
        *,
        programs: tuple[str, ...],
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
            why=why_consent(
                record.name,
                reason,
                record.content_hash,
                approval,
                change,
                store=self.unvouched_store,
            ),
            audit=audit,
            declared=manifest.capabilities,
            granted=granted,
            composition=tuple(self._lint(record)),
            requires=tuple(r.name for r in manifest.requires),
            approval=approval,
            widening=change,
            agent_text=agent_text(manifest),
            programs=programs,
            globs=glob_reaches(granted if granted is not None else manifest.capabilities),
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
        if (
            self.locked
            or self.inert_reason(name)
            or self.store.get_quarantine(name, record.location, record.content_hash)
        ):
            return None
        if self._requirement_refusal(record):
            return None
        approval = self.store.get_approval(name)
        unvouched = self._unvouched()
        programs = default_program_reach(record.manifest)
        if (
            approval is not None
            and approval.content_hash == record.content_hash
            and not unvouched
            and not program_changes(approval.programs, programs)
        ):
            return None
        untrusted = record.tier is TrustTier.UNTRUSTED
        fresh = untrusted or record.audit is None or unvouched
        audit = self.audit(name) if fresh or record.audit is None else record.audit
        if self._trust_refusal(name, audit) and not self.red_team:
            return None  # refused anyway (the red team's enable measures it, not refuses)
        if unvouched and approval is not None:
            need: tuple[ConsentReason, Widening | None] | None = (
                ConsentReason.UNVOUCHED_STORE,
                None,
            )
        else:
            need = self._consent_need(record, None if unvouched else approval, audit, programs)
        if need is None:
            return None
        return self._request(record, need, audit, approval, None, programs=programs)

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
            target.enabled_manifest = None
            target.enabled_audit = None
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

    def _published_check(
        self, name: str, plan: GrantPlan
    ) -> Callable[[Mapping[str, GrantPlan]], None]:
        """The last check of ``plan`` before it is published, under the peers' lock: their
        grants and programs (round 4) and the folders they run code from, read again
        there (a process may have started since the plan: attack21)."""
        run = self._run_directory()

        def check(peers: Mapping[str, GrantPlan]) -> None:
            check_against(name, plan, peers)
            check_plan_against_code(name, plan, run.peer_code())

        return check

    def _protected_paths(self) -> ProtectedPaths:
        """caplet's own files, which no grant may expose or make writable."""
        return ProtectedPaths(
            state_dir=self.state_dir,
            lockfile=self.lockfile_path,
            plugins_dir=self.plugins_dir,
            runtime=runtime_paths(),
            # The meeting folders too: a plugin writing there hides this host (attack24).
            other_states=(
                *_other_state_dirs(self.state_dir),
                *self._run_directory().meeting_folders,
            ),
            store_dir=store_directory(self.store),
            policy_file=self.policy_file,
            installed=self._installed_folders(),
            imports=import_paths(),
            # What the other live caplet processes of this user run (round 19, attack22).
            peer_code=self._run_directory().peer_code(),
        )


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
