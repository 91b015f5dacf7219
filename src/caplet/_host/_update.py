"""Updating a plugin: stage, validate, scan, audit, diff, consent, swap, health check, rollback.

Seed 004's update mechanism, on caplet's trust model:

1. **stage** the new version (a folder, a wheel, or an installed
   distribution's plugin folder) into ``<plugins>/.caplet-update-<name>/new``,
   copied through the tree walker (no symlinks, no special files) and hashed;
2. **validate** its manifest (same name), **scan** and **audit** it (with the
   configured model, else static; the audit is cached under the new digest);
   a danger finding no declared capability covers, or a risk above the policy,
   refuses the update;
3. **diff** it against what was approved (the lock entry, else the approval,
   else the declared ones) and require explicit **consent** for anything
   that widens it (issue 14, :mod:`._consent`): a capability added or
   broadened, a templated capability whose default now reaches further
   (red-team finding 8, :mod:`._defaults`), a plugin added to ``requires``,
   a lower version, a higher audited risk, other text sent to the agent
   (descriptions, schemas, ``[hints]``: textpin, :mod:`._agent_text`), a lesser
   review than the approval's (no model, another one: :mod:`._review_pins`,
   steer33); a re-spelling is not an
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
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from caplet._atomic import fsync_directory
from caplet._audit._model import AuditResult
from caplet._errors import CapletError, UpdateError
from caplet._findings import RiskLevel
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
from caplet._host._hook_pins import pinned_hooks
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
from caplet._host._program_reach import default_program_reach, update_changes
from caplet._host._review_pins import lesser_review, review_of
from caplet._host._update_check import (
    RefusedError,
    UpdatableHost,
    approved_before,
    check_staged,
    defaults_before,
    location_of,
    new_lock_entry,
    stage,
)
from caplet._trust._lockfile import read_lockfile, update_lockfile
from caplet._trust._source import SourceKind
from caplet._trust._store import ApprovalRecord

if TYPE_CHECKING:
    pass

__all__ = ["UpdatableHost", "UpdateConsent", "UpdateReport", "update_plugin"]


#: Asked with what the new version widens (its ``added``, ``removed``, ``kept``
#: capabilities read like a capability diff), or when the plugin is not approved.
UpdateConsent = Callable[[Widening], bool]

_WORK_PREFIX = ".caplet-update-"


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
        staged = stage(host, name, source, base / "new")
        crash_point("staged")
        manifest, new_digest, audit = check_staged(host, name, staged)
    except RefusedError as exc:
        return refuse(str(exc))
    except CapletError as exc:
        return refuse(f"cannot stage the new version of {name!r}: {exc}")
    report = replace(report, new_version=manifest.version, new_digest=new_digest, audit=audit)
    try:
        approved = parse_approved(
            approved_before(host, name, old_entry),
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
    approved_defaults, unknown = defaults_before(host, name, old_entry, old_digest)
    # What the new version's programs bring on this host, resolved once, before the
    # question: shown in it, and what the approval pins (attack22).
    reach = default_program_reach(manifest)
    # The update's audit of the staged version is static-only: an approval (or a lock
    # entry) given on a model's audit does not vouch for code no model read (steer33).
    review = None
    if current_approval is not None:
        review = lesser_review(name, current_approval.review, audit)
    elif manager.locked and old_entry is not None:
        # The entry's model and server (None: an entry that names no model, or no
        # server: it vouches for no review, steer35).
        review = lesser_review(name, old_entry.review, audit, locked=True)
    diff = widening(
        approved,
        [r.name for r in info.manifest.requires],
        old_entry.version if old_entry is not None else info.version,
        manifest,
        approved_defaults=approved_defaults,
        # The installed version's own subscriptions: what runs today.
        approved_hooks=pinned_hooks(info.manifest),
        # The installed version's own text, when it is the approved content (as its
        # defaults): what the agent reads today (textpin).
        approved_agent_text=agent_text(info.manifest) if not unknown else None,
        unknown_defaults=unknown,
        approved_risk=old_risk,
        risk=audit.risk_level,
        programs=update_changes(
            current_approval.programs if current_approval is not None else None, reach
        ),
        review=review,
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
            hooks=pinned_hooks(manifest),
            agent_text=agent_text(manifest),
            # The update replaces the plugin where it is: the same place (attack13d).
            location=old_approval.location or location_of(host, name),
            # The files the programs bring as the question showed them (or, when it
            # asked nothing, as approved: a change would have been asked about);
            # nothing when the approval predates the record (red team round 19,
            # attack22).
            programs=None if old_approval.programs is None else reach,
            # What reviewed the new version: the update's own audit (steer33).
            review=review_of(audit),
        )
    try:
        new_entry = (
            new_lock_entry(old_entry, manifest, new_digest, audit, staged) if old_entry else None
        )
    except RefusedError as exc:
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
