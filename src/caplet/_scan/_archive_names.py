"""A member's name: normalised, or refused with why; duplicates and the sdist's top folder.

One rule for both formats: a name that escapes the extraction directory, or
means different files to different tools, is a problem; a second member of
one name (after Unicode normalisation) is a problem, since the installer
unpacks the last one and a scanner might read the first.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from caplet._marks import stream_safe
from caplet._scan._archive_model import ArchiveProblemKind

__all__ = [
    "DUPLICATE_DETAIL",
    "Names",
    "check_name",
    "display_name",
    "readable_name",
]

#: A second member of one name is reported and read too: the installer keeps the last copy.
DUPLICATE_DETAIL: Final = (
    "second member with this name; scanned too (an installer keeps the last copy)"
)

# Trojan Source (CVE-2021-42574): bidirectional controls reorder what is shown.
_BIDI: Final = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def display_name(name: str) -> str:
    """The name as it can be shown: escapes for control, bidi and undecodable characters."""
    return name if name.isprintable() else repr(name)[1:-1]


def readable_name(name: str) -> str | None:
    """The path an installer writes a member of an unsafe name to, as the scanner reads
    it (``None``: nowhere inside the tree). A name with a control or bidi character
    is extracted as it is (``x\x1b.pth`` in site-packages runs at every start: site(7)
    reads every ``.pth``), one with a backslash lands under folders on Windows
    (``pkg\\__init__.py``): reported, and read too (attack8), under the name with each
    such character shown as ``?`` and each backslash a ``/``."""
    name = name.split("\0", 1)[0]  # zipfile (so pip) cuts a name at a NUL
    shown = "".join(
        "?" if ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF or c in _BIDI else c
        for c in name.replace("\\", "/")
    )
    checked = check_name(shown)
    return None if isinstance(checked, tuple) else checked


def check_name(name: str) -> str | tuple[ArchiveProblemKind, str]:
    """The normalised relative path, or why the name is refused.

    Empty and ``.`` components are dropped (``./pkg//a.py`` is ``pkg/a.py``);
    any ``..`` is refused even when it would stay inside, as PEP 706's data
    filter and most installers cannot agree on where it lands.
    """
    # Printable ASCII (nearly every real name) has no control, surrogate or
    # bidi character: skip the per-character loop, the archive hot path.
    safe = name.isascii() and name.isprintable()
    for char in "" if safe else name:
        code = ord(char)
        if code < 0x20 or code == 0x7F:
            return ArchiveProblemKind.UNSAFE_NAME, f"control character U+{code:04X} in the name"
        if 0xD800 <= code <= 0xDFFF:
            return ArchiveProblemKind.UNSAFE_NAME, "the name is not valid UTF-8"
        if char in _BIDI:
            return (
                ArchiveProblemKind.UNSAFE_NAME,
                f"bidirectional control U+{code:04X} in the name (Trojan Source, CVE-2021-42574)",
            )
    if "\\" in name:
        return ArchiveProblemKind.UNSAFE_NAME, "backslash in the name, a path separator on Windows"
    if len(name) >= 2 and name[1] == ":" and name[0].isascii() and name[0].isalpha():
        return ArchiveProblemKind.UNSAFE_NAME, "drive letter: an absolute path on Windows"
    if name.startswith("/"):
        return ArchiveProblemKind.ABSOLUTE_PATH, "absolute path"
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        return ArchiveProblemKind.PARENT_TRAVERSAL, "'..' component in the path"
    return "/".join(parts)


class Names:
    """Duplicate detection and top-folder stripping, shared by both formats."""

    def __init__(self, top: str | None) -> None:
        self.top = top
        self._seen: set[str] = set()

    def strip(self, relative: str) -> str:
        if self.top is not None and relative.startswith(self.top + "/"):
            return relative[len(self.top) + 1 :]
        return relative

    def is_duplicate(self, relative: str) -> bool:
        # NFC: "é" precomposed and decomposed are one file on macOS (NFD) filesystems.
        # Runs of marks bounded first: NFC sorts each in quadratic time (attack23). Two
        # names told apart only past a joiner are read as two; each is scanned anyway.
        key = unicodedata.normalize("NFC", stream_safe(relative))
        if key in self._seen:
            return True
        self._seen.add(key)
        return False
