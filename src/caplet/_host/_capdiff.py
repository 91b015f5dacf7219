"""Comparing capability sets: the approved subset of a lock entry, and an update's diff.

Capabilities are compared by meaning, never by spelling (the capability
model excludes ``declared`` from equality): ``fs.read:/data/`` and
``fs.read:/data`` are one grant, so re-spelling a capability is not an
escalation. An update's new capability is *covered* (not an escalation) by
an old one that grants at least as much: the same grant, a path inside an
approved (non-glob) directory of the same kind, or a URL prefix inside an
approved one of the same origin. Everything else is an addition, and seed
004 requires explicit consent for it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from caplet._capabilities._model import Capability, FsCapability, NetHttpCapability
from caplet._capabilities._parse import parse_capability
from caplet._errors import CapabilityError

__all__ = ["CapabilityDiff", "covers", "diff_capabilities", "parse_approved"]


@dataclass(frozen=True, slots=True)
class CapabilityDiff:
    """What an update changes: capabilities ``added`` (need consent), ``removed``, ``kept``."""

    added: tuple[Capability, ...]
    removed: tuple[Capability, ...]
    kept: tuple[Capability, ...]

    @property
    def escalates(self) -> bool:
        """True when the new version asks for anything the old approval did not grant."""
        return bool(self.added)


def covers(old: Capability, new: Capability) -> bool:
    """True when granting *old* already grants everything *new* would."""
    if old == new:
        return True
    if old.templated or new.templated:
        return False
    if isinstance(old, FsCapability) and isinstance(new, FsCapability):
        if old.kind is not new.kind or old.is_glob:
            return False
        return new.path == old.path or new.path.startswith(old.path.rstrip("/") + "/")
    if isinstance(old, NetHttpCapability) and isinstance(new, NetHttpCapability):
        same_origin = (old.scheme, old.host, old.port, old.wildcard) == (
            new.scheme,
            new.host,
            new.port,
            new.wildcard,
        )
        return same_origin and (
            new.path_prefix == old.path_prefix or new.path_prefix.startswith(old.path_prefix + "/")
        )
    return False


def diff_capabilities(old: Iterable[Capability], new: Iterable[Capability]) -> CapabilityDiff:
    """The diff from an approved set *old* to a new declared set *new* (each in input order)."""
    old_list = list(dict.fromkeys(old))
    new_list = list(dict.fromkeys(new))
    added = tuple(n for n in new_list if not any(covers(o, n) for o in old_list))
    kept = tuple(n for n in new_list if n not in added)
    removed = tuple(o for o in old_list if o not in new_list)
    return CapabilityDiff(added=added, removed=removed, kept=kept)


def parse_approved(
    texts: Sequence[str], *, config_names: Collection[str], where: str
) -> tuple[Capability, ...]:
    """Parse approved capability strings (from a lock entry or an approval record).

    Broad paths parse here (whether they may be granted is the policy's call
    at enable time); a string that does not parse at all is a
    :class:`CapabilityError` that says *where* it came from.
    """
    parsed: list[Capability] = []
    for text in texts:
        try:
            parsed.append(parse_capability(text, config_names=config_names, allow_broad=True))
        except CapabilityError as exc:
            raise CapabilityError(f"{where}: {exc}") from exc
    return tuple(parsed)
