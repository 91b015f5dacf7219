"""What a templated capability reaches by default: recorded when approved, compared after.

``fs.read:${config.root}`` grants whatever ``root`` holds. A value the
operator sets (inline ``key=value``, a prompt, ``set_config``) is the
operator's decision, and an approval of the capability lets them make it:
it does for the approved content too. A field nobody set takes the
manifest's default, and that is the plugin *author's* choice, which the
approver saw. Red-team finding 8: the author's next version kept the
capability string, moved only the default to ``/etc``, and the approval
carried over because the declared capabilities compared equal; an
application relying on defaults granted ``/etc`` unasked (the same with
``net.http:${config.endpoint}`` and another origin, ``env.read``,
``proc.exec``, any template).

So an approval records the defaults behind its templated capabilities
(:func:`template_defaults`, stored as ``ApprovalRecord.defaults``), and a
later content is compared with them (:func:`default_changes`): each
templated capability the approval carries (the same template) is resolved
as this enable would resolve it, and again with the approved defaults in
place of the new ones for the fields the operator did not set; when the
approved resolution does not cover the new one (:func:`covers`: the same
grant, or a path or URL prefix inside it), the content widens the approval.

Choices where the finding is silent (docs/security.md, "Consent model"):

* A default that goes **narrower** (``/srv/data`` to ``/srv/data/cache``, a
  URL path prefix inside the approved one) does not widen the grant: the
  approved default already reached it, as an approved literal capability
  covers a narrower one. It is still new text for the agent, which reads the
  value in its system message (attack13d), so
  :func:`caplet._host._agent_text.moved_defaults` asks for it.
* A default that is **removed** does not widen: nothing is granted until the
  operator sets a value, and that value is theirs.
* A default **added** where the approval had none widens: the operator had to
  choose the value; now the author does.
* The **operator's own value** is not a default: a capability whose every
  field the operator set is not compared at all, whatever the defaults did.
* An approval recorded **before** caplet kept defaults (``None``) cannot say
  what was approved: every templated capability that takes a default counts
  as changed, with that reason; capabilities without a template, and
  templates whose fields the operator set, are unaffected.
* Only the capability's own fields count. The default of a field that no
  capability names (a URL path the plugin appends, a sub-folder it picks)
  steers the plugin *inside* its grants, as its code does, and new code
  within the same grants needs no consent either (issue 14); the sandbox
  and the broker bound it by the grant.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from caplet._capabilities._model import Capability
from caplet._capabilities._parse import substitute, template_names
from caplet._config._schema import ConfigValue
from caplet._errors import CapabilityError
from caplet._host._capdiff import covers
from caplet._manifest._model import Manifest
from caplet._trust._store import ApprovedDefaults

__all__ = [
    "UNRECORDED",
    "DefaultChange",
    "Reach",
    "configured_reach",
    "default_changes",
    "default_reach",
    "template_defaults",
    "template_fields",
]

#: Why an approval cannot say what a default was: it is older than the record.
UNRECORDED = "the approval predates caplet recording defaults"


@dataclass(frozen=True, slots=True)
class DefaultChange:
    """A templated capability that reaches, by default, beyond what was approved.

    ``capability`` is the template as declared; ``now`` what it resolves to
    for this enable (or update); ``fields`` the config fields whose defaults
    it takes. ``approved`` is what it resolved to with the approved defaults,
    ``None`` when a field had no default then (the operator had to set it);
    ``unknown`` says why the approved defaults are not known (``""``: they are).
    """

    capability: Capability
    now: Capability
    fields: tuple[str, ...]
    approved: Capability | None = None
    unknown: str = ""

    def describe(self) -> str:
        """One line: the capability, the value it now defaults to and the approved one."""
        head = f"{self.capability.declared} now defaults to {_value(self.now)}"
        if self.unknown:
            return f"{head} (approved: unknown, {self.unknown})"
        if self.approved is None:
            return f"{head} (approved: no default, the value was the operator's to set)"
        return f"{head} (approved: {_value(self.approved)})"


def _value(capability: Capability) -> str:
    """``/etc`` of ``fs.read:/etc``: the part a template resolves."""
    return str(capability).partition(":")[2]


def template_fields(capabilities: Iterable[Capability]) -> tuple[str, ...]:
    """The config fields the templated *capabilities* name, each once, in order."""
    names: dict[str, None] = {}
    for capability in capabilities:
        if capability.templated:
            names.update(dict.fromkeys(template_names(capability.declared)))
    return tuple(names)


def template_defaults(manifest: Manifest) -> ApprovedDefaults:
    """What an approval of *manifest* records: each templated field's default (or None)."""
    pairs: list[tuple[str, ConfigValue | None]] = []
    for name in template_fields(manifest.capabilities):
        config_field = manifest.config_field(name)
        pairs.append((name, None if config_field is None else config_field.default))
    return tuple(pairs)


def by_default(manifest: Manifest) -> tuple[Capability, ...]:
    """*manifest*'s capabilities, each templated one resolved with its default (what an
    approval records and vouches for); one that takes no default stays as declared."""
    values = {name: value for name, value in template_defaults(manifest) if value is not None}
    return tuple(
        (_resolve(capability, values) or capability) if capability.templated else capability
        for capability in manifest.capabilities
    )


def default_reach(manifest: Manifest) -> tuple[tuple[str, str | None], ...]:
    """Each templated capability of *manifest*, as declared, with what it reaches when
    nothing is configured (None: nothing until the operator sets a value).

    What an approver is shown beside the declared capabilities, since it is
    what the approval records and vouches for.
    """
    values = {name: value for name, value in template_defaults(manifest) if value is not None}
    reach: list[tuple[str, str | None]] = []
    for capability in manifest.capabilities:
        if capability.templated:
            resolved = _resolve(capability, values)
            reach.append((capability.declared, None if resolved is None else _value(resolved)))
    return tuple(reach)


@dataclass(frozen=True, slots=True)
class Reach:
    """What one templated capability reaches with the configuration known so far.

    ``value`` is None when a field has no value yet (nothing is granted until
    the operator sets ``missing``); ``by_default`` when a field the operator
    did not set takes the manifest's default (the author's choice), so the
    person consenting is shown it; ``secret`` when an operator-set field is
    secret (its value is not shown).
    """

    declared: str
    value: str | None
    by_default: bool
    missing: tuple[str, ...] = ()
    secret: bool = False


def configured_reach(
    manifest: Manifest, configured: Mapping[str, ConfigValue]
) -> tuple[Reach, ...]:
    """Each templated capability of *manifest* resolved with *configured* (the operator's
    values) over the defaults: what a consent must show beside the template (red-team
    round 4: consent showed only ``fs.read:${config.root}``, never the default it took)."""
    defaults = {name: value for name, value in template_defaults(manifest) if value is not None}
    values = {**defaults, **configured}
    reach: list[Reach] = []
    for capability in manifest.capabilities:
        if not capability.templated:
            continue
        names = template_names(capability.declared)
        missing = tuple(n for n in names if n not in values)
        resolved = None if missing else _resolve(capability, values)
        secret = any(
            n in configured and (f := manifest.config_field(n)) is not None and f.secret
            for n in names
        )
        reach.append(
            Reach(
                declared=capability.declared,
                value=None if resolved is None else _value(resolved),
                by_default=any(n not in configured for n in names),
                missing=missing,
                secret=secret,
            )
        )
    return tuple(reach)


def _resolve(capability: Capability, values: Mapping[str, ConfigValue]) -> Capability | None:
    """*capability* with *values* substituted; None when they do not make a grant.

    Broad paths resolve here: whether they may be granted is the enable's
    call (the policy), and it refuses them with its own message.
    """
    try:
        return substitute(capability, values, allow_broad=True)
    except CapabilityError:
        return None


def default_changes(
    carried: Iterable[Capability],
    manifest: Manifest,
    approved: ApprovedDefaults | None,
    *,
    config: Mapping[str, ConfigValue] | None = None,
    explicit: Collection[str] = (),
    unknown: str = UNRECORDED,
) -> tuple[DefaultChange, ...]:
    """The templated capabilities in *carried* whose default reach widens *approved*.

    *carried* are the capabilities of *manifest* an approval grants as they
    are (the capability diff's ``kept``); *approved* the approval's recorded
    defaults (``None``: not known, for the reason *unknown*). *config* holds
    the values set for this enable and *explicit* the names of those the
    operator set; without them (an update, which carries the approval to
    every later enable) every field takes its default. A capability that
    does not resolve (a field with no value) is left to the enable, which
    refuses it for want of a value.
    """
    values_set: Mapping[str, ConfigValue] = config or {}
    recorded = None if approved is None else dict(approved)
    changes: list[DefaultChange] = []
    for capability in carried:
        if not capability.templated:
            continue
        names = tuple(dict.fromkeys(template_names(capability.declared)))
        fields = tuple(n for n in names if n not in explicit)
        if not fields:
            continue  # every value is the operator's own
        values: dict[str, ConfigValue] = {}
        for name in names:
            config_field = manifest.config_field(name)
            value = values_set.get(name, None if config_field is None else config_field.default)
            if value is not None:
                values[name] = value
        now = _resolve(capability, values) if len(values) == len(names) else None
        if now is None:
            continue
        if recorded is None:
            changes.append(DefaultChange(capability, now, fields, unknown=unknown))
            continue
        approved_values = {name: recorded.get(name) for name in fields}
        if None in approved_values.values():
            # No default then: the operator had to choose; now the author does.
            changes.append(DefaultChange(capability, now, fields))
            continue
        before = dict(values)
        before.update({k: v for k, v in approved_values.items() if v is not None})
        old = _resolve(capability, before)
        if old is None:
            unknown_why = "the approved default made no grant"
            changes.append(DefaultChange(capability, now, fields, unknown=unknown_why))
        elif not covers(old, now):
            changes.append(DefaultChange(capability, now, fields, approved=old))
    return tuple(changes)
