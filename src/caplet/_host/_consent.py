"""Consent: enabling a plugin nobody approved is a person's decision, never a default.

Issue 14 found enable deciding on its own: ``caplet call --enable`` on a
pipe ran an unapproved plugin without a question, ``host.enable`` audited an
unapproved plugin statically and enabled it, a manifest that gained
``env.read:SECRET`` after approval was re-audited and enabled, and a
downgrade went through without a word. The model (docs/security.md,
"Consent model"):

* **An approval of the current content** (or, in locked mode, the lock entry
  that pins it) is the consent: enable needs nothing more.
* **No approval at all**: enabling needs a consent decision for this
  process: a callback shown a :class:`ConsentRequest` (what a person would
  see: the audit with its canary status, the capabilities, the composition
  lint), or ``consent=True`` from a caller that has shown them itself. The
  CLI asks on a terminal, accepts ``--yes``, and refuses on a pipe.
* **An approval of other content** (the plugin changed since): compared with
  what was approved (:class:`Widening`). A new capability (or a broader
  path or origin, judged by :mod:`caplet._host._capdiff`), a templated
  capability whose default now reaches beyond the approved default
  (:mod:`caplet._host._defaults`, red-team finding 8), a new plugin in
  ``requires``, a lower version, a higher audited risk, or other text sent
  to the agent (its descriptions, schemas, ``[hints]``:
  :mod:`caplet._host._agent_text`, textpin) **widens** it and
  needs fresh consent, in locked mode too (``caplet update`` asks before it
  rewrites a lock entry). A change that does not widen (narrowing, a fix
  with the same grants) is enabled on the approval's consent, after the new
  content's own audit passed the danger gate and the policy; the decision
  log says so. An approval recorded before caplet kept versions and
  requirements cannot vouch for other content, nor one recorded before it
  kept defaults for a templated capability that takes one, nor one
  recorded before it kept the agent text: fresh consent.

Consent is never persisted: it is for this process. ``approve`` is the
persistent decision.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.version import Version

from caplet._audit._model import AuditResult
from caplet._capabilities._model import Capability, glob_reach
from caplet._config._schema import ConfigValue
from caplet._errors import CapabilityError
from caplet._findings import Finding, RiskLevel
from caplet._host._agent_text import AgentTextChange, agent_text_change, moved_defaults
from caplet._host._capdiff import CapabilityDiff, diff_capabilities, parse_approved
from caplet._host._defaults import UNRECORDED, DefaultChange, default_changes
from caplet._host._hook_pins import hook_changes
from caplet._host._policy import TrustTier
from caplet._host._program_reach import program_changes
from caplet._host._review_pins import ReviewChange, lesser_review
from caplet._manifest._model import Manifest
from caplet._trust._source import PluginSource
from caplet._trust._store import ApprovalRecord, ApprovedDefaults

__all__ = [
    "Consent",
    "ConsentReason",
    "ConsentRequest",
    "Widening",
    "changed_while_shown",
    "consent_need",
    "consent_refusal",
    "describe_widening",
    "is_downgrade",
    "unvouched_message",
    "why_consent",
    "widening",
    "widening_since",
]


class ConsentReason(enum.Enum):
    """Why an enable needs a person's consent."""

    #: The plugin has no approval at all.
    NOT_APPROVED = "not-approved"
    #: It was approved, but its content changed and asks for more than was approved.
    WIDENED = "widened"
    #: It was approved, its content changed, and the approval predates caplet
    #: recording versions and requirements: whether it widens cannot be told.
    UNKNOWN_SCOPE = "unknown-scope"
    #: It was approved, its content changed, and the approval predates caplet
    #: recording defaults, while a templated capability takes one: what that
    #: default reached when approved cannot be told (red-team finding 8).
    UNKNOWN_DEFAULTS = "unknown-defaults"
    #: It was approved, its content changed, and the approval predates caplet
    #: recording the text the plugin sends to the agent: whether that text
    #: changed cannot be told (textpin).
    UNKNOWN_AGENT_TEXT = "unknown-agent-text"
    #: Its approval is in a store only a project's policy file names (a cloned
    #: project's own state database, say), which vouches for nothing (decide14).
    UNVOUCHED_STORE = "unvouched-store"
    #: It was approved, its content changed and widens nothing, but its audit is less
    #: of a review than the one the approval was given on: no model, another model, or
    #: the model's canaries not reported (:mod:`caplet._host._review_pins`, steer33).
    LESSER_REVIEW = "lesser-review"


@dataclass(frozen=True, slots=True)
class Widening:
    """How a content asks for more than an approval (or an installed version) granted.

    ``capabilities`` is the capability diff (``added``: not covered by any
    approved one); ``defaults`` the templated capabilities it keeps whose
    default now reaches beyond the approved default; ``requires_added`` the
    plugins it now requires that it did not; ``hooks_added`` the application
    events it now subscribes to that it did not (their payloads would reach
    it: red-team round 4); ``hooks_ahead`` a line for each hook that now runs ahead of
    where it was approved (:mod:`caplet._host._hook_pins`, steer31); ``downgrade``
    the ``(approved, new)`` versions when the new one is lower; ``risk_raised``
    the ``(approved, audited)`` risks when higher; ``agent_text`` how the text it sends to the agent
    differs from the approved text (:mod:`caplet._host._agent_text`);
    ``moved`` the ``(now, approved)`` places when the content is not where
    the approved plugin was: another plugin of the same name (attack13d);
    ``programs`` how the files a ``proc.exec`` program brings on this host
    (its ``#!`` interpreter, its loader) differ from the approved ones
    (:mod:`caplet._host._program_reach`, red team round 19); ``review`` how this
    content's audit is less of a review than the one the approval was given on
    (:mod:`caplet._host._review_pins`, steer33).
    """

    capabilities: CapabilityDiff
    requires_added: tuple[str, ...] = ()
    downgrade: tuple[str, str] | None = None
    risk_raised: tuple[RiskLevel, RiskLevel] | None = None
    defaults: tuple[DefaultChange, ...] = ()
    hooks_added: tuple[str, ...] = ()
    hooks_ahead: tuple[str, ...] = ()
    agent_text: AgentTextChange | None = None
    moved: tuple[str, str] | None = None
    programs: tuple[str, ...] = ()
    review: ReviewChange | None = None

    @property
    def widens(self) -> bool:
        return bool(
            self.review is not None
            or self.moved
            or self.programs
            or self.capabilities.added
            or self.defaults
            or self.requires_added
            or self.hooks_added
            or self.hooks_ahead
            or self.downgrade
            or self.risk_raised
            or self.agent_text is not None
        )

    @property
    def only_unknown_defaults(self) -> bool:
        """True when all it widens is defaults an older approval did not record."""
        return self.only_unrecorded and self.agent_text is None

    @property
    def only_review(self) -> bool:
        """True when all it widens is a lesser review than the approval's (steer33)."""
        return self.review is not None and not replace(self, review=None).widens

    @property
    def only_unrecorded(self) -> bool:
        """True when all it widens is what an older approval did not record (defaults,
        agent text): nothing it is known to widen."""
        return (
            self.widens
            and all(d.unknown == UNRECORDED for d in self.defaults)
            and (self.agent_text is None or self.agent_text.unrecorded)
            and not (
                self.review is not None
                or self.moved
                or self.programs
                or self.capabilities.added
                or self.requires_added
                or self.hooks_added
                or self.hooks_ahead
                or self.downgrade
                or self.risk_raised
            )
        )

    # The capability diff's own names, so a ``caplet update`` consent callback
    # written for a CapabilityDiff (``diff.added``) keeps working.

    @property
    def added(self) -> tuple[Capability, ...]:
        return self.capabilities.added

    @property
    def removed(self) -> tuple[Capability, ...]:
        return self.capabilities.removed

    @property
    def kept(self) -> tuple[Capability, ...]:
        return self.capabilities.kept

    @property
    def escalates(self) -> bool:
        return self.widens


def is_downgrade(old: str, new: str) -> bool:
    """True when version *new* is lower than *old* (PEP 440; unparseable: not comparable)."""
    try:
        return Version(new) < Version(old)
    except ValueError:  # InvalidVersion, or a segment past the int digit limit (attack29)
        return False


def widening(
    approved: Sequence[Capability],
    approved_requires: Sequence[str],
    approved_version: str,
    manifest: Manifest,
    *,
    approved_defaults: ApprovedDefaults | None,
    approved_hooks: Collection[str] | None,
    approved_agent_text: Sequence[str] | None,
    unknown_defaults: str = UNRECORDED,
    config: Mapping[str, ConfigValue] | None = None,
    explicit: Collection[str] = (),
    approved_risk: RiskLevel | None = None,
    risk: RiskLevel | None = None,
    approved_location: str | None = None,
    location: str | None = None,
    programs: tuple[str, ...] = (),
    review: ReviewChange | None = None,
) -> Widening:
    """What *manifest* asks for beyond what was approved.

    *approved_defaults* are the defaults behind the approved templated
    capabilities (``None``: not known, for the reason *unknown_defaults*);
    *config* and *explicit* are this enable's values and the names the
    operator set (:func:`caplet._host._defaults.default_changes`).
    *approved_hooks* are the events the approved content subscribed to
    (``None``: not recorded, so every subscription of *manifest* is new).
    *approved_agent_text* is the text the approved content sent to the agent
    (:func:`caplet._host._agent_text.agent_text`; ``None``: not recorded, so
    none of *manifest*'s is vouched for). *approved_location* is where the
    approved plugin was and *location* where this content is (either ``None``:
    not compared). *programs* are the changes of the programs' files
    (:func:`caplet._host._program_reach.program_changes`). *review*: how this content's
    audit is less of a review than the approval's (:func:`lesser_review`).
    """
    diff = diff_capabilities(approved, manifest.capabilities)
    defaults = default_changes(
        diff.kept,
        manifest,
        approved_defaults,
        config=config,
        explicit=explicit,
        unknown=unknown_defaults,
    )
    known = set(approved_requires)
    added = tuple(r.name for r in manifest.requires if r.name not in known)
    hooks_added, hooks_ahead = hook_changes(approved_hooks or (), manifest)
    down = (
        (approved_version, manifest.version)
        if is_downgrade(approved_version, manifest.version)
        else None
    )
    raised = (
        (approved_risk, risk)
        if approved_risk is not None and risk is not None and risk.order > approved_risk.order
        else None
    )
    moved = (
        (location, approved_location)
        if location is not None and approved_location is not None and location != approved_location
        else None
    )
    return Widening(
        capabilities=diff,
        review=review,
        moved=moved,
        programs=programs,
        requires_added=added,
        hooks_added=hooks_added,
        hooks_ahead=hooks_ahead,
        downgrade=down,
        risk_raised=raised,
        defaults=defaults,
        agent_text=agent_text_change(
            approved_agent_text,
            manifest,
            moved_defaults(
                manifest,
                approved_defaults,
                config=config,
                explicit=explicit,
                judged={name for change in defaults for name in change.fields},
            ),
        ),
    )


def widening_since(
    approval: ApprovalRecord,
    manifest: Manifest,
    audit: AuditResult,
    *,
    config: Mapping[str, ConfigValue] | None = None,
    explicit: Collection[str] = (),
    location: str | None = None,
    programs: Sequence[str] | None = None,
) -> Widening | None:
    """How *manifest* (audited *audit*, configured *config*, of which the operator set
    *explicit*, found at *location*, its programs bringing the files *programs* says:
    None, not compared) widens *approval*; None when the approval cannot tell."""
    if approval.version is None or approval.requires is None:
        return None
    approved = parse_approved(
        approval.capabilities,
        config_names=[f.name for f in manifest.config],
        where=f"the approval of {manifest.name!r}",
    )
    return widening(
        approved,
        approval.requires,
        approval.version,
        manifest,
        approved_defaults=approval.defaults,
        approved_hooks=approval.hooks,
        approved_agent_text=approval.agent_text,
        config=config,
        explicit=explicit,
        approved_risk=approval.risk_level,
        risk=audit.risk_level,
        approved_location=approval.location,
        location=location,
        programs=program_changes(approval.programs, programs or ()),
        # Other content only: the approved content itself was reviewed as approved.
        review=None
        if approval.content_hash == audit.content_hash
        else lesser_review(manifest.name, approval.review, audit),
    )


def consent_need(
    approval: ApprovalRecord | None,
    manifest: Manifest,
    audit: AuditResult,
    *,
    config: Mapping[str, ConfigValue] | None = None,
    explicit: Collection[str] = (),
    location: str | None = None,
    programs: Sequence[str] | None = None,
) -> tuple[ConsentReason, Widening | None] | None:
    """Why enabling *manifest*'s content, which *approval* does not name (or whose
    programs now bring other files than it recorded), needs consent.

    None when it does not: the earlier approval covers everything it asks for.
    """
    if approval is None:
        return ConsentReason.NOT_APPROVED, None
    try:
        change = widening_since(
            approval,
            manifest,
            audit,
            config=config,
            explicit=explicit,
            location=location,
            programs=programs,
        )
    except CapabilityError:
        change = None  # an approval whose capabilities no longer parse vouches for nothing
    if change is None:
        return ConsentReason.UNKNOWN_SCOPE, None
    if change.only_unrecorded:
        if change.agent_text is not None:
            return ConsentReason.UNKNOWN_AGENT_TEXT, change
        return ConsentReason.UNKNOWN_DEFAULTS, change
    if change.only_review:
        return ConsentReason.LESSER_REVIEW, change
    if change.widens:
        return ConsentReason.WIDENED, change
    return None


def _glob_said(capability: Capability) -> str:
    """What a glob is granted as (steer31, glob32): said where it is added."""
    reach = glob_reach(capability)
    return "" if reach is None else f", which reaches {reach}"


def describe_widening(change: Widening, *, whole: bool = False) -> list[str]:
    """One line per way *change* widens (for prompts, refusals and the log); the changed
    agent text whole for the screen a person decides on (``whole``, steer32)."""
    lines = []
    if change.moved is not None:
        now, approved = change.moved
        lines.append(
            f"is another plugin of that name: it is at {now}, the approval is of the one at "
            f"{approved}"
        )
    lines += [f"adds capability {c.declared}{_glob_said(c)}" for c in change.capabilities.added]
    lines += list(change.programs)
    lines += [d.describe() for d in change.defaults]
    lines += [f"now requires plugin {name!r}" for name in change.requires_added]
    lines += [f"now subscribes to application event {event!r}" for event in change.hooks_added]
    lines += list(change.hooks_ahead)
    if change.downgrade is not None:
        old, new = change.downgrade
        lines.append(f"goes down from version {old} to {new}")
    if change.risk_raised is not None:
        old_risk, new_risk = change.risk_raised
        lines.append(f"was approved at risk {old_risk.value}, is now audited {new_risk.value}")
    if change.agent_text is not None:
        lines += change.agent_text.describe(whole=whole)
    if change.review is not None:
        lines.append(change.review.describe())
    return lines


@dataclass(frozen=True, slots=True)
class ConsentRequest:
    """What a person would see before agreeing to enable a plugin nobody approved.

    ``declared`` are the manifest's capabilities and ``granted`` the ones the
    plugin would get with its configuration resolved (``None`` when asked
    before it is configured); ``composition`` is the capability lint;
    ``approval`` the earlier approval of other content, if any, and
    ``widening`` how this content goes beyond it. ``why`` says it in one
    sentence. ``agent_text`` is the text the plugin sends to the agent
    (:func:`caplet._host._agent_text.agent_text`): consent puts it before the
    agent, so a person consenting to a plugin no approval vouches for must be
    able to read it (attack13d).
    """

    plugin: str
    version: str
    description: str
    source: PluginSource
    content_hash: str
    tier: TrustTier
    reason: ConsentReason
    why: str
    audit: AuditResult
    declared: tuple[Capability, ...]
    granted: tuple[Capability, ...] | None
    composition: tuple[Finding, ...]
    requires: tuple[str, ...]
    approval: ApprovalRecord | None = None
    widening: Widening | None = None
    agent_text: tuple[str, ...] = ()
    #: One line per ``proc.exec`` program: the files it brings on this host, its
    #: ``#!`` interpreter and loader among them (:mod:`caplet._host._program_reach`).
    programs: tuple[str, ...] = ()
    #: One line per fs glob granted: ``CAPABILITY -> what it reaches``
    #: (:func:`caplet._capabilities._model.glob_reaches`; each match at enable is
    #: granted by itself, a write glob creates no file: glob32).
    globs: tuple[str, ...] = ()

    @property
    def vouched_text(self) -> bool:
        """True when an approval vouches for the text the agent reads (or the widening
        lists how it changed): only then may a consent screen leave it out."""
        return self.reason not in (
            ConsentReason.NOT_APPROVED,
            ConsentReason.UNKNOWN_SCOPE,
            ConsentReason.UNVOUCHED_STORE,
        )


#: Asked with the request; True consents for this process.
Consent = Callable[[ConsentRequest], bool]


def why_consent(
    name: str,
    reason: ConsentReason,
    content_hash: str,
    approval: ApprovalRecord | None,
    change: Widening | None,
    *,
    store: str = "",
) -> str:
    """The one-sentence reason of a :class:`ConsentRequest` (*store*: the project's
    ``store = ...`` setting, for :attr:`ConsentReason.UNVOUCHED_STORE`)."""
    if reason is ConsentReason.NOT_APPROVED:
        return f"plugin {name!r} is not approved (content {content_hash})"
    assert approval is not None
    if reason is ConsentReason.UNVOUCHED_STORE:
        return unvouched_message(name, store, approval.content_hash == content_hash)
    since = f"its approval of {approval.content_hash}"
    if reason is ConsentReason.UNKNOWN_SCOPE:
        return (
            f"plugin {name!r} changed since {since} (now {content_hash}), and that approval "
            "predates caplet recording the version and requirements approved, so it cannot "
            "vouch for the new content"
        )
    assert change is not None
    if reason is ConsentReason.UNKNOWN_AGENT_TEXT:
        return (
            f"plugin {name!r} changed since {since} (now {content_hash}), and that approval "
            "predates caplet recording the text a plugin sends to the agent (descriptions, "
            "argument schemas, hints), so it cannot vouch for the new content's text: "
            + "; ".join(describe_widening(change))
        )
    if reason is ConsentReason.UNKNOWN_DEFAULTS:
        return (
            f"plugin {name!r} changed since {since} (now {content_hash}), and that approval "
            "predates caplet recording the defaults of templated capabilities, so it cannot "
            "vouch for what they reach by default: " + "; ".join(describe_widening(change))
        )
    if reason is ConsentReason.LESSER_REVIEW:
        return (
            f"plugin {name!r} changed since {since} (now {content_hash}) and widens nothing, "
            "but its audit is less of a review than the one that approval was given on: it "
            + "; ".join(describe_widening(change))
        )
    if approval.content_hash == content_hash:
        # The approved content itself: what changed is on the host (a program's #!
        # interpreter, red team round 19).
        return (
            f"plugin {name!r} is approved at {content_hash}, but what it runs on this host "
            "changed since: " + "; ".join(describe_widening(change))
        )
    return (
        f"plugin {name!r} changed since {since} (now {content_hash}) and asks for more: "
        + "; ".join(describe_widening(change))
    )


def unvouched_message(name: str, store: str, same_content: bool) -> str:
    """Why an approval in a store only a project file names asks for consent (decide14)."""
    which = "an approval of this content" if same_content else "an approval of other content"
    return (
        f"plugin {name!r} has {which} only in the store a project file names ({store}): "
        "approvals there are the project author's, not yours, and vouch for nothing here; "
        "consent to it, or, if you made that store, name it yourself (CAPLET_STORE, "
        "--policy FILE or CAPLET_POLICY=FILE)"
    )


def changed_while_shown(name: str, shown: str) -> str:
    """The refusal of an approval whose content is no longer the content whose audit was
    shown (red-team round 4: a version swapped in while the question was open was
    approved, unseen)."""
    return (
        f"plugin {name!r} changed since its audit was shown (of {shown}); nothing was "
        f"approved: review it again once nothing writes its folder (caplet approve {name})"
    )


def consent_refusal(request: ConsentRequest, *, asked: bool) -> str:
    """The refusal when consent was not given: why, and the two ways to give it."""
    name = request.plugin
    if asked:
        return f"{request.why}; consent was not given, so it was not enabled"
    return (
        f"{request.why}; enabling it needs a person's consent: approve it after review "
        f"(caplet audit {name} && caplet approve {name}, or host.approve({name!r})), or "
        "enable it for this process only with consent: --yes on the command line after "
        "reading the audit, or in Python enable(..., consent=callback) with a callback "
        "shown the ConsentRequest (audit, capabilities, composition lint), or consent=True "
        "when your application has shown them to a person"
    )
