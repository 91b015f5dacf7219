"""The manager's approvals: persisting a person's trust in one content hash, and refusing it.

``approve`` needs an audit of the current hash that the policy's risk limit
and the danger gate allow (``_trust_refusal``, which enabling asks too).
Apart from enabling: an approval persists in the store, an enable lasts
for this process. An enable on an approval claims the ``ctx.kv`` entries
written before caplet kept plugin places (``_claim_unlocated``), which the
approval vouches for.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from caplet._audit._model import AuditResult
from caplet._display import listed
from caplet._findings import RiskLevel
from caplet._host._agent_text import agent_text
from caplet._host._consent import (
    changed_while_shown,
)
from caplet._host._defaults import template_defaults
from caplet._host._gates import danger_message, uncovered_dangers
from caplet._host._hook_pins import pinned_hooks
from caplet._host._manager_discover import ManagerDiscover
from caplet._host._plugin_record import PluginRecord, legacy_distribution_location
from caplet._host._program_reach import default_program_reach, program_changes
from caplet._host._records import (
    Outcome,
)
from caplet._host._review_pins import review_of
from caplet._manifest._model import Manifest
from caplet._trust._source import SourceKind
from caplet._trust._store import ApprovalRecord

__all__ = ["ManagerApproval"]


class ManagerApproval(ManagerDiscover):
    """Approving, unapproving and the trust refusals (see the module docstring)."""

    # -- approval --------------------------------------------------------------------------

    def approve(
        self,
        name: str,
        *,
        content_hash: str | None = None,
        programs: Sequence[str] | None = None,
        manifest: Manifest | None = None,
    ) -> Outcome:
        """Persistently approve the plugin's current content and capabilities.

        Refused without an audit of the current hash, when the audit's risk
        is above the policy's ``max_risk_level``, or when danger findings no
        declared capability covers would stop it loading anyway.
        ``content_hash``: the content whose audit a person was shown; other
        content (the folder changed meanwhile) is refused, not approved.
        ``programs``: the lines of what each ``proc.exec`` program brings that the
        person was shown (:func:`program_reach`); when they bring other files now,
        refused too (attack21: a script's ``#!`` line changed while the question was
        open was recorded, unseen). ``manifest``: the manifest whose grant, text and
        defaults the person was shown; another one is refused (steer31: the shell showed
        the running version's grant of a plugin whose folder had changed, and recorded
        the folder's wider one). :meth:`reviewed_manifest` is the one to show.
        """
        record = self._record(name)
        self._rehash(record)
        if content_hash is not None and record.content_hash != content_hash:
            # Red-team round 4: the content swapped in while the question was open
            # (its audit cached from earlier) was approved, unseen.
            return self._refuse(name, "approve", changed_while_shown(name, content_hash))
        if manifest is not None and manifest != record.manifest:
            return self._refuse(
                name,
                "approve",
                f"plugin {name!r}: what was shown is the manifest of other content than the "
                f"content approved ({record.content_hash}: version {record.manifest.version}, "
                f"capabilities {listed(c.declared for c in record.manifest.capabilities)}"
                "); nothing was approved: review it again (caplet approve "
                f"{name})",
            )
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
        reach = default_program_reach(record.manifest)
        if programs is not None and tuple(programs) != reach:
            changes = program_changes(programs, reach, was_label="shown") or reach
            return self._refuse(
                name,
                "approve",
                f"plugin {name!r}: what its programs bring changed since it was shown: "
                f"{'; '.join(changes)}; nothing was approved: review it again (caplet "
                f"approve {name})",
            )
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
                hooks=pinned_hooks(record.manifest),
                agent_text=agent_text(record.manifest),
                location=record.location,
                # What each program brings on this host, as `caplet approve` showed it.
                programs=reach,
                # What read it: a new version carries this over only on as much (steer33).
                review=review_of(audit),
            )
        )
        self._log(name, "approve", record.content_hash, True, f"risk {audit.risk_level.value}")
        return Outcome(True, f"plugin {name!r} approved at {record.content_hash}")

    def reviewed_manifest(self, name: str, content_hash: str) -> Manifest | None:
        """The manifest of the content ``content_hash`` (the content whose audit is shown),
        which is what :meth:`approve` records; None when the plugin is no longer that
        content.

        Not the view of :meth:`get_plugin`: while a plugin is enabled that describes the
        content it *runs* (textpin), and the folder may have changed under it since; an
        approval is of the folder's content (steer31).
        """
        record = self._record(name)
        self._rehash(record)
        return record.manifest if record.content_hash == content_hash else None

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

    def _claim_unlocated(
        self, record: PluginRecord, approval: ApprovalRecord, *, approved: bool
    ) -> None:
        """Give *record* the ``ctx.kv`` entries of its name written before caplet kept
        places (``_store.UNLOCATED``) when the approval it was enabled on vouches for its
        place: one that records this place (its content, or a new version it carried over
        to), or one recorded before places were when this is its very content (the
        obvious case: the plugin whose approval stood when they were written). A person's
        decision about this plugin, never a default: a plugin enabled on a one-off
        consent, a carry-over from an approval that names no place, another project's
        plugin, and locked mode claim nothing (decide14)."""
        if approval.location is None and not approved:
            return
        if approval.location not in (None, record.location):
            return
        claimed = self.store.claim_unlocated(record.name, record.location)
        if record.source.kind is SourceKind.DISTRIBUTION and record.source.distribution:
            # and those of the place installed plugins had before caplet kept their
            # environment (attack15): this environment's plugin, approved again here
            claimed += self.store.claim_unlocated(
                record.name,
                record.location,
                from_location=legacy_distribution_location(record.source.distribution),
            )
        if claimed:
            self._log(
                record.name,
                "kv",
                record.location,
                True,
                f"claimed {claimed} ctx.kv entries written before caplet kept plugin places, "
                "on the approval of this plugin",
            )

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
