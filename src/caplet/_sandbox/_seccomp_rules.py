"""The words the seccomp allowlist is written in: groups, argument rules, refusals.

:mod:`caplet._sandbox._seccomp_policy` is the reviewed data written with
these; :mod:`caplet._sandbox._seccomp` compiles it. An argument rule is
masked equality only (libseccomp's SCMP_CMP_MASKED_EQ) on the bits the
kernel reads, and :func:`none_of` builds "none of these values" from it.

This module runs inside workers (through the zygote): standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Conditional",
    "Group",
    "Masked",
    "Refusal",
    "Rule",
    "none_of",
]


_LOW32 = 0xFFFF_FFFF
_ALL64 = 0xFFFF_FFFF_FFFF_FFFF


@dataclass(frozen=True, slots=True)
class Masked:
    """``(args[arg] & mask) == value``: one comparison (libseccomp's SCMP_CMP_MASKED_EQ)."""

    arg: int
    mask: int
    value: int


#: A rule holds when every one of its comparisons does (libseccomp allows one
#: comparison per argument in a rule; several rules for a call are OR-ed).
Rule = tuple[Masked, ...]


@dataclass(frozen=True, slots=True)
class Group:
    """System calls allowed whatever their arguments, and why workers need them."""

    name: str
    why: str
    syscalls: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conditional:
    """A call allowed only when one of ``rules`` holds; otherwise refused and counted."""

    syscall: str
    why: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call refused straight from the filter with ``errno``: no notification, not counted.

    Only for calls that well-behaved code makes as a matter of course and
    whose failure it handles, where counting would fill the permission log
    with noise and hide the denials that matter. ``rules`` empty: always.
    """

    syscall: str
    errno: int
    why: str
    rules: tuple[Rule, ...] = ()


def _names(text: str) -> tuple[str, ...]:
    """Syscall names written as words, the way reviewers read a list of them."""
    return tuple(text.split())


def _low(arg: int, value: int) -> Rule:
    """The low 32 bits of ``arg`` equal ``value`` (the kernel reads an int there)."""
    return (Masked(arg, _LOW32, value),)


def none_of(arg: int, values: Iterable[int], width: int = 32) -> tuple[Rule, ...]:
    """Rules that together hold exactly when the low ``width`` bits of ``arg`` are none of
    ``values``.

    libseccomp has no "not equal" on 32 bits (SCMP_CMP_NE compares all 64,
    so a set high half would slip past), but masked equality can pin bits:
    the complement of a few values is a union of sub-cubes of the bit space,
    one rule each. Bits on which every refused value agrees come first
    (each contributes one rule: "this bit differs, the ones before agree"),
    so a common request that differs from the refused ones in bit 0
    matches the first rule; then the bits where they differ are split.
    """
    points = frozenset(values)
    agreeing = [b for b in range(width) if len({p >> b & 1 for p in points}) == 1]
    order = agreeing + [b for b in range(width) if b not in agreeing]
    rules: list[Rule] = []

    def split(left: frozenset[int], depth: int, mask: int, value: int) -> None:
        if not left:
            rules.append((Masked(arg, mask, value),))
            return
        if depth == len(order):
            return  # exactly one refused value: no rule covers it
        bit = order[depth]
        branches = [frozenset(p for p in left if p >> bit & 1 == choice) for choice in (0, 1)]
        # The branch no refused value takes becomes a rule at once, before
        # the deeper ones: the earlier a rule, the fewer bits it pins.
        for choice in sorted((0, 1), key=lambda c: len(branches[c])):
            split(branches[choice], depth + 1, mask | 1 << bit, value | choice << bit)

    split(points, 0, 0, 0)
    return tuple(rules)
