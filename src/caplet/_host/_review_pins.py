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

steer35: a review is also *where* the model answered. The same ``provider:model`` served
from another API root (a local server whoever wrote the plugin runs, named by a changed
``CAPLET_LLM_BASE_URL``) is another reviewer, so a model's review is recorded as
``provider:model at scheme://host:port/path`` (:func:`caplet._audit._provider.api_root`)
and only that exact reviewer stands in for it. A model's review whose server is not known
(an approval steer33 recorded, or told from cached audits, as ``provider:model``; an
application's provider that names no ``endpoint``) counts as nothing: it vouches for no
later content's review, and a content so reviewed carries no model approval over.
"""

from __future__ import annotations

from dataclasses import dataclass

from caplet._audit._model import STATIC_ONLY, AuditResult, CanaryStatus, reviewer

__all__ = ["ReviewChange", "lesser_review", "review_of", "server_of"]

#: Between a model and the server it answered from, in a recorded review (:func:`reviewer`).
AT = " at "


def review_of(audit: AuditResult) -> str:
    """What reviewed *audit*'s content, as an approval records it: the model and the
    server its answer came from when a model's answer went into it, else ``static-only``."""
    return reviewer(audit.provider, audit.model, audit.endpoint, audit.answered_as)


def server_of(review: str) -> str:
    """The API root a recorded model review names (``""``: none, so it is unknown).

    The root is what :func:`~caplet._audit._provider.api_root` writes, which holds no
    blank, so the last separator is the one caplet wrote whatever the model's name holds.
    """
    _, at, server = review.rpartition(AT)
    return server if at and server and " " not in server and "://" in server else ""


@dataclass(frozen=True, slots=True)
class ReviewChange:
    """A content of plugin ``plugin`` reviewed less than its approval was.

    ``approved`` is the review the approval was given on (``None``: not recorded);
    ``audited`` what reviewed this content (its reviewer, and for a model's audit that
    proves nothing, why: ``openai:m (AUDITOR_UNRELIABLE)``); ``same_model`` when that
    is the approved model, whose canaries did not prove it read this content;
    ``locked`` when the review vouched for is a ``caplet.lock`` entry's, not an approval's.
    """

    plugin: str
    approved: str | None
    audited: str
    same_model: bool = False
    locked: bool = False

    def describe(self) -> str:
        """The line of a widening that says so, with the fix."""
        name = self.plugin
        again = f"approve it again after review (caplet audit {name} && caplet approve {name})"
        if self.audited == STATIC_ONLY:
            now = "this content was audited static-only: no model read its code"
        else:
            now = f"this content was audited by {self.audited}"
        if self.approved is None and self.locked:
            return (
                "is pinned by a caplet.lock entry that names no model and server for its "
                "audit (audit_provider alone: an entry written before caplet recorded "
                "audit_model and audit_endpoint), so it vouches for no other content's "
                f"review; {now}; {again}, then lock it again (caplet lock)"
            )
        if self.approved is None:
            return (
                "was approved before caplet recorded what reviewed an approval (a model or "
                f"the static scanner alone), so it vouches for no other content's review; "
                f"{now}; {again}"
            )
        if not server_of(self.approved):
            return (
                f"was approved on {self.approved}'s audit, which did not record the server "
                "that model answered from (an approval before caplet recorded it, or an "
                "auditor that names no endpoint), so it vouches for no other content's "
                f"review; {now}; {again}"
            )
        if self.same_model:
            fix = f"audit it again (caplet audit {name} --fresh) and enable it again, or {again}"
        else:
            fix = f"configure {self.approved} (CAPLET_LLM_*) and enable it again, or {again}"
        return f"was approved on {self.approved}'s audit, and {now}; {fix}"


def lesser_review(
    plugin: str, approved: str | None, audit: AuditResult, *, locked: bool = False
) -> ReviewChange | None:
    """How *audit* is less of a review than the one an approval of *plugin* was given on
    (*approved*; ``None``: not recorded; ``locked``: a lock entry's); None when it is at
    least that."""
    if approved == STATIC_ONLY:
        return None
    proven = audit.canary_status is CanaryStatus.OK
    # Only the very reviewer stands in for itself: the same model at the same server,
    # and a server caplet knows (an unknown one is no identity to compare).
    same = (
        approved is not None
        and bool(server_of(approved))
        and not audit.static_only
        # Never a review that names no server, whatever its model's name holds.
        and bool(audit.endpoint)
        and review_of(audit) == approved
    )
    if same and proven:
        return None
    return ReviewChange(plugin, approved, _audited(audit), same_model=same, locked=locked)


def _audited(audit: AuditResult) -> str:
    """This content's reviewer, with why a model's audit is no proof (its canaries)."""
    if audit.static_only:
        return STATIC_ONLY
    if audit.canary_status is CanaryStatus.OK:
        return review_of(audit)
    status = "no canaries checked" if audit.canary_status is None else audit.canary_status.value
    return f"{review_of(audit)} ({status})"
