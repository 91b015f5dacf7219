"""The values the host layer hands out: plugin views, outcomes, flags."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from caplet._audit._model import AuditResult
from caplet._capabilities._model import Capability
from caplet._config._schema import ConfigValue
from caplet._host._policy import TrustTier
from caplet._manifest._model import Manifest
from caplet._trust._signing import SignatureCheck, SignatureStatus
from caplet._trust._source import PluginSource
from caplet._trust._store import ApprovalRecord, QuarantineRecord

__all__ = [
    "BrokenPlugin",
    "DirtyFlags",
    "InlineConfigResult",
    "Outcome",
    "PluginInfo",
    "PluginState",
]


class PluginState(enum.Enum):
    """Lifecycle states (seed 000): approval is a separate, persistent flag."""

    DISCOVERED = "discovered"
    AUDITED = "audited"
    CONFIGURED = "configured"
    ENABLED = "enabled"
    DISABLED = "disabled"
    QUARANTINED = "quarantined"
    #: May not load in this process (locked mode, the allowlist, a required
    #: signature): ``PluginInfo.inert_reason`` says why and how to fix it.
    INERT = "inert"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of a lifecycle step that may be refused.

    It is truthy exactly when the step happened, so ``if manager.enable(x):``
    reads naturally, and it always carries the reason when it did not.
    ``affected`` names other plugins the step changed (for example the
    dependants a ``disable`` also disabled).
    """

    ok: bool
    reason: str = ""
    affected: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True, slots=True)
class DirtyFlags:
    """Whether the agent must rebuild its sandbox (functions) or session (system message)."""

    sandbox: bool
    session: bool


@dataclass(frozen=True, slots=True)
class InlineConfigResult:
    """Which inline ``key=value`` entries were applied, and which keys are unknown."""

    applied: tuple[str, ...]
    unknown: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BrokenPlugin:
    """A directory discovery skipped, and why (the message names the fix)."""

    directory: Path
    error: str


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A read-only view of one discovered plugin at the moment it was asked for.

    ``config`` holds the real values, secrets included; anything that
    displays it must go through :func:`caplet._config._coerce.redact`.
    ``capabilities`` are the resolved (substituted) capabilities while
    enabled, else the declared ones. ``source`` says where the files come
    from, ``signature`` what their publisher signature says, ``tier`` the
    trust tier that follows, and ``inert_reason`` (when not empty) why the
    plugin may not load in this process.
    """

    name: str
    manifest: Manifest
    state: PluginState
    content_hash: str
    approved: bool
    approval: ApprovalRecord | None
    audit: AuditResult | None
    #: repr=False: a logged or printed PluginInfo must not leak secret values.
    config: Mapping[str, ConfigValue] = field(repr=False)
    capabilities: tuple[Capability, ...]
    quarantine: QuarantineRecord | None
    source: PluginSource = field(default_factory=PluginSource)
    tier: TrustTier = TrustTier.COMMUNITY
    signature: SignatureCheck = field(
        default_factory=lambda: SignatureCheck(SignatureStatus.MISSING)
    )
    inert_reason: str = ""
    #: Where it is (``_plugin_record.plugin_location``): with ``name``, its identity,
    #: which its approval, its ``ctx.kv`` entries and its quarantine belong to.
    location: str = ""

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def description(self) -> str:
        return self.manifest.description

    @property
    def path(self) -> Path:
        return self.manifest.plugin_dir

    @property
    def enabled(self) -> bool:
        return self.state is PluginState.ENABLED
