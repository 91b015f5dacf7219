"""What a worked example of a scanner rule is: a true positive, a near miss and an alias.

The examples themselves are in :mod:`caplet._scan._examples` (and the modules it gathers);
what they are used for is said there.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import assert_never

from caplet._capabilities._model import Capability
from caplet._scan._model import ScanMode
from caplet._scan._rules import RULES

__all__ = ["FileTree", "Link", "RuleExample", "Variant"]


class Variant(enum.Enum):
    """Which of an example's three spellings is meant."""

    BAD = "bad"
    GOOD = "good"
    ALIAS = "alias"


@dataclass(frozen=True, slots=True)
class Link:
    """A symbolic link in an example tree, pointing at ``target`` (never followed)."""

    target: str


#: A file tree: POSIX paths relative to the tree's root, each with its bytes
#: (or a :class:`Link`). Parent directories are implied.
FileTree = tuple[tuple[str, bytes | Link], ...]


@dataclass(frozen=True, slots=True)
class RuleExample:
    """A true positive, a near miss and an alias for one rule.

    ``mode`` is the scan mode the example is meant for: it decides the
    severity ``bad`` must have (a capability in package mode is only an
    observed capability, info). ``capabilities`` are the declared ones
    (plugin mode); examples declare none that would cover their rule.
    ``alias`` is ``None`` only where no other spelling exists (a comment in
    :data:`CANONICAL` says why). A source example is scanned as
    ``filename``. For a tree example, ``archive`` means the
    tree is one archive, scanned as such (not as a directory), ``max_file_bytes``
    overrides the scanner's limit, and ``disk_only`` says why the
    self-check, which never touches the disk, cannot replay it.
    """

    rule_id: str
    mode: ScanMode
    bad: str
    good: str
    alias: str | None
    filename: str = "plugin.py"
    capabilities: tuple[Capability, ...] = ()
    files: FileTree = ()
    good_files: FileTree = ()
    alias_files: FileTree = ()
    archive: bool = False
    max_file_bytes: int | None = None
    disk_only: str = ""
    known_gap: str = ""
    gap_in: Variant | None = None

    def __post_init__(self) -> None:
        if self.rule_id not in RULES:
            raise ValueError(f"example for unknown rule {self.rule_id}")
        if bool(self.known_gap) != (self.gap_in is not None):
            raise ValueError(f"{self.rule_id}: known_gap and gap_in go together")
        if self.files and not self.good_files:
            raise ValueError(f"{self.rule_id}: a tree example needs good_files")
        if self.files and bool(self.alias_files) != (self.alias is not None):
            raise ValueError(f"{self.rule_id}: alias and alias_files go together")

    @property
    def is_tree(self) -> bool:
        """True when the example is a file tree rather than one source file."""
        return bool(self.files)

    def source(self, variant: Variant) -> str | None:
        """The Python source of ``variant`` (``None`` for a tree or a missing alias)."""
        if self.is_tree:
            return None
        match variant:
            case Variant.BAD:
                return self.bad
            case Variant.GOOD:
                return self.good
            case Variant.ALIAS:
                return self.alias
            case _:
                assert_never(variant)

    def tree(self, variant: Variant) -> FileTree | None:
        """The file tree of ``variant`` (``None`` for a source example or a missing alias)."""
        if not self.is_tree:
            return None
        match variant:
            case Variant.BAD:
                return self.files
            case Variant.GOOD:
                return self.good_files
            case Variant.ALIAS:
                return self.alias_files or None
            case _:
                assert_never(variant)

    def gap(self, variant: Variant) -> str | None:
        """Why ``variant`` is known to be scanned wrongly today, if it is."""
        return self.known_gap if self.gap_in is variant else None
