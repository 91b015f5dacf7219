"""What reading an archive deals in: formats, limits, members and the problems found.

The vocabulary of :mod:`caplet._scan._archive` and its readers, apart so the
format detection, the name checks and the per-format readers share it
without importing each other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final, assert_never

__all__ = [
    "DEFAULT_LIMITS",
    "READ_CHUNK",
    "ArchiveFormat",
    "ArchiveLimits",
    "ArchiveMember",
    "ArchiveProblem",
    "ArchiveProblemKind",
]

#: Bytes asked of a decompressor per read. A cap is crossed by at most this
#: much (tarfile reads its stream in 10 KiB records, below this).
READ_CHUNK: Final = 64 * 1024

_MIB: Final = 1024 * 1024


class ArchiveFormat(enum.Enum):
    """What the bytes of an archive say it is (never only its name)."""

    ZIP = "zip"
    TAR = "tar"
    TAR_GZ = "tar.gz"
    TAR_BZ2 = "tar.bz2"
    TAR_XZ = "tar.xz"


class ArchiveProblemKind(enum.Enum):
    """A trick or a damage found in an archive; ``rationale`` says why it matters."""

    ABSOLUTE_PATH = "absolute-path"
    PARENT_TRAVERSAL = "parent-traversal"
    UNSAFE_NAME = "unsafe-name"
    LINK = "link"
    SPECIAL_FILE = "special-file"
    DUPLICATE = "duplicate"
    MEMBER_TOO_LARGE = "member-too-large"
    TOTAL_TOO_LARGE = "total-too-large"
    TOO_MANY_MEMBERS = "too-many-members"
    COMPRESSION_RATIO = "compression-ratio"
    NESTED_ARCHIVE = "nested-archive"
    UNREADABLE = "unreadable"
    FORMAT_MISMATCH = "format-mismatch"
    CORRUPT = "corrupt"

    @property
    def rationale(self) -> str:
        """One line on why this is refused, with the write-up behind it (for findings)."""
        return _rationale(self)


def _rationale(kind: ArchiveProblemKind) -> str:
    match kind:
        case ArchiveProblemKind.ABSOLUTE_PATH:
            return (
                "an absolute member path is written outside the extraction directory"
                " (tarfile path traversal, CVE-2007-4559)"
            )
        case ArchiveProblemKind.PARENT_TRAVERSAL:
            return (
                "a '..' component climbs out of the extraction directory"
                " (Zip Slip, Snyk 2018; CVE-2007-4559)"
            )
        case ArchiveProblemKind.UNSAFE_NAME:
            return (
                "a name with control or bidirectional characters, a backslash or a drive"
                " letter means different files to different tools and systems"
            )
        case ArchiveProblemKind.LINK:
            return (
                "a symlink or hard link can point outside the package and redirect later"
                " writes (CVE-2007-4559; PEP 706 refuses them)"
            )
        case ArchiveProblemKind.SPECIAL_FILE:
            return (
                "a device, FIFO or unknown member type has no place in a Python package"
                " (PEP 706 data filter) and was not read"
            )
        case ArchiveProblemKind.DUPLICATE:
            return (
                "a name that appears twice lets a scanner read one copy while the"
                " installer unpacks the other (the last one wins)"
            )
        case ArchiveProblemKind.MEMBER_TOO_LARGE:
            return "a member over the per-member cap was not read, so its content was not scanned"
        case ArchiveProblemKind.TOTAL_TOO_LARGE:
            return (
                "the archive expands beyond the total cap; reading stopped so that a"
                " decompression bomb cannot exhaust memory"
            )
        case ArchiveProblemKind.TOO_MANY_MEMBERS:
            return "more members than the cap; reading stopped (millions of tiny members)"
        case ArchiveProblemKind.COMPRESSION_RATIO:
            return (
                "far more compressible than any source code: the mark of a decompression"
                " bomb (Fifield, 'A better zip bomb', WOOT 2019)"
            )
        case ArchiveProblemKind.NESTED_ARCHIVE:
            return "an archive inside the archive is not opened, so code hidden in it is not seen"
        case ArchiveProblemKind.UNREADABLE:
            return (
                "a member caplet cannot decompress safely (encrypted, or a method without a"
                " bounded reader) may hide code"
            )
        case ArchiveProblemKind.FORMAT_MISMATCH:
            return (
                "the bytes say another format than the name, or two formats at once:"
                " tools may then unpack different contents"
            )
        case ArchiveProblemKind.CORRUPT:
            return (
                "a damaged or truncated archive: what follows the damage was not read, and"
                " malformed archives are a known way to evade scanners"
            )
        case _:
            assert_never(kind)


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Caps on what reading one archive may cost.

    ``max_ratio`` bounds decompressed/compressed bytes, checked only past
    ``ratio_floor_bytes`` (small files compress unpredictably and cost nothing).
    Source code compresses 3-10 fold; deflate tops out near 1032:1, which is
    what zip bombs use (Fifield 2019).
    """

    max_member_bytes: int = 64 * _MIB
    max_total_bytes: int = 1024 * _MIB
    max_members: int = 100_000
    max_ratio: int = 200
    ratio_floor_bytes: int = 1 * _MIB

    def __post_init__(self) -> None:
        for name in (
            "max_member_bytes",
            "max_total_bytes",
            "max_members",
            "max_ratio",
            "ratio_floor_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"ArchiveLimits.{name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS: Final = ArchiveLimits()


@dataclass(frozen=True, slots=True)
class ArchiveMember:
    """One regular file of an archive.

    ``relative`` is a normalised POSIX path inside the package: an sdist's
    single top-level folder (``requests-2.32.3/``) is stripped, a wheel has
    none.
    """

    relative: str
    data: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class ArchiveProblem:
    """A member (or, with ``relative == ""``, the archive) that was refused.

    ``decompressed`` is how many bytes the archive had produced when the
    problem was found: the cost a bomb managed to impose before refusal.
    ``target`` is, for a link, the member it points to (a normalised relative path
    as ``relative`` is; empty: outside the archive, or not a link). ``data`` is, for a
    nested archive within the caps, its bytes (the scanner opens a zip among them:
    ``sys.path.insert(0, "deps.zip")`` imports from it, attack8).
    """

    relative: str
    kind: ArchiveProblemKind
    detail: str
    decompressed: int = 0
    target: str = field(default="", compare=False)
    data: bytes = field(default=b"", repr=False, compare=False)
