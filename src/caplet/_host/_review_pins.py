"""What reviewed an approved content, and whether a new content's audit is at least that.

An approval carries over to a new version of its plugin that widens nothing, once the
new version's own audit passes the danger gate and the risk policy (attack13d). steer32
found the approval recorded the risk it was given at, not what reviewed it: approved on a
model's audit (its canaries reported, LOW), the next version enabled where no model is
configured (a CI or cron job, a machine without ``CAPLET_LLM_*``) was audited static-only,
LOW, and enabled, "carried over: nothing widened". Its code's behaviour, which only the
model reads, was read by nobody. So an approval records its **review**
(:attr:`caplet._trust._store.ApprovalRecord.review`): the model's ``provider:model``, or
``static-only``; and a new content's audit carries it over only when it is at least that:

* an approval given on a static-only audit: any audit (a model's audit has the static
  audit as its floor, :mod:`caplet._audit._deep`);
* an approval given on model M's audit: an audit by M itself, whose canaries it reported
  (:attr:`~caplet._audit._model.CanaryStatus.OK`). A static-only audit (no model
  configured, the operator's chosen static audit, a model that failed mid-audit and fell
  back) is less; so is another model's (which of two models reads code better caplet
  cannot tell, and the person relied on M's reading), and an audit whose canaries were
  not both reported, or that no canary checked (an application's own audit,
  ``set_audit_result``): nothing proves that model read this content;
* an approval recorded before caplet kept its review, which the migration could not tell
  from the cached audits (``None``): vouches for no other content's review.

Less is not refused outright: it is a widening (:class:`caplet._host._consent.Widening`),
so the person is asked, told which review the approval was given on and which this
content had, and the fix (configure that model, or approve again).
"""

from __future__ import annotations

from dataclasses import dataclass

from caplet._audit._model import STATIC_ONLY, AuditResult, CanaryStatus

__all__ = ["ReviewChange", "lesser_review", "review_of"]


def review_of(audit: AuditResult) -> str:
    """What reviewed *audit*'s content, as an approval records it: the model's
    ``provider:model`` when a model's answer went into it, else ``static-only``."""
    return audit.model_id or STATIC_ONLY


@dataclass(frozen=True, slots=True)
class ReviewChange:
    """A content of plugin ``plugin`` reviewed less than its approval was.

    ``approved`` is the review the approval was given on (``None``: not recorded);
    ``audited`` what reviewed this content (its reviewer, and for a model's audit that
    proves nothing, why: ``openai:m (AUDITOR_UNRELIABLE)``); ``same_model`` when that
    is the approved model, whose canaries did not prove it read this content.
    """

    plugin: str
    approved: str | None
    audited: str
    same_model: bool = False

    def describe(self) -> str:
        """The line of a widening that says so, with the fix."""
        name = self.plugin
        again = f"approve it again after review (caplet audit {name} && caplet approve {name})"
        if self.audited == STATIC_ONLY:
            now = "this content was audited static-only: no model read its code"
        else:
            now = f"this content was audited by {self.audited}"
        if self.approved is None:
            return (
                "was approved before caplet recorded what reviewed an approval (a model or "
                f"the static scanner alone), so it vouches for no other content's review; "
                f"{now}; {again}"
            )
        if self.same_model:
            fix = f"audit it again (caplet audit {name} --fresh) and enable it again, or {again}"
        else:
            fix = f"configure {self.approved} (CAPLET_LLM_*) and enable it again, or {again}"
        return f"was approved on {self.approved}'s audit, and {now}; {fix}"


def lesser_review(plugin: str, approved: str | None, audit: AuditResult) -> ReviewChange | None:
    """How *audit* is less of a review than the one an approval of *plugin* was given on
    (*approved*; ``None``: not recorded); None when it is at least that."""
    if approved == STATIC_ONLY:
        return None
    proven = audit.canary_status is CanaryStatus.OK
    same = approved is not None and not audit.static_only and audit.model_id == approved
    if same and proven:
        return None
    return ReviewChange(plugin, approved, _audited(audit), same_model=same)


def _audited(audit: AuditResult) -> str:
    """This content's reviewer, with why a model's audit is no proof (its canaries)."""
    if audit.static_only:
        return STATIC_ONLY
    if audit.canary_status is CanaryStatus.OK:
        return audit.model_id
    status = "no canaries checked" if audit.canary_status is None else audit.canary_status.value
    return f"{audit.model_id} ({status})"
