"""Updating a plugin: stage, validate, scan, audit, diff, consent, swap, health check, rollback.

Seed 004's update mechanism, on caplet's trust model:

1. **stage** the new version (a folder, a wheel, or an installed
   distribution's plugin folder) into ``<plugins>/.caplet-update-<name>/new``,
   copied through the tree walker (no symlinks, no special files) and hashed;
2. **validate** its manifest (same name), **scan** and **audit** it (static;
   the audit is cached under the new digest); a danger finding no declared
   capability covers, or a risk above the policy, refuses the update;
3. **diff** it against what was approved (the lock entry, else the approval,
   else the declared ones) and require explicit **consent** for anything
   that widens it (issue 14, :mod:`._consent`): a capability added or
   broadened, a templated capability whose default now reaches further
   (red-team finding 8, :mod:`._defaults`), a plugin added to ``requires``,
   a lower version, a higher audited risk, other text sent to the agent
   (descriptions, schemas, ``[hints]``: textpin, :mod:`._agent_text`); a
   re-spelling is not an
   addition (:mod:`._capdiff`). An
   update of a plugin that is not approved (nor, in locked mode, pinned)
   always needs consent, since its health check runs the new version;
4. **snapshot** the current version by moving it to ``.../old`` and **swap**
   the new one in (two renames on one file system);
5. rewrite the approval and the lock entry for the new digest (only where
   the old version had them: an update never creates an approval);
6. **health**: enable the new version in its sandbox and call its optional
   ``health()`` within a timeout;
7. on any failure, **roll back** to the old folder with the old approval and
   lock entry, automatically.

Every step is journaled first (:mod:`caplet._host._journal`), so a process
killed at any point (SIGKILL included) leaves a journal that the next start
rolls back, or forward once the update committed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from caplet._atomic import NotRegularFileError, fsync_directory, read_regular
from caplet._audit._model import AuditResult
from caplet._audit._static import static_audit
from caplet._capabilities._lint import lint_composition
from caplet._errors import CapletError, SignatureError, UpdateError
from caplet._findings import RiskLevel, Severity
from caplet._host._agent_text import agent_text
from caplet._host._capdiff import parse_approved
from caplet._host._consent import (
    Consent,
    ConsentRequest,
    Widening,
    describe_widening,
    unvouched_message,
    widening,
)
from caplet._host._defaults import template_defaults
from caplet._host._installed import extract_wheel_plugin, find_installed
from caplet._host._journal import (
    UpdateJournal,
    UpdateStep,
    crash_point,
    holding_update_lock,
    new_work_dir,
    remove_journal,
    remove_work_dir,
    restore,
    through,
    write_journal,
)
from caplet._host._plugin_record import plugin_location
from caplet._host._program_reach import default_program_reach, update_changes
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Manifest
from caplet._scan._scanner import scan_tree
from caplet._trust._hashing import SIGNATURE_FILE, tree_hash
from caplet._trust._lockfile import LockEntry, read_lockfile, update_lockfile
from caplet._trust._signing import SignatureStatus, check_plugin_signature, parse_public_key
from caplet._trust._snapshot import make_snapshot
from caplet._trust._source import SourceKind
from caplet._trust._store import ApprovalRecord, ApprovedDefaults

if TYPE_CHECKING:
    from caplet._config._prompt import Prompter
    from caplet._host._manager import PluginManager
    from caplet._host._policy import Policy
from caplet._host._records import Outcome

__all__ = ["UpdatableHost", "UpdateConsent", "UpdateReport", "update_plugin"]


class UpdatableHost(Protocol):
    """What an update needs of :class:`~caplet.PluginHost` (a Protocol, so this module
    does not import the host that calls it)."""

    @property
    def manager(self) -> PluginManager: ...

    @property
    def policy(self) -> Policy: ...

    def discover(self) -> int: ...

    def enable(
        self,
        name: str,
        inline: Iterable[str] = (),
        *,
        config: Mapping[str, object] | None = None,
        prompter: Prompter | None = None,
        consent: bool | Consent = False,
    ) -> Outcome: ...

    def disable(self, name: str) -> Outcome: ...

    def check_health(self, name: str, *, timeout_s: float) -> Outcome: ...


#: Asked with what the new version widens (its ``added``, ``removed``, ``kept``
#: capabilities read like a capability diff), or when the plugin is not approved.
UpdateConsent = Callable[[Widening], bool]

_WORK_PREFIX = ".caplet-update-"
_MAX_SIGNATURE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class UpdateReport:
    """How an update went; truthy when the new version is installed and healthy.

    ``rolled_back`` is True when the new version had been swapped in and was
    taken out again; ``reason`` names the step that failed and the fix.
    """

    ok: bool
    plugin: str
    reason: str
    old_version: str
    new_version: str = ""
    old_digest: str = ""
    new_digest: str = ""
    diff: Widening | None = None
    audit: AuditResult | None = None
    health: str = ""
    rolled_back: bool = False

    def __bool__(self) -> bool:
        return self.ok


class _RefusedError(Exception):
    """Internal: a step refused the update (the message is the reason)."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _stage(host: UpdatableHost, name: str, source: str | Path, parent: Path) -> Path:
    """Copy the new version into ``parent/<name>``; returns that folder."""
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(source)
    if path.is_file() and path.suffix == ".whl":
        return extract_wheel_plugin(path, name, parent)
    origin: Path | None = path if path.is_dir() else None
    if origin is None:
        installed, _ = find_installed(host.manager.dist_path)
        matches = [
            p
            for p in installed
            if p.name == name and _normalise(p.distribution) == _normalise(str(source))
        ]
        if not matches:
            raise _RefusedError(
                f"cannot update plugin {name!r} from {str(source)!r}: it is neither a plugin "
                "folder, a wheel (.whl), nor an installed distribution with a "
                f"'caplet.plugins' entry point {name!r}; check the path or distribution name"
            )
        origin = matches[0].directory
    snapshot = make_snapshot(origin, parent, read_only=False)
    target = parent / name
    snapshot.path.rename(target)
    # Opened once, without following a link (a check by name, then an open by
    # name, followed a link swapped in between: attack10's report); a
    # signature that is not a regular file is left behind, as before.
    try:
        data = read_regular(origin / SIGNATURE_FILE, _MAX_SIGNATURE_BYTES)
    except (FileNotFoundError, NotRegularFileError):
        return target
    except OSError as exc:
        raise _RefusedError(
            f"cannot update plugin {name!r}: its signature {origin / SIGNATURE_FILE} cannot be "
            f"read ({exc.strerror or exc}); check its permissions or remove it"
        ) from exc
    (target / SIGNATURE_FILE).write_bytes(data[:_MAX_SIGNATURE_BYTES])
    return target


def _consent_for(consented: bool, digest: str) -> Consent:
    """Consent for enabling the content whose hash is ``digest`` alone (a folder
    swapped after the question is other content: refused, so the update rolls back),
    and never for a program whose files changed since the question showed them and
    the approval pinned them (attack22: the update's consent, given for another
    widening, ran a #! interpreter nobody was shown)."""

    def consent(request: ConsentRequest) -> bool:
        changed = request.widening is not None and bool(request.widening.programs)
        return consented and request.content_hash == digest and not changed

    return consent


def _approved_before(host: UpdatableHost, name: str, entry: LockEntry | None) -> tuple[str, ...]:
    """What the old version was allowed: the lock entry, else the approval, else declared."""
    info = host.manager.require_plugin(name)
    if entry is not None:
        return entry.capabilities
    approval = info.approval
    if approval is not None and approval.content_hash == info.content_hash:
        return approval.capabilities
    return tuple(c.declared for c in info.manifest.capabilities)


def _location(host: UpdatableHost, name: str) -> str:
    info = host.manager.require_plugin(name)
    return plugin_location(info.source, info.path)


def _defaults_before(
    host: UpdatableHost, name: str, entry: LockEntry | None, installed: str
) -> tuple[ApprovedDefaults | None, str]:
    """The defaults the old version was allowed, or None and why they are not known.

    The installed folder is the approved content (its approval, or its lock
    entry, names its digest), so its manifest's defaults are the approved
    ones, whether or not the approval recorded them. A lock entry that pins
    other content leaves them unknown: that content is not on this machine.
    An update carries the approval to every later enable, so defaults are
    compared as they are, whatever this process configured.
    """
    if entry is not None and entry.digest != installed:
        return None, "the lock entry pins other content than the installed one"
    return template_defaults(host.manager.require_plugin(name).manifest), ""


def _check_staged(
    host: UpdatableHost, name: str, staged: Path
) -> tuple[Manifest, str, AuditResult]:
    """Validate, hash, scan and audit the staged version; refuse what enable would refuse."""
    manifest = load_manifest(staged, allow_broad=host.policy.allow_broad_paths)
    if manifest.name != name:
        raise _RefusedError(
            f"the new version is plugin {manifest.name!r}, not {name!r}; update {name!r} from "
            "a folder holding the same plugin"
        )
    digest = tree_hash(staged)
    report = scan_tree(staged, manifest.capabilities)
    audit = static_audit(
        name, digest, report, lint_composition(manifest.capabilities), now=time.time()
    )
    host.manager.store.put_audit(audit)
    dangers = [f for f in audit.findings if f.severity is Severity.DANGER and not f.covered]
    if dangers:
        shown = "; ".join(f"{f.rule_id} {f.message} ({f.file}:{f.line})" for f in dangers[:3])
        raise _RefusedError(
            f"the new version of {name!r} has {len(dangers)} danger finding(s) no declared "
            f"capability covers: {shown}; it would never load, so it is not installed"
        )
    limit = host.policy.max_risk_level
    if audit.risk_level.order > limit.order:
        raise _RefusedError(
            f"the new version of {name!r} was audited {audit.risk_level.value} risk, above the "
            f"policy's max_risk_level {limit.value}; review `caplet scan {staged}`"
        )
    return manifest, digest, audit


def _new_entry(
    old: LockEntry, manifest: Manifest, digest: str, audit: AuditResult, staged: Path
) -> LockEntry:
    """The lock entry of the new version; a pinned signer must have signed it too."""
    if old.signature is not None:
        try:
            key = parse_public_key(old.signature.public_key)
        except SignatureError as exc:
            raise _RefusedError(f"the lock entry's signer key is unusable ({exc})") from exc
        check = check_plugin_signature(staged, digest, {key.key_id_hex: key})
        if check.status is not SignatureStatus.VALID:
            raise _RefusedError(
                f"caplet.lock requires plugin {manifest.name!r} to be signed by key "
                f"{old.signature.key_id}, but the new version is not ({check.detail}); get "
                "the publisher's signed release"
            )
    return replace(
        old,
        version=manifest.version,
        digest=digest,
        capabilities=tuple(c.declared for c in manifest.capabilities),
        risk_level=audit.risk_level,
        verdict=audit.verdict,
        audit_provider=audit.provider,
        approved_at=_now_utc(),
    )


def _now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def update_plugin(
    host: UpdatableHost,
    name: str,
    source: str | Path,
    *,
    consent: bool | UpdateConsent = False,
    config: Iterable[str] = (),
    health_timeout_s: float = 10.0,
) -> UpdateReport:
    """Update plugin *name* from *source* (a folder, a ``.whl``, or a distribution name).

    *consent* answers for a new version that widens what was approved, or
    for any update of a plugin that is not approved (a callable is asked
    with the :class:`Widening`). *config* (inline ``key=value``) configures the new version
    for its health check. Raises :class:`UpdateError` only when the update
    could not even be undone; every refusal and rollback is a falsy report.
    """
    manager = host.manager
    host.discover()  # finishes any interrupted update first
    info = manager.require_plugin(name)
    if info.source.kind is not SourceKind.DIRECTORY:
        raise UpdateError(
            f"plugin {name!r} comes from the installed distribution "
            f"{info.source.distribution!r}; update it with your package manager, then review "
            f"and re-pin it (caplet audit {name} && caplet approve {name} && caplet lock {name})"
        )
    state_dir = manager.state_dir
    with (
        holding_update_lock(state_dir, name, blocking=False) as held,
        contextlib.ExitStack() as stack,
    ):
        if not held:
            raise UpdateError(
                f"another caplet process is updating plugin {name!r}; wait for it to finish"
            )
        return _transaction(
            host,
            name,
            source,
            consent=consent,
            config=tuple(config),
            health_timeout_s=health_timeout_s,
            stack=stack,
        )


def _transaction(
    host: UpdatableHost,
    name: str,
    source: str | Path,
    *,
    consent: bool | UpdateConsent,
    config: tuple[str, ...],
    health_timeout_s: float,
    stack: contextlib.ExitStack,
) -> UpdateReport:
    manager = host.manager
    store = manager.store
    state_dir = manager.state_dir
    info = manager.require_plugin(name)
    live = info.path.absolute()
    work = live.parent / f"{_WORK_PREFIX}{name}"
    old_digest = manager.current_hash(name)
    lock = read_lockfile(manager.lockfile_path, missing_ok=True)
    old_entry = lock.entry(name)
    old_approval = store.get_approval(name)
    report = UpdateReport(
        ok=False, plugin=name, reason="", old_version=info.version, old_digest=old_digest
    )
    journal = UpdateJournal(
        plugin=name,
        step=UpdateStep.STAGING,
        plugin_dir=str(live),
        work_dir=str(work),
        old_digest=old_digest,
        old_approval=old_approval,
        lockfile=str(manager.lockfile_path.absolute()) if old_entry is not None else None,
        old_entry=old_entry,
    )
    write_journal(state_dir, journal)
    try:
        work_fd = new_work_dir(work)
    except UpdateError as exc:
        remove_journal(state_dir, name)
        manager.log_decision(name, "update", str(source), False, str(exc))
        return replace(report, reason=str(exc))
    stack.callback(os.close, work_fd)
    # The work folder as this process made it, whatever is put at its name later.
    base = through(work_fd)

    def refuse(reason: str) -> UpdateReport:
        restore(journal, store, work_fd=work_fd)
        remove_journal(state_dir, name)
        manager.log_decision(name, "update", str(source), False, reason)
        return replace(report, reason=reason)

    try:
        staged = _stage(host, name, source, base / "new")
        crash_point("staged")
        manifest, new_digest, audit = _check_staged(host, name, staged)
    except _RefusedError as exc:
        return refuse(str(exc))
    except CapletError as exc:
        return refuse(f"cannot stage the new version of {name!r}: {exc}")
    report = replace(report, new_version=manifest.version, new_digest=new_digest, audit=audit)
    try:
        approved = parse_approved(
            _approved_before(host, name, old_entry),
            config_names=[f.name for f in info.manifest.config],
            where=f"the approved capabilities of {name!r}",
        )
    except CapletError as exc:
        return refuse(str(exc))
    current_approval = (
        old_approval
        if old_approval is not None
        and old_approval.content_hash == old_digest
        # An approval in a store only a project file names is its author's (decide14).
        and not manager.unvouched_store
        else None
    )
    authorised = (manager.locked and old_entry is not None) or current_approval is not None
    if old_entry is not None:
        old_risk: RiskLevel | None = old_entry.risk_level
    else:
        old_risk = current_approval.risk_level if current_approval is not None else None
    approved_defaults, unknown = _defaults_before(host, name, old_entry, old_digest)
    # What the new version's programs bring on this host, resolved once, before the
    # question: shown in it, and what the approval pins (attack22).
    reach = default_program_reach(manifest)
    diff = widening(
        approved,
        [r.name for r in info.manifest.requires],
        old_entry.version if old_entry is not None else info.version,
        manifest,
        approved_defaults=approved_defaults,
        # The installed version's own subscriptions: what runs today.
        approved_hooks=[h.event for h in info.manifest.hooks],
        # The installed version's own text, when it is the approved content (as its
        # defaults): what the agent reads today (textpin).
        approved_agent_text=agent_text(info.manifest) if not unknown else None,
        unknown_defaults=unknown,
        approved_risk=old_risk,
        risk=audit.risk_level,
        programs=update_changes(
            current_approval.programs if current_approval is not None else None, reach
        ),
    )
    report = replace(report, diff=diff)
    consented = False
    if diff.widens or not authorised:
        consented = (consent(diff) is True) if callable(consent) else consent is True
        if not consented:
            why = "; ".join(describe_widening(diff))
            if authorised:
                return refuse(
                    f"the new version of {name!r} widens what was approved ({why}); an update "
                    "that widens what a plugin may do needs explicit consent (caplet update "
                    "--yes after reviewing it)"
                )
            # Not approved: that is the reason, whatever else changed (a new text
            # for the agent, say, from an installed version nobody approved).
            also = f"; it also widens what is installed ({why})" if diff.widens else ""
            if old_approval is not None and manager.unvouched_store:
                return refuse(
                    unvouched_message(name, manager.unvouched_store, True)
                    + f"; the update runs the new version (its health check){also}: that needs "
                    "explicit consent (caplet update --yes after reviewing it)"
                )
            return refuse(
                f"plugin {name!r} is not approved, and the update runs the new version (its "
                f"health check){also}; that needs explicit consent (caplet update --yes after "
                f"reviewing `caplet audit {name}`), or approve it first"
            )
    crash_point("consented")
    new_approval = None
    if old_approval is not None and old_approval.content_hash == old_digest:
        new_approval = ApprovalRecord(
            name=name,
            content_hash=new_digest,
            capabilities=tuple(c.declared for c in manifest.capabilities),
            approved_at=time.time(),
            risk_level=audit.risk_level,
            verdict=audit.verdict,
            version=manifest.version,
            requires=tuple(r.name for r in manifest.requires),
            defaults=template_defaults(manifest),
            hooks=tuple(h.event for h in manifest.hooks),
            agent_text=agent_text(manifest),
            # The update replaces the plugin where it is: the same place (attack13d).
            location=old_approval.location or _location(host, name),
            # The files the programs bring as the question showed them (or, when it
            # asked nothing, as approved: a change would have been asked about);
            # nothing when the approval predates the record (red team round 19,
            # attack22).
            programs=None if old_approval.programs is None else reach,
        )
    try:
        new_entry = (
            _new_entry(old_entry, manifest, new_digest, audit, staged) if old_entry else None
        )
    except _RefusedError as exc:
        return refuse(str(exc))
    journal = replace(
        journal,
        step=UpdateStep.STAGED,
        new_digest=new_digest,
        new_approval=new_approval,
        new_entry=new_entry,
    )
    write_journal(state_dir, journal)
    crash_point("journaled")
    was_enabled = info.enabled
    if was_enabled:
        host.disable(name)
    try:
        journal = journal.at(UpdateStep.SWAPPING)
        write_journal(state_dir, journal)
        crash_point("swapping")
        (base / "old").mkdir(exist_ok=True)
        live.rename(base / "old" / name)
        crash_point("old-moved")
        staged.rename(live)
        fsync_directory(live.parent)
        fsync_directory(base / "old")
        journal = journal.at(UpdateStep.SWAPPED)
        write_journal(state_dir, journal)
        crash_point("swapped")
        if new_approval is not None:
            store.put_approval(new_approval)
        crash_point("recording")  # the store is rewritten, the lock file not yet
        if new_entry is not None:
            entry = new_entry
            update_lockfile(manager.lockfile_path, lambda lock: lock.with_entry(entry))
        journal = journal.at(UpdateStep.RECORDED)
        write_journal(state_dir, journal)
        crash_point("recorded")
        host.discover()
        # The new version runs on its carried approval or lock entry, or on the
        # consent just given for this update: for the staged content only. The
        # staged copy waited in the plugins directory while a person read the
        # diff, and whoever can write that directory could swap it then; the
        # consent is not spent on content nobody was shown (attack14).
        outcome = host.enable(name, config, consent=_consent_for(consented, new_digest))
        failed = "failed its health check"
        if outcome:
            outcome = host.check_health(name, timeout_s=health_timeout_s)
        elif (now := manager.current_hash(name)) != new_digest:
            failed = (
                f"changed in the plugins directory after it was staged and checked (it is "
                f"{now} now, not {new_digest}), so it was not enabled"
            )
        else:
            failed = "could not be enabled"
        if not outcome:
            with contextlib.suppress(CapletError):
                host.disable(name)
            restore(journal, store, work_fd=work_fd)
            remove_journal(state_dir, name)
            host.discover()
            reason = (
                f"the new version of {name!r} {failed} and was rolled back "
                f"to {info.version} ({old_digest}), with its approval and lock entry: "
                f"{outcome.reason}"
            )
            manager.log_decision(name, "update", str(source), False, reason)
            return replace(report, reason=reason, health=outcome.reason, rolled_back=True)
        crash_point("healthy")
        journal = journal.at(UpdateStep.COMMITTED)
        write_journal(state_dir, journal)
        crash_point("committed")
    except (OSError, CapletError) as exc:
        try:
            with contextlib.suppress(CapletError):
                host.disable(name)
            restore(journal, store, work_fd=work_fd)
            remove_journal(state_dir, name)
            host.discover()
        except (OSError, CapletError) as again:
            raise UpdateError(
                f"the update of {name!r} failed at step {journal.step.value} ({exc}) and could "
                f"not be rolled back ({again}); the journal in {state_dir} is kept and the next "
                "caplet run retries the rollback"
            ) from again
        reason = f"the update of {name!r} failed at step {journal.step.value} and was rolled back: "
        manager.log_decision(name, "update", str(source), False, reason + str(exc))
        return replace(report, reason=reason + str(exc), rolled_back=True)
    remove_work_dir(work)
    remove_journal(state_dir, name)
    if not was_enabled:
        host.disable(name)
    reason = (
        f"plugin {name!r} updated from {info.version} to {manifest.version} ({new_digest}); "
        f"{outcome.reason}"
    )
    manager.log_decision(name, "update", new_digest, True, reason)
    return replace(report, ok=True, reason=reason, health=outcome.reason)
