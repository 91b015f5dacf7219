"""The locked-mode gate: a plugin runs only as ``caplet.lock`` pins it (seed 001, layer 14).

For each discovered plugin, :func:`check_entry` says whether the lock lets it
load, and with which capabilities:

* no entry, a digest that differs from the content hash, a ``version``
  that is not the manifest's (issue 14: ``verify`` ignored it), a different
  source, approved capabilities that are not a subset of the declared ones,
  or (when the entry pins a signer) a signature that does not verify with
  that key: the plugin is *inert*, never loaded and never prompted for,
  with a message saying which problem and how to fix it;
* otherwise it may load, and only with the declared capabilities the entry
  approves: a declared capability the lock does not approve is withheld,
  and whatever needs it says so with :func:`withheld_message` (naming the
  lock entry and the command that grants it), never "declare it": it is
  declared.

:func:`stale_entries` reports lock entries whose plugin is gone.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from caplet._capabilities._model import Capability
from caplet._errors import CapabilityError, SignatureError
from caplet._host._capdiff import parse_approved
from caplet._manifest._model import Manifest
from caplet._trust._lockfile import LockEntry, Lockfile
from caplet._trust._signing import SignatureStatus, check_plugin_signature, parse_public_key
from caplet._trust._source import PluginSource

__all__ = [
    "LockProblem",
    "LockProblemKind",
    "LockVerdict",
    "check_entry",
    "stale_entries",
    "withheld_message",
]


class LockProblemKind(enum.Enum):
    """Why a plugin is inert in locked mode (or, for ``STALE``, why an entry is useless)."""

    NO_ENTRY = "no-entry"
    DIGEST_MISMATCH = "digest-mismatch"
    VERSION_MISMATCH = "version-mismatch"
    SOURCE_MISMATCH = "source-mismatch"
    NOT_DECLARED = "not-declared"
    SIGNATURE = "signature"
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class LockProblem:
    """One problem, as one line a person can act on."""

    plugin: str
    kind: LockProblemKind
    message: str


@dataclass(frozen=True, slots=True)
class LockVerdict:
    """The lock's answer for one plugin: the entry, the problem (None: it may load), the grant."""

    entry: LockEntry | None
    problem: LockProblem | None
    granted: tuple[Capability, ...] = ()
    withheld: tuple[Capability, ...] = ()


def _repin(name: str) -> str:
    return (
        f"review it, then approve and re-pin it (caplet audit {name} && caplet approve {name} "
        f"&& caplet lock {name}) and commit caplet.lock"
    )


def check_entry(
    lock: Lockfile,
    *,
    manifest: Manifest,
    digest: str,
    source: PluginSource,
    plugin_dir: Path,
) -> LockVerdict:
    """Whether *lock* lets this plugin load, and with which of its declared capabilities."""
    name = manifest.name

    def inert(kind: LockProblemKind, why: str, entry: LockEntry | None) -> LockVerdict:
        message = f"plugin {name!r} is inert in locked mode: {why}"
        return LockVerdict(entry=entry, problem=LockProblem(name, kind, message))

    entry = lock.entry(name)
    if entry is None:
        return inert(
            LockProblemKind.NO_ENTRY,
            f"the lock file {lock.path} has no entry for it; {_repin(name)}",
            None,
        )
    if entry.digest != digest:
        return inert(
            LockProblemKind.DIGEST_MISMATCH,
            f"its content changed since it was locked (lock file {lock.path} pins "
            f"{entry.digest}, the plugin at {plugin_dir} hashes to {digest}); restore the "
            f"locked version, or {_repin(name)}",
            entry,
        )
    if not _same_version(entry.version, manifest.version):
        return inert(
            LockProblemKind.VERSION_MISMATCH,
            f"the lock file {lock.path}, plugin {name!r}, field 'version' says "
            f"{entry.version!r}, but its manifest says {manifest.version!r}; the entry was "
            f"edited or does not describe this plugin: {_repin(name)}",
            entry,
        )
    if entry.source is not source.kind or (
        entry.distribution is not None and entry.distribution != source.distribution
    ):
        pinned = entry.source.value + (f" {entry.distribution}" if entry.distribution else "")
        return inert(
            LockProblemKind.SOURCE_MISMATCH,
            f"the lock file {lock.path} pins it from {pinned}, but it was found as {source}; "
            f"install it from the pinned source, or {_repin(name)}",
            entry,
        )
    config_names = [f.name for f in manifest.config]
    try:
        approved = parse_approved(
            entry.capabilities,
            config_names=config_names,
            where=f"lock file {lock.path}, plugin {name!r}, field 'capabilities'",
        )
    except CapabilityError as exc:
        return inert(LockProblemKind.NOT_DECLARED, f"{exc}; {_repin(name)}", entry)
    declared = manifest.capabilities
    undeclared = [a for a in approved if a not in declared]
    if undeclared:
        texts = ", ".join(a.declared for a in undeclared)
        return inert(
            LockProblemKind.NOT_DECLARED,
            f"the lock file {lock.path} approves capabilities its manifest does not declare "
            f"({texts}), so the entry does not describe this plugin; {_repin(name)}",
            entry,
        )
    if entry.signature is not None:
        problem = _signature_problem(entry, plugin_dir, digest, lock.path)
        if problem:
            return inert(LockProblemKind.SIGNATURE, problem, entry)
    granted = tuple(c for c in declared if c in approved)
    withheld = tuple(c for c in declared if c not in approved)
    return LockVerdict(entry=entry, problem=None, granted=granted, withheld=withheld)


def _same_version(pinned: str, declared: str) -> bool:
    """PEP 440 equality (``1.0`` is ``1.0.0``), else the exact text."""
    try:
        return Version(pinned) == Version(declared)
    except ValueError:  # InvalidVersion, or a segment past the int digit limit (attack29)
        return pinned == declared


def withheld_message(name: str, withheld: Sequence[Capability], lock_path: Path) -> str:
    """Why *withheld* capabilities (declared, not approved by the lock) are not granted.

    Names the lock file, the entry and the consent command: the fix is a
    reviewed re-pin, not a change to the manifest.
    """
    texts = ", ".join(c.declared for c in withheld)
    them = "it" if len(withheld) == 1 else "them"
    return (
        f"plugin {name!r} declares {texts}, but its entry in the lock file {lock_path} does "
        f"not approve {them} (withheld when it was pinned); to grant {them}, review the "
        f"plugin and re-pin it without --withhold (caplet approve {name} && caplet lock "
        f"{name}), then commit caplet.lock"
    )


def _signature_problem(entry: LockEntry, plugin_dir: Path, digest: str, lock_path: Path) -> str:
    assert entry.signature is not None
    try:
        key = parse_public_key(entry.signature.public_key)
    except SignatureError as exc:
        return (
            f"the lock file {lock_path}, plugin {entry.name!r}, field 'signature.public_key' "
            f"is not a public key ({exc}); {_repin(entry.name)}"
        )
    check = check_plugin_signature(plugin_dir, digest, {key.key_id_hex: key})
    if check.status is SignatureStatus.VALID:
        return ""
    return (
        f"the lock file {lock_path} requires a signature by key {entry.signature.key_id}, "
        f"but {check.detail}; get the publisher's signed release, or {_repin(entry.name)}"
    )


def stale_entries(lock: Lockfile, names: Collection[str]) -> list[LockProblem]:
    """Entries of *lock* for plugins not among *names* (the discovered ones)."""
    return [
        LockProblem(
            entry.name,
            LockProblemKind.STALE,
            f"lock file {lock.path} has a stale entry {entry.name!r}: no such plugin was "
            f"found; remove the entry (caplet lock, which re-pins every approved plugin) or "
            "restore the plugin",
        )
        for entry in lock.entries
        if entry.name not in names
    ]
