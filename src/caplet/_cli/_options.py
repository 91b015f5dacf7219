"""The options every command may share (``--plugins-dir``, ``--json``, the policy flags ...).

:class:`Common` names them for :func:`caplet._cli._command.command`, which
adds the ones a command takes to its signature; :class:`Options` holds
their values for the command's run (the policy flags as
:class:`PolicyOverride`s on top of the policy file).
"""

from __future__ import annotations

import enum
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from caplet._cli._arguments import usable_path, usable_text
from caplet._host._policy_override import POLICY_ENV, POLICY_FILE, PolicyOverride
from caplet._toml import TomlLimitError, parse_toml

__all__ = [
    "SHARED",
    "Common",
    "ConsentFlag",
    "Name",
    "Options",
    "StaticOnlyFlag",
    "YesFlag",
]


class Common(enum.Flag):
    """Which shared options a command takes."""

    PLUGINS_DIR = enum.auto()
    STATE_DIR = enum.auto()
    LOCKFILE = enum.auto()
    LOCKED = enum.auto()
    JSON = enum.auto()
    #: ``--policy FILE``: the policy file (default: caplet.toml beside the plugins directory).
    POLICY = enum.auto()
    #: The ad-hoc policy flags: ``--allow-network`` ... ``--set FIELD=VALUE``.
    POLICY_FLAGS = enum.auto()
    #: ``-q``: hide the plugins' ctx.log lines.
    QUIET = enum.auto()
    #: ``--red-team``: the static gate off (``PluginHost(red_team=True)``), said loudly.
    RED_TEAM = enum.auto()
    NONE = 0
    #: A command that opens a host on the plugins directory.
    HOST = PLUGINS_DIR | STATE_DIR | LOCKFILE | LOCKED | POLICY | JSON
    #: The same, where the command decides locked mode itself (lock, verify).
    HOST_UNLOCKED = PLUGINS_DIR | STATE_DIR | LOCKFILE | POLICY | JSON
    #: The plugins and state directories only.
    DIRS = PLUGINS_DIR | STATE_DIR | POLICY | JSON
    #: A command that runs plugin code: the policy flags and -q too.
    RUNS = HOST | POLICY_FLAGS | QUIET | RED_TEAM


_DEFAULT_PLUGINS = Path("plugins")

PluginsDir = Annotated[
    Path,
    typer.Option(
        "--plugins-dir",
        "-p",
        envvar="CAPLET_PLUGINS_DIR",
        help="Directory holding one folder per plugin.",
        show_default=True,
        callback=usable_path,
    ),
]
StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="CAPLET_STATE_DIR",
        help="Where approvals, audits and the decision log live (default: the user state dir).",
        callback=usable_path,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of text.")]
LockfileOption = Annotated[
    Path | None,
    typer.Option(
        "--lockfile",
        envvar="CAPLET_LOCKFILE",
        help="The lock file (default: caplet.lock beside the plugins directory).",
        callback=usable_path,
    ),
]
LockedOption = Annotated[
    bool | None,
    typer.Option(
        "--locked/--no-locked",
        help="Locked mode: only plugins pinned in the lock file load "
        "(default: on when CAPLET_LOCKED=1 or CI=true).",
    ),
]
YesFlag = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
ConsentFlag = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Consent to enabling a plugin that is not approved, for this process, without "
        "asking (its audit is still shown on stderr).",
    ),
]
StaticOnlyFlag = Annotated[
    bool,
    typer.Option(
        "--static-only",
        help="Audit static-only although CAPLET_LLM_* configure a model (this run only; "
        "labelled so, never cached).",
    ),
]
Name = Annotated[str, typer.Argument(help="Plugin name.", callback=usable_text)]

PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help=f"The policy file (default: ${POLICY_ENV}, else {POLICY_FILE}, or the tool.caplet "
        "table of pyproject.toml, beside the plugins directory); `caplet policy` shows it.",
        callback=usable_path,
    ),
]
AllowNetwork = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-network",
        metavar="CIDR",
        help="Let brokered HTTP reach this network, e.g. 127.0.0.0/8 for a local test server "
        "(repeatable; adds to the policy's network.allowed_networks).",
    ),
]
AllowWildcard = Annotated[
    bool,
    typer.Option(
        "--allow-wildcard-hosts",
        help="Honour net.http grants of *.domain (policy network.allow_wildcard_hosts).",
    ),
]
MaxRisk = Annotated[
    str | None,
    typer.Option(
        "--max-risk",
        metavar="LEVEL",
        help="The highest audited risk that may be approved or enabled: LOW, MEDIUM, HIGH or "
        "CRITICAL (policy max_risk_level).",
    ),
]
IsolationOption = Annotated[
    str | None,
    typer.Option(
        "--isolation",
        metavar="MODE",
        help="strict (refuse when a layer is missing) or best-effort (policy isolation).",
    ),
]
PolicySet = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="FIELD=VALUE",
        help="Set any policy field for this run, e.g. --set guest.timeout_ms=10000 "
        "(VALUE is TOML; a bare word is text; repeatable).",
    ),
]
RedTeamFlag = Annotated[
    bool,
    typer.Option(
        "--red-team",
        help="Red-team mode: turn the static gate OFF so plugins the review would refuse run, "
        "bounded by the sandbox alone. For red-team and selftest runs only: said on stderr, "
        "labelled in the decision log and the JSON output, refused in locked mode.",
    ),
]
QuietFlag = Annotated[
    bool, typer.Option("--quiet", "-q", help="Do not show the plugins' ctx.log lines.")
]

#: Each shared option: its flag, its parameter (name, annotation, default).
SHARED: tuple[tuple[Common, str, object, object], ...] = (
    (Common.POLICY_FLAGS, "allow_network", AllowNetwork, None),
    (Common.POLICY_FLAGS, "allow_wildcard_hosts", AllowWildcard, False),
    (Common.POLICY_FLAGS, "max_risk", MaxRisk, None),
    (Common.POLICY_FLAGS, "isolation", IsolationOption, None),
    (Common.POLICY_FLAGS, "policy_set", PolicySet, None),
    (Common.POLICY, "policy", PolicyOption, None),
    (Common.PLUGINS_DIR, "plugins_dir", PluginsDir, _DEFAULT_PLUGINS),
    (Common.STATE_DIR, "state_dir", StateDir, None),
    (Common.LOCKFILE, "lockfile", LockfileOption, None),
    (Common.LOCKED, "locked", LockedOption, None),
    (Common.QUIET, "quiet", QuietFlag, False),
    (Common.RED_TEAM, "red_team", RedTeamFlag, False),
    (Common.JSON, "as_json", JsonFlag, False),
)


@dataclass(frozen=True, slots=True)
class Options:
    """The shared options' values (those a command does not take keep their defaults)."""

    plugins_dir: Path = _DEFAULT_PLUGINS
    state_dir: Path | None = None
    lockfile: Path | None = None
    locked: bool | None = None
    as_json: bool = False
    policy: Path | None = None
    overrides: tuple[PolicyOverride, ...] = ()
    quiet: bool = False
    red_team: bool = False

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Options:
        """The options from the shared parameters' values (the policy flags as overrides)."""
        overrides: list[PolicyOverride] = []
        for cidr in values.pop("allow_network", None) or ():
            overrides.append(
                PolicyOverride("network.allowed_networks", cidr, "--allow-network", appended=True)
            )
        if values.pop("allow_wildcard_hosts", False):
            overrides.append(
                PolicyOverride("network.allow_wildcard_hosts", True, "--allow-wildcard-hosts")
            )
        for key, flag, field in (
            ("max_risk", "--max-risk", "max_risk_level"),
            ("isolation", "--isolation", "isolation"),
        ):
            value = values.pop(key, None)
            if value is not None:
                overrides.append(PolicyOverride(field, value, flag))
        for entry in values.pop("policy_set", None) or ():
            overrides.append(_set_override(entry))
        return cls(**values, overrides=tuple(overrides))


def _set_override(entry: str) -> PolicyOverride:
    """``FIELD=VALUE`` of ``--set``: VALUE is a TOML value, or else the text itself."""
    field, sep, text = entry.partition("=")
    field = field.strip()
    if not sep or not field or not all(part.isidentifier() for part in field.split(".")):
        raise typer.BadParameter(
            f"{entry!r} is not FIELD=VALUE (e.g. --set guest.timeout_ms=10000)",
            param_hint="--set",
        )
    try:
        value: object = parse_toml(f"value = {text}")["value"]
    except (tomllib.TOMLDecodeError, TomlLimitError):
        # Past TOML's bounds (an integer past 64 bits raised out of tomllib, attack29):
        # the text itself, which the field's own check refuses, naming --set.
        value = text
    return PolicyOverride(field, value, f"--set {field}")
