"""Host policy: the administrator's limits that bind every plugin."""

from __future__ import annotations

import enum
from dataclasses import field
from pathlib import Path
from typing import Annotated, assert_never

from pydantic import AfterValidator, BeforeValidator, Field, Strict, model_validator
from pydantic.dataclasses import dataclass

from caplet._broker._policy import NetworkPolicy
from caplet._errors import PolicyError, StoreError
from caplet._findings import RiskLevel
from caplet._host._budget import BudgetPolicy
from caplet._host._context_limits import ContextLimits
from caplet._host._guest_limits import GuestLimits
from caplet._host._log_limits import LogLimits
from caplet._host._mcp_policy import McpPolicy
from caplet._host._metrics import MetricsSettings
from caplet._trust._open import sqlite_directory
from caplet._trust._signing import SignatureStatus
from caplet._trust._source import SourceKind
from caplet._validated import (
    MODEL_CONFIG,
    Cores,
    Duration,
    Flag,
    Kilobytes,
    Megabytes,
    Milliseconds,
    Positive,
    Seconds,
    Text,
    validated,
)

__all__ = ["Isolation", "Policy", "TrustTier"]


class Isolation(enum.Enum):
    """How much kernel isolation a worker must have before a plugin byte runs.

    ``STRICT`` (the default) refuses to start a plugin when any layer
    (namespaces, rlimits, Landlock, seccomp) is missing on this machine;
    ``BEST_EFFORT`` runs with the layers that exist and says which ones
    (``caplet info``, ``caplet doctor``, the decision log).
    """

    STRICT = "strict"
    BEST_EFFORT = "best-effort"


class TrustTier(enum.Enum):
    """How far caplet trusts a plugin (seed 004's trust levels, on caplet's runtime).

    Every tier runs in its own sandboxed process; the tiers differ in what
    policy may grant on top:

    * ``trusted``: first-party, i.e. signed by a key the user trusts (and
      its source allows it); may be granted broad path capabilities
      (``/``, home directories) when ``Policy.allow_broad_paths`` is set;
    * ``community`` (the default for an unsigned plugin): the full sandbox
      with the policy's limits, never broad paths;
    * ``untrusted`` (a bad signature, or a source the policy caps there):
      the full sandbox with the tighter ``untrusted_*`` limits, and no
      approved fast path: every enable audits the content afresh.
    """

    TRUSTED = "trusted"
    COMMUNITY = "community"
    UNTRUSTED = "untrusted"

    @property
    def rank(self) -> int:
        """0 for trusted, 1 community, 2 untrusted: a higher rank is less trust."""
        return _TIER_RANK[self]


_TIER_RANK = {TrustTier.TRUSTED: 0, TrustTier.COMMUNITY: 1, TrustTier.UNTRUSTED: 2}

#: The largest host id (uid_t/gid_t; (uid_t)-1 means "no change" to the kernel).
_MAX_ID = 0xFFFFFFFE


def _upper(value: object) -> object:
    """``"high"`` is the risk level ``HIGH`` (a file may write either)."""
    return value.upper() if isinstance(value, str) else value


Risk = Annotated[RiskLevel, BeforeValidator(_upper)]


def _not_root(value: object) -> object:
    if value == 0 and not isinstance(value, bool):
        raise ValueError(
            "workers never run as root; choose an unprivileged id (a root host's default is "
            "the caplet account, else 65532) or leave it unset"
        )
    return value


#: A host uid or gid for workers: never 0 (root), at most _MAX_ID.
HostId = Annotated[int, Strict(), Field(ge=1, le=_MAX_ID), BeforeValidator(_not_root)]


def _store_syntax(value: str) -> str:
    """The same syntax check :func:`caplet.open_store` makes, without opening anything
    (a policy is validated where no database may be created)."""
    try:
        sqlite_directory(value, Path("/"))
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    return value


#: A store address (``postgresql://…``, ``sqlite:///DIR``, a directory).
StoreAddress = Annotated[str, Strict(), AfterValidator(_store_syntax)]


@validated(PolicyError, "policy")
@dataclass(frozen=True, slots=True, config=MODEL_CONFIG)
class Policy:
    """What the embedding application or administrator allows.

    ``max_risk_level``: approval (and enabling) of a plugin whose audit is
    above it is refused; the approved fast path re-checks the *stored* risk
    level against the current policy, so tightening the policy takes effect
    on the next enable, after a restart too.

    Per-call deadlines come from the manifest's ``limits.timeout_ms`` bounded
    by ``max_timeout_ms``, else ``default_timeout_ms``; the largest result a
    call may return likewise from ``limits.max_output_kb`` bounded by
    ``max_output_kb`` (and by ``max_frame_bytes``).

    Circuit breaker (design.md section 5): ``failure_threshold`` consecutive
    failed calls open a plugin's breaker for ``cooldown_s`` seconds; a
    breaker that trips ``quarantine_after`` times within
    ``quarantine_window_s`` seconds quarantines the plugin until a human
    releases it (``caplet release``).

    ``cpu_cores``: the rate at which each worker (its threads and processes
    together) may use CPU, in cores: 1.0 is one core's worth of time, 0.5
    half of one, from a hundredth up (the cgroup's cpu controller, where there
    is one: ``caplet doctor`` says; ``cpu_s`` bounds how much it may use in
    all). A thread past it waits for the next 100 ms period, so a plugin that
    spins between calls cannot take the host's other cores.

    ``state_refresh_s``: a running worker's calls re-read the shared state
    (its plugin's quarantine) at least this often, so a quarantine recorded
    by another process or another node of a fleet (docs/fleet.md) stops its
    calls here within this bound; 0 re-reads on every call.

    ``store``: where approvals, audits, quarantine, the decision log and
    ``ctx.kv`` live (the address :func:`caplet.open_store` takes:
    ``postgresql://…`` for a fleet's shared store, docs/fleet.md). Unset
    means the SQLite database in the state directory. ``CAPLET_STORE``
    overrides it, and a ``store=`` argument overrides both. Prefer a
    password from libpq's ``PGPASSWORD``/``~/.pgpass`` over one written here;
    caplet never shows one (``caplet policy`` redacts it).

    ``network`` bounds brokered HTTP (``ctx.http``): allowed private
    networks, wildcard grants, sizes, time, rate and data budget
    (:class:`caplet._broker._policy.NetworkPolicy`, docs/network.md);
    ``context`` bounds the rest of ``ctx``: requests per call, ``ctx.kv``
    sizes, ``ctx.log`` rate, application results
    (:class:`caplet._host._context_limits.ContextLimits`).
    ``guest`` bounds guest code (``PluginHost.exec``): the warm pool's size,
    a snippet's deadline, memory, output and code size
    (:class:`caplet._host._guest_limits.GuestLimits`).
    ``log`` bounds the decision log: refusals recorded per plugin and minute,
    and how long rows are kept (:class:`caplet._host._log_limits.LogLimits`).
    ``metrics`` turns the per-plugin metrics on or off and says how often
    ``caplet stats`` sees them (:class:`caplet._host._metrics.MetricsSettings`);
    ``budget`` sets per-plugin CPU and network budgets per time window
    (:class:`caplet._host._budget.BudgetPolicy`); ``mcp`` says what
    ``caplet mcp`` offers an agent (:class:`caplet._host._mcp_policy.McpPolicy`).
    Trust tiers (:class:`TrustTier`): ``max_tier_directory`` and
    ``max_tier_distribution`` cap the tier of plugins from the plugins
    directory and from installed distributions; below that cap a plugin's
    signature decides (valid by a trusted key: trusted; none or by an
    unknown key: community; invalid: untrusted). ``require_signature``
    refuses to enable any plugin without a valid signature by a trusted key;
    ``trusted_keys`` adds minisign public keys (base64 lines) to the ones
    trusted in the state directory. ``untrusted_*`` are the tighter limits
    of untrusted plugins.

    ``worker_uid``/``worker_gid``: the unprivileged host ids workers of a
    root host run as (default: the ``caplet`` account, else 65532; a host
    that is not root runs them as itself). Never 0. See
    :mod:`caplet._sandbox._identity` and docs/security.md ("Who a worker is").

    Every value is checked at construction (strict types and bounds: a
    bool is no number, NaN no duration; enumerations also take their value,
    ``"best-effort"``, and nested limits a mapping); a bad one raises
    :class:`~caplet.PolicyError` naming the field, the value and the
    default. ``caplet.toml`` holds the same fields (:mod:`caplet._host._policy_file`).
    """

    max_risk_level: Risk = RiskLevel.MEDIUM
    isolation: Isolation = Isolation.STRICT
    memory_mb: Megabytes = 512
    cpu_s: Positive = 60
    cpu_cores: Cores = 1.0
    processes: Positive = 64
    default_timeout_ms: Milliseconds = 5_000
    max_timeout_ms: Milliseconds = 60_000
    max_frame_bytes: Annotated[int, Strict(), Field(ge=1024, le=2**31 - 1)] = 8 * 1024 * 1024
    start_timeout_s: Seconds = 10.0
    allow_broad_paths: Flag = False
    max_output_kb: Kilobytes = 1024
    failure_threshold: Positive = 3
    cooldown_s: Duration = 60.0
    quarantine_after: Positive = 3
    quarantine_window_s: Seconds = 3600.0
    state_refresh_s: Duration = 1.0
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    context: ContextLimits = field(default_factory=ContextLimits)
    guest: GuestLimits = field(default_factory=GuestLimits)
    log: LogLimits = field(default_factory=LogLimits)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    budget: BudgetPolicy = field(default_factory=BudgetPolicy)
    mcp: McpPolicy = field(default_factory=McpPolicy)
    require_signature: Flag = False
    trusted_keys: tuple[Text, ...] = ()
    max_tier_directory: TrustTier = TrustTier.TRUSTED
    max_tier_distribution: TrustTier = TrustTier.TRUSTED
    untrusted_memory_mb: Megabytes = 128
    untrusted_cpu_s: Positive = 10
    untrusted_cpu_cores: Cores = 0.5
    untrusted_processes: Positive = 8
    untrusted_timeout_ms: Milliseconds = 2_000
    untrusted_max_output_kb: Kilobytes = 256
    worker_uid: HostId | None = None
    worker_gid: HostId | None = None
    # repr=False: a postgresql:// address may carry a password.
    store: StoreAddress | None = field(default=None, repr=False)

    @model_validator(mode="after")
    def _deadlines_agree(self) -> Policy:
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError(
                f"default_timeout_ms ({self.default_timeout_ms}) is above max_timeout_ms "
                f"({self.max_timeout_ms}); lower default_timeout_ms or raise max_timeout_ms"
            )
        return self

    def max_tier(self, source: SourceKind) -> TrustTier:
        """The most trust any plugin from *source* can get."""
        if source is SourceKind.DIRECTORY:
            return self.max_tier_directory
        if source is SourceKind.DISTRIBUTION:
            return self.max_tier_distribution
        assert_never(source)

    def tier_for(self, source: SourceKind, signature: SignatureStatus) -> TrustTier:
        """The tier of a plugin from *source* whose signature has this status.

        A bad signature drops to untrusted and a missing one (or one by a key
        nobody trusts) to community: neither is ever silently ignored.
        """
        if signature is SignatureStatus.VALID:
            earned = TrustTier.TRUSTED
        elif signature is SignatureStatus.MISSING or signature is SignatureStatus.UNTRUSTED_KEY:
            earned = TrustTier.COMMUNITY
        elif signature is SignatureStatus.INVALID:
            earned = TrustTier.UNTRUSTED
        else:
            assert_never(signature)
        cap = self.max_tier(source)
        return earned if earned.rank >= cap.rank else cap

    def processes_limit(self, tier: TrustTier = TrustTier.COMMUNITY) -> int:
        """How many processes a worker of this tier may have."""
        if tier is TrustTier.UNTRUSTED:
            return min(self.processes, self.untrusted_processes)
        return self.processes

    def memory_limit_mb(self, declared: int | None, tier: TrustTier = TrustTier.COMMUNITY) -> int:
        """Address-space limit of a worker: the plugin's own, never above the policy's."""
        limit = self.memory_mb
        if tier is TrustTier.UNTRUSTED:
            limit = min(limit, self.untrusted_memory_mb)
        return limit if declared is None else min(declared, limit)

    def cpu_cores_limit(self, tier: TrustTier = TrustTier.COMMUNITY) -> float:
        """The CPU rate of a worker of this tier, in cores (``cpu_cores``)."""
        if tier is TrustTier.UNTRUSTED:
            return min(self.cpu_cores, self.untrusted_cpu_cores)
        return self.cpu_cores

    def cpu_limit_s(self, declared: int | None, tier: TrustTier = TrustTier.COMMUNITY) -> int:
        """CPU-seconds limit of a worker: the plugin's own, never above the policy's."""
        limit = self.cpu_s
        if tier is TrustTier.UNTRUSTED:
            limit = min(limit, self.untrusted_cpu_s)
        return limit if declared is None else min(declared, limit)

    def timeout_ms(self, declared: int | None, tier: TrustTier = TrustTier.COMMUNITY) -> int:
        """The deadline for one call: the plugin's own, never above the policy's."""
        if declared is None:
            timeout = self.default_timeout_ms
        else:
            timeout = min(declared, self.max_timeout_ms)
        if tier is TrustTier.UNTRUSTED:
            timeout = min(timeout, self.untrusted_timeout_ms)
        return timeout

    def max_output_bytes(
        self, declared_kb: int | None, tier: TrustTier = TrustTier.COMMUNITY
    ) -> int:
        """The largest reply frame a worker may send: the plugin's own, never above the policy's.

        This is the worker's ``max_frame_bytes``, so a request frame is held to
        it too (arguments and results share the one channel limit).
        """
        limit = self.max_output_kb
        if tier is TrustTier.UNTRUSTED:
            limit = min(limit, self.untrusted_max_output_kb)
        kb = limit if declared_kb is None else min(declared_kb, limit)
        return min(kb * 1024, self.max_frame_bytes)
