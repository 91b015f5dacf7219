"""What a hostile case is: the attack, the layer that should stop it, and how that shows.

Kept apart from the cases themselves so every family module, the bench that
runs them and the report share one vocabulary. The layers are a closed set
(:class:`Layer`): a case naming a layer that does not exist cannot be
written, and docs/security.md lists each one with what it stops.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, assert_never

from caplet._errors import CapletError, SelftestBreachError, SelftestMismatchError

if TYPE_CHECKING:
    from caplet._audit._model import AuditResult
    from caplet._host._host import PluginHost

__all__ = [
    "Arena",
    "Args",
    "Attempt",
    "Check",
    "Family",
    "HostileCase",
    "Layer",
    "Scenario",
    "breach_unless",
    "clip",
    "expect",
    "fixed_args",
    "no_args",
]


class Layer(enum.StrEnum):
    """Who is expected to stop an attack.

    The first five are the kernel layers ``caplet doctor`` reports (a
    machine may lack them); the rest are caplet's own and always present.
    """

    NAMESPACES = "namespaces"
    LANDLOCK = "landlock"
    SECCOMP = "seccomp"
    RLIMITS = "rlimits"
    CGROUP = "cgroup"
    DEADLINE = "deadline"
    FRAME_LIMIT = "frame-limit"
    PROTOCOL = "protocol"
    DECLARATIVE_API = "declarative-api"
    CONTEXT = "context"
    BROKER = "broker"
    CLEAN_WORKER = "clean-worker"
    IDENTITY = "identity"
    GRANTS = "grants"
    MANIFEST = "manifest"
    DANGER_GATE = "danger-gate"
    HASH_PIN = "hash-pin"
    LOCKFILE = "lockfile"
    CANARY = "canary"
    STATIC_FLOOR = "static-floor"
    PROMPT_DELIMITERS = "prompt-delimiters"

    @property
    def isolation_layer(self) -> str | None:
        """The ``caplet doctor`` layer this one is, or None for caplet's own layers."""
        match self:
            case Layer.NAMESPACES | Layer.LANDLOCK | Layer.SECCOMP | Layer.RLIMITS | Layer.CGROUP:
                return self.value
            case (
                Layer.DEADLINE
                | Layer.FRAME_LIMIT
                | Layer.PROTOCOL
                | Layer.DECLARATIVE_API
                | Layer.CONTEXT
                | Layer.BROKER
                | Layer.CLEAN_WORKER
                | Layer.IDENTITY
                | Layer.GRANTS
                | Layer.MANIFEST
                | Layer.DANGER_GATE
                | Layer.HASH_PIN
                | Layer.LOCKFILE
                | Layer.CANARY
                | Layer.STATIC_FLOOR
                | Layer.PROMPT_DELIMITERS
            ):
                return None
            case _:
                assert_never(self)


class Family(enum.StrEnum):
    """The attack families of issue 8, in the order the report lists them."""

    FILESYSTEM = "filesystem"
    NETWORK = "network"
    PROCESSES = "processes"
    RESOURCES = "resources"
    PROTOCOL = "protocol"
    INTROSPECTION = "introspection"
    SUPPLY_CHAIN = "supply-chain"
    AUDITOR = "auditor"


class Scenario(enum.Enum):
    """How the bench drives a case.

    * ``CALL``: the review is fooled (a clean audit is recorded), the plugin is
      enabled and ``main.run`` called: only the runtime layers stand;
    * ``GATED``: the real static audit is kept and enable is expected to refuse;
    * ``LOCKED``: approved with a fooled review and pinned in a lock file,
      then ``swap`` changes the live tree and a locked host tries to load it;
    * ``RESTART``: enabled and called, then ``swap`` changes the live tree,
      the worker dies (``main.crash``) and the next call must not load the
      changed code;
    * ``RACE``: enabled again and again on the gated host while a thread
      swaps ``plugin.py`` between the case's body and ``swap``'s (which the
      gate refuses); see :mod:`._race`;
    * ``AUDIT``: audited by the scripted model of :mod:`._gullible` that
      obeys instructions in the plugin's files, then approval is asked for;
    * ``AUDIT_OPERATOR_MODEL``: the same with a model that obeys only text
      outside the plugin's files (as its system prompt tells it).
    """

    CALL = "call"
    GATED = "gated"
    LOCKED = "locked"
    RESTART = "restart"
    RACE = "race"
    AUDIT = "audit"
    AUDIT_OPERATOR_MODEL = "audit-operator-model"


@dataclass(frozen=True, slots=True)
class Arena:
    """What the attacks aim at, all owned by the bench (under its temporary root).

    Nothing of the real user is a target: the "host" pid that signal and
    ptrace attacks aim at is a decoy process the bench started, the "home"
    and "state dir" are the bench's own, and the only network servers are on
    127.0.0.1 and 127.0.0.2. So an attack that a missing layer lets through
    hits the decoy, not the machine.
    """

    root: Path
    host_pid: int
    decoy_pid: int
    state_dir: Path
    plugins_dir: Path
    lockfile: Path
    #: Holds one directory per plugin, granted to it as ``fs.write``.
    grants_dir: Path
    #: A directory next to the grants that no plugin is granted.
    outside: Path
    home: Path
    tcp_port: int
    udp_port: int
    #: Name of a listening abstract unix socket (without the leading NUL).
    abstract_name: str
    #: A listening pathname unix socket, standing in for docker.sock or D-Bus.
    unix_path: Path
    #: A pathname datagram socket beside it, standing in for syslog's /dev/log.
    unix_dgram_path: Path
    #: A FIFO beside them that a host process reads (bytes a plugin writes are a breach).
    fifo_path: Path
    #: Holds ``outside``, a symbolic link to :attr:`outside` (a re-pointed grant).
    links_dir: Path
    #: An HTTP server on 127.0.0.1 that the default network policy must keep out of reach.
    http_port: int
    #: An HTTP server on 127.0.0.2, the one address the bench's policy allows.
    intranet_port: int
    #: Unique prefix for files a plugin creates in its private /tmp and /dev/shm.
    token: str
    #: A value only the host knows: in its environment and in an application handler.
    secret: str
    #: A descriptor the host holds open on :attr:`secret_file`.
    secret_fd: int
    #: System call name -> number on this machine.
    syscalls: Mapping[str, int]
    #: Request paths the 127.0.0.1 server (never to be reached) has seen.
    loopback_hits: Callable[[], tuple[str, ...]]
    #: Request paths the 127.0.0.2 server has seen.
    intranet_hits: Callable[[], tuple[str, ...]]
    #: How many ``ctx.log`` lines of a plugin reached the host's log.
    plugin_log_lines: Callable[[str], int]

    def out(self, plugin: str) -> Path:
        """The plugin's writable grant."""
        return self.grants_dir / plugin

    @property
    def secret_file(self) -> Path:
        return self.outside / "secret.txt"

    @property
    def state_db(self) -> Path:
        return self.state_dir / "caplet.db"

    @property
    def shm_file(self) -> Path:
        return Path("/dev/shm") / f"{self.token}-host"  # noqa: S108 - the attack's target

    def placeholders(self) -> dict[str, object]:
        """What a case's capabilities and manifest text may name as ``{field}``."""
        return {
            "http_port": self.http_port,
            "intranet_port": self.intranet_port,
            "token": self.token,
            "root": self.root,
            "state_dir": self.state_dir,
            "plugins_dir": self.plugins_dir,
            "grants": self.grants_dir,
            "ipc": self.unix_path.parent,
            "links": self.links_dir,
        }


@dataclass(frozen=True, slots=True)
class Attempt:
    """What the caller got from one attack.

    ``enabled``/``reason``: the enable (or load) outcome; ``value`` or
    ``error``: what ``main.run`` returned or raised; ``followup``: what a
    ``main.ping`` right after it returned (the worker's pid, 1 in its pid
    namespace) or the error it raised; ``same_worker``: whether that ping
    reached the worker that ran the attack; ``rejected``: what the worker
    refused to register; ``jail_pid``: pid 1 of the attacking worker's jail
    as the host sees it (0 when none ran); ``audit``: the audit of an
    ``AUDIT`` case; ``approved``: whether its approval went through.
    """

    plugin: str
    enabled: bool
    reason: str = ""
    jail_pid: int = 0
    value: object = None
    error: CapletError | None = None
    followup: object = None
    same_worker: bool = False
    rejected: tuple[str, ...] = ()
    audit: AuditResult | None = None
    approved: bool = False

    def describe(self) -> str:
        """One line for the case table."""
        if self.audit is not None:
            canaries = self.audit.canary_status
            return clip(
                f"audit {self.audit.risk_level.value}/{self.audit.verdict.value}, canaries "
                f"{canaries.value if canaries else 'not checked'}; approve "
                + ("accepted" if self.approved else "refused")
            )
        if not self.enabled:
            return clip(f"refused: {self.reason}")
        if self.error is not None:
            return clip(f"{type(self.error).__name__}: {self.error}")
        return clip(f"returned {self.value!r}")


Check = Callable[[Attempt, Arena, "PluginHost"], None]
Args = Callable[[Arena, str], tuple[object, ...]]


def no_args(_arena: Arena, _plugin: str) -> tuple[object, ...]:
    return ()


def fixed_args(*values: object) -> Args:
    """Arguments that do not depend on the arena."""

    def args(_arena: Arena, _plugin: str) -> tuple[object, ...]:
        return values

    return args


@dataclass(frozen=True, slots=True)
class HostileCase:
    """One attack: the plugin that tries it, who should stop it, and how that shows.

    ``body`` is the plugin's own code, appended to the shared prelude
    (:mod:`._prelude`); it defines ``run`` (and may redefine
    ``create_functions``). ``args`` builds the arguments of ``main.run`` from
    the arena. ``capabilities`` are declared besides the plugin's own
    writable grant (``fs.write:${config.out}``); ``{http_port}``-style
    placeholders are filled from :meth:`Arena.placeholders`, as are those in
    ``manifest`` (extra top-level manifest keys). ``files``, ``copies`` and ``symlinks``
    are added to the plugin's folder; ``swap`` replaces files in it after
    approval (``LOCKED``) or after the first call (``RESTART``). ``gap`` is
    non-empty when the expected layer is known not to stop the attack yet:
    the case must still be contained.
    """

    name: str
    family: Family
    attack: str
    layer: Layer
    body: str
    check: Check
    args: Args = no_args
    timeout_ms: int | None = None
    scenario: Scenario = Scenario.CALL
    capabilities: tuple[str, ...] = ()
    manifest: str = ""
    files: tuple[tuple[str, str], ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()
    #: Files of the host copied byte for byte into the plugin's folder (relative, source).
    copies: tuple[tuple[str, str], ...] = ()
    swap: tuple[tuple[str, str], ...] = ()
    functions: tuple[str, ...] = ("run", "ping", "crash")
    gap: str = ""


def expect(condition: object, message: str) -> None:
    """Fail the case's layer check (the attack may still have been contained)."""
    if not condition:
        raise SelftestMismatchError(message)


def breach_unless(condition: object, message: str) -> None:
    """Fail the case as *not contained*: the attack did what it tried to do."""
    if not condition:
        raise SelftestBreachError(message)


def clip(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
