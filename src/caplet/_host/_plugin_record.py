"""The manager's mutable record of one plugin (the public view is :class:`PluginInfo`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from caplet._audit._model import AuditResult
from caplet._capabilities._model import Capability
from caplet._config._schema import ConfigValue
from caplet._host._grant_check import GrantPlan
from caplet._host._policy import TrustTier
from caplet._host._records import PluginState
from caplet._host._validate import FunctionValidator
from caplet._manifest._model import Manifest
from caplet._trust._signing import SignatureCheck, SignatureStatus
from caplet._trust._snapshot import Snapshot
from caplet._trust._source import PluginSource, SourceKind

__all__ = ["PluginRecord", "legacy_distribution_location", "plugin_location"]


@dataclass(slots=True)
class PluginRecord:
    """Mutable per-plugin state; only the manager and its helpers see it (views are PluginInfo)."""

    manifest: Manifest
    content_hash: str
    source: PluginSource = field(default_factory=PluginSource)
    signature: SignatureCheck = field(
        default_factory=lambda: SignatureCheck(SignatureStatus.MISSING)
    )
    tier: TrustTier = TrustTier.COMMUNITY
    state: PluginState = PluginState.DISCOVERED
    config: dict[str, ConfigValue] = field(default_factory=dict)
    #: The fields of ``config`` the operator set (inline, prompt, set_config);
    #: the others hold defaults, which an approval vouches for only as
    #: approved (red-team finding 8, :mod:`caplet._host._defaults`).
    explicit: set[str] = field(default_factory=set)
    audit: AuditResult | None = None
    resolved: tuple[Capability, ...] = ()
    #: The content hash that was verified when the plugin was enabled; the
    #: host loads code only from a snapshot with exactly this hash.
    enabled_hash: str | None = None
    #: The manifest of that content, while enabled: what the agent is told (its
    #: descriptions, schemas, hints). ``manifest`` follows the live folder on
    #: every rediscovery; a plugin running its enabled snapshot must not tell
    #: the agent what a swapped-in manifest says (textpin: nobody consented).
    enabled_manifest: Manifest | None = None
    #: The audit that content was enabled on: ``audit`` follows the live folder too,
    #: and a host must say of a running plugin what runs (steer31).
    enabled_audit: AuditResult | None = None
    #: The compiled ``args``/``returns`` schemas of the enabled content,
    #: by ``"module.function"`` (functions without a schema are absent).
    validators: Mapping[str, FunctionValidator] = field(default_factory=dict)
    #: The enabled fs grants, resolved without links and pinned to their inodes,
    #: and what is hidden inside them (:mod:`caplet._host._grant_check`).
    grant_plan: GrantPlan = field(default_factory=GrantPlan)
    #: The one snapshot the enable audited, gated, hashed and recorded: every
    #: worker of this enable loads a copy of it (issue 13, point 5).
    snapshot: Snapshot | None = None
    #: Declared capabilities the lock file withholds (locked mode), while enabled.
    withheld: tuple[Capability, ...] = ()

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def location(self) -> str:
        """Where this plugin is (:func:`plugin_location`), which an approval records."""
        return plugin_location(self.source, self.manifest.plugin_dir)


def plugin_location(source: PluginSource, plugin_dir: os.PathLike[str] | str) -> str:
    """Where a plugin is: ``distribution NAME in ENVIRONMENT`` for an installed one (the
    Python environment its distribution is installed in, :func:`environment_of`), else its
    folder, absolute with links resolved (an installed plugin whose environment is not
    known too: never the old place every environment shared).

    An approval records it: other content of the same plugin (a new version in the
    same place) may carry the approval over, a plugin of the same name anywhere else
    is another plugin (attack13d), another environment's distribution of the same name
    too (attack15: a fork installed under the name in a cloned project's environment
    carried the approval over and read the original's ``ctx.kv``).
    """
    if source.kind is SourceKind.DISTRIBUTION and source.distribution and source.environment:
        return f"{legacy_distribution_location(source.distribution)} in {source.environment}"
    return os.path.realpath(plugin_dir)


def legacy_distribution_location(distribution: str) -> str:
    """``distribution NAME``: an installed plugin's place before caplet kept its
    environment (decide14 to attack15). Approvals recorded there vouch for no environment
    (consent is asked once again); its ``ctx.kv`` goes to the plugin approved again in
    its environment (:meth:`TrustStore.claim_unlocated`)."""
    from packaging.utils import canonicalize_name

    return f"distribution {canonicalize_name(distribution)}"
