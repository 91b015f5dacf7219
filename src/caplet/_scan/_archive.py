"""Read an sdist or a wheel without extracting it: members as bytes, tricks as problems.

``caplet scan`` accepts archives (issue 4, point 7), and an archive is the
attacker's format: it can name files outside the extraction directory, link
to them, hide a second copy of a file under the same name, or expand to
terabytes. So nothing is ever written to disk, and :func:`iter_archive`
yields each regular file as an :class:`ArchiveMember` (its path relative to
the package, its bytes) and every trick as an :class:`ArchiveProblem`, which
the scanner turns into a finding. Problem members are *not* yielded.

Reading uses the standard library (:mod:`tarfile`, :mod:`zipfile`,
:mod:`zlib`, :mod:`bz2`, :mod:`lzma`) with three guards of our own:

* **Streaming with caps.** Every byte a decompressor produces is counted
  (per member and for the whole archive) as it is produced, and reading
  stops as soon as a cap or the compression-ratio bound is crossed, so a
  decompression bomb costs at most its cap plus one read (:data:`READ_CHUNK`),
  never its expanded size. Each problem records how many bytes had been
  decompressed when it was raised (``decompressed``). Tar archives are read in
  stream mode (``"r|"``) through a counting reader, so even tarfile's own
  reads (pax headers, skipped members) are counted.
* **Only bounded decompressors.** ``zipfile`` decompresses deflate members in
  bounded steps but bzip2 and LZMA members in one unbounded call per read
  (CPython ``zipfile.ZipExtFile._read1``): a few KiB of bzip2 can expand to
  gigabytes in that call. Such members are reported as unreadable instead;
  wheels and zip sdists are written with deflate.
* **The installer's view.** pip unpacks any file that ``zipfile`` can open as
  a zip before trying tar (``pip._internal.utils.unpacking.unpack_file``),
  so a file that is both (a polyglot) is read as a zip, and reported.

The format is detected from the bytes, not the name; a name that disagrees
(a ``.whl`` that is a tarball) is a problem, not a reason to trust the name.
"""

from __future__ import annotations

import bz2
import contextlib
import enum
import io
import lzma
import stat
import tarfile
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol, assert_never

from caplet._errors import ScanError

__all__ = [
    "DEFAULT_LIMITS",
    "READ_CHUNK",
    "ArchiveFormat",
    "ArchiveLimits",
    "ArchiveMember",
    "ArchiveProblem",
    "ArchiveProblemKind",
    "detect_format",
    "iter_archive",
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
    """

    relative: str
    kind: ArchiveProblemKind
    detail: str
    decompressed: int = 0


# -- format detection ---------------------------------------------------------

_HEAD_BYTES: Final = 512
_TAR_MAGIC_OFFSET: Final = 257
_SUFFIX_FORMATS: Final = (
    (".whl", ArchiveFormat.ZIP),
    (".zip", ArchiveFormat.ZIP),
    (".tar.gz", ArchiveFormat.TAR_GZ),
    (".tgz", ArchiveFormat.TAR_GZ),
    (".tar.bz2", ArchiveFormat.TAR_BZ2),
    (".tbz2", ArchiveFormat.TAR_BZ2),
    (".tbz", ArchiveFormat.TAR_BZ2),
    (".tar.xz", ArchiveFormat.TAR_XZ),
    (".txz", ArchiveFormat.TAR_XZ),
    (".tar", ArchiveFormat.TAR),
)


def _sniff(head: bytes) -> ArchiveFormat | None:
    """The format the leading bytes announce (magic numbers from each format's spec)."""
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return ArchiveFormat.ZIP
    if head[:2] == b"\x1f\x8b":
        return ArchiveFormat.TAR_GZ
    if head[:3] == b"BZh":
        return ArchiveFormat.TAR_BZ2
    if head[:6] == b"\xfd7zXZ\x00":
        return ArchiveFormat.TAR_XZ
    if _has_tar_magic(head):
        return ArchiveFormat.TAR
    return None


def _has_tar_magic(data: bytes) -> bool:
    # POSIX ustar ("ustar\0") and GNU ("ustar  \0") headers; v7 tars have no magic.
    magic = data[_TAR_MAGIC_OFFSET : _TAR_MAGIC_OFFSET + 6]
    return magic in (b"ustar\x00", b"ustar ")


def _suffix_format(name: str) -> ArchiveFormat | None:
    lowered = name.lower()
    for suffix, fmt in _SUFFIX_FORMATS:
        if lowered.endswith(suffix):
            return fmt
    return None


# zipfile raises these (and only these) on a malformed directory or member;
# ValueError covers UnicodeDecodeError on a name flagged UTF-8 that is not.
_ZIP_ERRORS: Final = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


def _zip_opens(path: Path) -> bool:
    """Whether zipfile, and so pip, sees a zip (it looks at the end of the file)."""
    try:
        with zipfile.ZipFile(path):
            return True
    except _ZIP_ERRORS:
        return False


def detect_format(path: Path) -> ArchiveFormat | None:
    """The format :func:`iter_archive` would read ``path`` as, or ``None`` if no archive.

    Raises :class:`ScanError` when the file cannot be read at all.
    """
    head = _read_head(path)
    if _zip_opens(path):
        return ArchiveFormat.ZIP
    return _sniff(head)


def _read_head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(_HEAD_BYTES)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ScanError(
            f"cannot read archive {path}: {reason}; pass an existing, readable"
            " wheel (.whl) or sdist (.tar.gz, .zip)"
        ) from exc


def _resolve(path: Path) -> tuple[ArchiveFormat, list[ArchiveProblem]]:
    head = _read_head(path)
    magic = _sniff(head)
    problems: list[ArchiveProblem] = []
    if _zip_opens(path):
        fmt = ArchiveFormat.ZIP
        if magic is not None and magic is not ArchiveFormat.ZIP:
            problems.append(
                ArchiveProblem(
                    "",
                    ArchiveProblemKind.FORMAT_MISMATCH,
                    f"{path.name} is both a {magic.value} stream and a zip archive;"
                    " read as a zip, as pip would unpack it",
                )
            )
    elif magic is not None:
        fmt = magic
    else:
        raise ScanError(
            f"cannot scan {path}: it is neither a zip (.whl, .zip) nor a tar archive"
            " (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz); pass a wheel, an sdist or a directory"
        )
    expected = _suffix_format(path.name)
    if expected is not None and expected is not fmt:
        problems.append(
            ArchiveProblem(
                "",
                ArchiveProblemKind.FORMAT_MISMATCH,
                f"{path.name} is named like a {expected.value} file but is a {fmt.value} archive",
            )
        )
    return fmt, problems


# -- member names -------------------------------------------------------------

# Trojan Source (CVE-2021-42574): bidirectional controls reorder what is shown.
_BIDI: Final = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")

_NESTED_SUFFIXES: Final = (
    ".whl",
    ".zip",
    ".egg",
    ".jar",
    ".pyz",
    ".tar",
    ".tgz",
    ".tbz",
    ".tbz2",
    ".txz",
    ".gz",
    ".bz2",
    ".xz",
    ".lzma",
    ".zst",
    ".7z",
    ".rar",
)
_NESTED_MAGIC: Final = (
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"PK\x07\x08",
    b"\x1f\x8b",
    b"\xfd7zXZ\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!\x1a\x07",
    b"\x28\xb5\x2f\xfd",
)


def _display(name: str) -> str:
    """The name as it can be shown: escapes for control, bidi and undecodable characters."""
    return name if name.isprintable() else repr(name)[1:-1]


def _check_name(name: str) -> str | tuple[ArchiveProblemKind, str]:
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


def _nested_by_name(relative: str) -> bool:
    return relative.lower().endswith(_NESTED_SUFFIXES)


def _nested_by_content(data: bytes) -> bool:
    if data.startswith(_NESTED_MAGIC) or _has_tar_magic(data):
        return True
    # bzip2: "BZh" + block size + the block or end-of-stream magic (pi, sqrt(pi)).
    return data[:3] == b"BZh" and data[4:10] in (b"1AY&SY", b"\x17rE8P\x90")


class _Names:
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
        key = unicodedata.normalize("NFC", relative)
        if key in self._seen:
            return True
        self._seen.add(key)
        return False


# -- iteration ------------------------------------------------------------------


def iter_archive(
    path: Path, *, limits: ArchiveLimits = DEFAULT_LIMITS
) -> Iterator[ArchiveMember | ArchiveProblem]:
    """Yield the regular files of the sdist or wheel at ``path``, and every problem.

    Nothing is extracted to disk. The format comes from the bytes (a zip if
    zipfile opens it, as for pip; else gzip, bzip2, xz or plain tar). Raises
    :class:`ScanError` at once (before iteration) only when the file cannot be
    read or is no archive at all; a damaged archive yields what could be read
    and then a ``CORRUPT`` problem.
    """
    fmt, problems = _resolve(path)
    return _iterate(path, fmt, problems, limits)


def _iterate(
    path: Path, fmt: ArchiveFormat, problems: list[ArchiveProblem], limits: ArchiveLimits
) -> Iterator[ArchiveMember | ArchiveProblem]:
    yield from problems
    if fmt is ArchiveFormat.ZIP:
        # A wheel's root holds the package and its .dist-info: there is no top folder.
        yield from _iter_zip(path, limits, strip_top=not path.name.lower().endswith(".whl"))
    elif fmt in (
        ArchiveFormat.TAR,
        ArchiveFormat.TAR_GZ,
        ArchiveFormat.TAR_BZ2,
        ArchiveFormat.TAR_XZ,
    ):
        yield from _iter_tar(path, fmt, limits)
    else:
        assert_never(fmt)


def _zip_top(infos: list[zipfile.ZipInfo]) -> str | None:
    """The single top-level folder every member of a zip sdist sits in, if there is one."""
    tops: set[str] = set()
    for info in infos:
        checked = _check_name(info.orig_filename)
        if isinstance(checked, tuple) or not checked:
            continue
        first, sep, _ = checked.partition("/")
        if not sep and not info.is_dir():
            return None
        tops.add(first)
    return tops.pop() if len(tops) == 1 else None


class _Entry(enum.Enum):
    FILE = "file"
    DIR = "dir"
    LINK = "link"
    SPECIAL = "special"


def _zip_kind(info: zipfile.ZipInfo) -> _Entry:
    """What a zip entry is, from its Unix mode bits when it has them."""
    mode = info.external_attr >> 16
    # 3: made on Unix, st_mode in the high 16 bits; type bits 0 mean "unknown"
    # (zipfile's writestr stores only permissions), which is a plain file.
    if info.create_system == 3 and stat.S_IFMT(mode):
        if stat.S_ISLNK(mode):
            return _Entry.LINK
        if stat.S_ISDIR(mode):
            return _Entry.DIR
        if not stat.S_ISREG(mode):
            return _Entry.SPECIAL
    return _Entry.DIR if info.is_dir() else _Entry.FILE


def _iter_zip(
    path: Path, limits: ArchiveLimits, *, strip_top: bool
) -> Iterator[ArchiveMember | ArchiveProblem]:
    try:
        archive = zipfile.ZipFile(path)
    except _ZIP_ERRORS as exc:
        yield ArchiveProblem(
            "", ArchiveProblemKind.CORRUPT, f"cannot read the zip directory: {exc}"
        )
        return
    total = 0
    with archive:
        infos = archive.infolist()
        names = _Names(_zip_top(infos) if strip_top else None)
        for index, info in enumerate(infos):
            if index >= limits.max_members:
                yield ArchiveProblem(
                    "",
                    ArchiveProblemKind.TOO_MANY_MEMBERS,
                    f"{len(infos)} members, limit {limits.max_members}; the rest were not read",
                    total,
                )
                return
            checked = _check_name(info.orig_filename)
            if isinstance(checked, tuple):
                kind, detail = checked
                yield ArchiveProblem(_display(info.orig_filename), kind, detail, total)
                continue
            entry = _zip_kind(info)
            relative = names.strip(checked)
            if entry is _Entry.DIR or not relative:
                continue
            refusal = _zip_refusal(info, entry, relative, names=names, limits=limits, total=total)
            if refusal is not None:
                yield refusal
                if refusal.kind is ArchiveProblemKind.TOTAL_TOO_LARGE:
                    return
                continue
            result = _read_zip_member(archive, info, relative, limits, total)
            total = result.total
            yield result.item
            if result.stop:
                return


def _zip_refusal(
    info: zipfile.ZipInfo,
    entry: _Entry,
    relative: str,
    *,
    names: _Names,
    limits: ArchiveLimits,
    total: int,
) -> ArchiveProblem | None:
    """Why a zip member is refused before any of it is decompressed, if it is."""
    match entry:
        case _Entry.LINK:
            return ArchiveProblem(relative, ArchiveProblemKind.LINK, "symbolic link", total)
        case _Entry.SPECIAL:
            mode = stat.filemode(info.external_attr >> 16)
            detail = f"special file (mode {mode})"
            return ArchiveProblem(relative, ArchiveProblemKind.SPECIAL_FILE, detail, total)
        case _Entry.FILE | _Entry.DIR:
            pass
        case _:
            assert_never(entry)
    if names.is_duplicate(relative):
        return ArchiveProblem(
            relative, ArchiveProblemKind.DUPLICATE, "second member with this name; not read", total
        )
    if _nested_by_name(relative):
        return ArchiveProblem(
            relative, ArchiveProblemKind.NESTED_ARCHIVE, "archive member, not opened", total
        )
    if info.flag_bits & 0x1:
        return ArchiveProblem(relative, ArchiveProblemKind.UNREADABLE, "encrypted", total)
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return ArchiveProblem(
            relative,
            ArchiveProblemKind.UNREADABLE,
            f"compression method {info.compress_type} (only stored and deflate are read:"
            " zipfile decompresses the others without an output bound)",
            total,
        )
    # zipfile never returns more than the declared size (ZipExtFile stops at
    # file_size and then checks the CRC), so the declared sizes are an upper
    # bound and honest bombs are refused before a byte is decompressed.
    declared, packed = info.file_size, max(info.compress_size, 1)
    if declared > limits.ratio_floor_bytes and declared > limits.max_ratio * packed:
        return ArchiveProblem(
            relative,
            ArchiveProblemKind.COMPRESSION_RATIO,
            f"declares {declared} bytes from {info.compress_size} compressed"
            f" (over {limits.max_ratio}:1)",
            total,
        )
    if declared > limits.max_member_bytes:
        return ArchiveProblem(
            relative,
            ArchiveProblemKind.MEMBER_TOO_LARGE,
            f"declares {declared} bytes, limit {limits.max_member_bytes}",
            total,
        )
    if declared > limits.max_total_bytes - total:
        return ArchiveProblem(
            relative,
            ArchiveProblemKind.TOTAL_TOO_LARGE,
            f"would bring the archive past {limits.max_total_bytes} bytes; reading stopped",
            total,
        )
    return None


@dataclass(frozen=True, slots=True)
class _ZipRead:
    item: ArchiveMember | ArchiveProblem
    total: int
    stop: bool = False


def _read_zip_member(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    relative: str,
    limits: ArchiveLimits,
    total: int,
) -> _ZipRead:
    """Decompress one member in bounded chunks, re-checking every cap as bytes arrive.

    The declared sizes were checked already; this guards the member whose
    declaration lies (its stream is longer), whatever zipfile does about it.
    """
    chunks: list[bytes] = []
    size = 0
    bound = limits.max_ratio * max(info.compress_size, 1)
    try:
        with archive.open(info) as fh:
            while chunk := fh.read(READ_CHUNK):
                chunks.append(chunk)
                size += len(chunk)
                total += len(chunk)
                if total > limits.max_total_bytes:
                    detail = f"the archive expands past {limits.max_total_bytes} bytes"
                    problem = ArchiveProblem(
                        relative, ArchiveProblemKind.TOTAL_TOO_LARGE, detail, total
                    )
                    return _ZipRead(problem, total, stop=True)
                if size > limits.ratio_floor_bytes and size > bound:
                    detail = (
                        f"{size} bytes from {info.compress_size} compressed"
                        f" (over {limits.max_ratio}:1)"
                    )
                    problem = ArchiveProblem(
                        relative, ArchiveProblemKind.COMPRESSION_RATIO, detail, total
                    )
                    return _ZipRead(problem, total)
                if size > limits.max_member_bytes:
                    detail = f"more than {limits.max_member_bytes} bytes"
                    problem = ArchiveProblem(
                        relative, ArchiveProblemKind.MEMBER_TOO_LARGE, detail, total
                    )
                    return _ZipRead(problem, total)
    except (*_ZIP_ERRORS, NotImplementedError, RuntimeError) as exc:
        problem = ArchiveProblem(relative, ArchiveProblemKind.CORRUPT, str(exc), total)
        return _ZipRead(problem, total)
    data = b"".join(chunks)
    if _nested_by_content(data):
        problem = ArchiveProblem(
            relative, ArchiveProblemKind.NESTED_ARCHIVE, "archive content, not opened", total
        )
        return _ZipRead(problem, total)
    return _ZipRead(ArchiveMember(relative, data), total)


class _RefusedError(Exception):
    """Raised by the counting reader when a cap is crossed (never caught by tarfile)."""

    def __init__(self, kind: ArchiveProblemKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class _CountingReader:
    """The decompressed tar stream, counted and capped as tarfile reads it.

    ``consumed`` tells how many compressed bytes produced it (for the ratio),
    ``None`` for a plain tar. It has just enough of a file's interface for
    ``tarfile.open(fileobj=...)``.
    """

    def __init__(
        self, inner: _Decompressed, consumed: Callable[[], int] | None, limits: ArchiveLimits
    ) -> None:
        self._inner = inner
        self._consumed = consumed
        self._limits = limits
        self.count = 0

    def read(self, size: int = -1, /) -> bytes:
        if size < 0:
            parts = []
            while part := self.read(READ_CHUNK):
                parts.append(part)
            return b"".join(parts)
        data = self._inner.read(size)
        self.count += len(data)
        limits = self._limits
        if self.count > limits.max_total_bytes:
            raise _RefusedError(
                ArchiveProblemKind.TOTAL_TOO_LARGE,
                f"the archive expands past {limits.max_total_bytes} bytes; reading stopped",
            )
        if self._consumed is not None and self.count > limits.ratio_floor_bytes:
            packed = max(self._consumed(), 1)
            if self.count > limits.max_ratio * packed:
                raise _RefusedError(
                    ArchiveProblemKind.COMPRESSION_RATIO,
                    f"{self.count} bytes from {packed} compressed (over {limits.max_ratio}:1);"
                    " reading stopped",
                )
        return data

    def write(self, data: bytes, /) -> int:
        raise io.UnsupportedOperation("read-only")

    def tell(self) -> int:
        return self.count

    def seek(self, pos: int, /) -> int:
        raise io.UnsupportedOperation("stream mode reads forward only")

    def close(self) -> None:
        """The files are closed by their owner, :func:`_iter_tar`."""


#: Compressed bytes handed to a tar stream's decompressor per read.
_RAW_STEP: Final = 2048


class _SteppedReader(io.BufferedReader):
    """The compressed file, handed to the decompressor at most 2 KiB at a time.

    bz2 and lzma's readers read only when their decompressor needs input, so
    ``tell`` (the compressed bytes read) then stays within 2 KiB of what was
    really used, and the ratio check cannot be fooled by read-ahead. Short
    reads are fine for them: they loop until they have enough.
    """

    def read(self, size: int | None = -1, /) -> bytes:
        step = _RAW_STEP if size is None or size < 0 else min(size, _RAW_STEP)
        return super().read1(step)


class _GzipStream:
    """A gzip stream decompressed with :mod:`zlib`, counting the input it consumed.

    Written instead of using :class:`gzip.GzipFile`, whose reader (3.11) reads
    8 KiB of compressed input ahead and keeps what it did not use in a private
    buffer: 8 KiB of a zero bomb is 8 MB, invisible to a ratio check based on
    the file position. Here ``consumed`` is exact. ``wbits=31`` makes zlib
    parse the gzip header and check the trailer's CRC and length; concatenated
    members are read in turn (RFC 1952, section 2.2), as gzip does.
    """

    def __init__(self, raw: io.BufferedReader) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(wbits=31)
        self._pending = b""  # compressed input read but not consumed yet
        self._done = False
        self.consumed = 0

    def read(self, size: int = -1, /) -> bytes:
        limit = READ_CHUNK if size < 0 else size
        while limit and not self._done:
            if self._inflate.eof and not self._next_member():
                self._done = True
                break
            if not self._pending:
                self._pending = self._raw.read(_RAW_STEP)
                if not self._pending:
                    raise EOFError(
                        "Compressed file ended before the end-of-stream marker was reached"
                    )
            fed = len(self._pending)
            data = self._inflate.decompress(self._pending, limit)
            # Input left over: the tail zlib had no room for, or what follows a member.
            inflate = self._inflate
            self._pending = inflate.unused_data if inflate.eof else inflate.unconsumed_tail
            self.consumed += fed - len(self._pending)
            if data:
                return data
        return b""

    def _next_member(self) -> bool:
        """Start the next member, past zero padding (as gzip does); False at the end."""
        while True:
            stripped = self._pending.lstrip(b"\x00")
            self.consumed += len(self._pending) - len(stripped)
            self._pending = stripped
            if self._pending:
                self._inflate = zlib.decompressobj(wbits=31)
                return True
            self._pending = self._raw.read(_RAW_STEP)
            if not self._pending:
                return False

    def close(self) -> None:
        """The raw file is closed by its owner."""


# tarfile, gzip, bz2 and lzma raise these on damaged or truncated input.
_TAR_ERRORS: Final = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)


class _Decompressed(Protocol):
    def read(self, size: int, /) -> bytes: ...
    def close(self) -> None: ...


def _open_stream(
    fmt: ArchiveFormat, raw: io.BufferedReader
) -> tuple[_Decompressed, Callable[[], int] | None]:
    """The decompressed stream, and how to ask it for the compressed bytes it used."""
    match fmt:
        case ArchiveFormat.TAR:
            return raw, None
        case ArchiveFormat.TAR_GZ:
            inflate = _GzipStream(raw)
            return inflate, lambda: inflate.consumed
        case ArchiveFormat.TAR_BZ2:
            return bz2.BZ2File(raw), raw.tell
        case ArchiveFormat.TAR_XZ:
            return lzma.LZMAFile(raw), raw.tell
        case ArchiveFormat.ZIP:
            raise AssertionError("zip archives are not read as a stream")
        case _:
            assert_never(fmt)


def _iter_tar(
    path: Path, fmt: ArchiveFormat, limits: ArchiveLimits
) -> Iterator[ArchiveMember | ArchiveProblem]:
    try:
        raw = path.open("rb") if fmt is ArchiveFormat.TAR else _SteppedReader(io.FileIO(path))
    except OSError as exc:
        yield ArchiveProblem("", ArchiveProblemKind.CORRUPT, f"cannot reopen: {exc}")
        return
    stream, consumed = _open_stream(fmt, raw)
    with raw, contextlib.closing(stream):
        reader = _CountingReader(stream, consumed, limits)
        current = ""
        try:
            with tarfile.open(fileobj=reader, mode="r|") as archive:
                names: _Names | None = None
                for count, info in enumerate(archive, start=1):
                    if count > limits.max_members:
                        yield ArchiveProblem(
                            "",
                            ArchiveProblemKind.TOO_MANY_MEMBERS,
                            f"more than {limits.max_members} members; the rest were not read",
                            reader.count,
                        )
                        return
                    checked = _check_name(info.name)
                    if isinstance(checked, tuple):
                        kind, detail = checked
                        yield ArchiveProblem(_display(info.name), kind, detail, reader.count)
                        continue
                    if names is None:
                        names = _Names(_tar_top(checked, info))
                    relative = names.strip(checked)
                    if info.isdir() or not relative:
                        continue
                    refusal = _tar_refusal(info, relative, names, limits, reader.count)
                    if refusal is not None:
                        yield refusal
                        if refusal.kind is ArchiveProblemKind.TOTAL_TOO_LARGE:
                            return
                        if info.isreg() and info.size > limits.max_total_bytes - reader.count:
                            # Skipping the member means decompressing it: over the cap.
                            yield ArchiveProblem(
                                relative,
                                ArchiveProblemKind.TOTAL_TOO_LARGE,
                                f"skipping its {info.size} bytes would bring the archive past"
                                f" {limits.max_total_bytes} bytes; reading stopped",
                                reader.count,
                            )
                            return
                        continue
                    current = relative
                    yield _read_tar_member(archive, info, relative, reader)
                    current = ""
                trailing = _trailing_data(archive)
                if trailing:
                    yield ArchiveProblem(
                        "",
                        ArchiveProblemKind.CORRUPT,
                        f"{trailing} bytes of data after the end of the tar archive"
                        " (hidden after the end marker, or behind an invalid header); not read",
                        reader.count,
                    )
        except _RefusedError as refusal:
            yield ArchiveProblem(current, refusal.kind, refusal.detail, reader.count)
        except _TAR_ERRORS as exc:
            yield ArchiveProblem(
                "", ArchiveProblemKind.CORRUPT, f"{fmt.value} archive: {exc}", reader.count
            )


def _tar_top(relative: str, info: tarfile.TarInfo) -> str | None:
    """The sdist's top folder, from the first member (tar is read in one pass).

    The sdist format puts every file under one ``{name}-{version}/`` folder;
    later members outside it keep their full path (and would collide, as
    duplicates, with a stripped one of the same name).
    """
    first, sep, _ = relative.partition("/")
    if sep or (info.isdir() and first):
        return first
    return None


def _tar_refusal(
    info: tarfile.TarInfo, relative: str, names: _Names, limits: ArchiveLimits, count: int
) -> ArchiveProblem | None:
    """Why a tar member is refused before its data is read, if it is."""
    if info.issym() or info.islnk():
        how = "symbolic" if info.issym() else "hard"
        detail = f"{how} link to {_display(info.linkname)}"
        return ArchiveProblem(relative, ArchiveProblemKind.LINK, detail, count)
    if not info.isreg():
        detail = f"tar member type {info.type!r} (device, FIFO or unknown), not read"
        return ArchiveProblem(relative, ArchiveProblemKind.SPECIAL_FILE, detail, count)
    if names.is_duplicate(relative):
        detail = "second member with this name; not read"
        return ArchiveProblem(relative, ArchiveProblemKind.DUPLICATE, detail, count)
    if _nested_by_name(relative):
        detail = "archive member, not opened"
        return ArchiveProblem(relative, ArchiveProblemKind.NESTED_ARCHIVE, detail, count)
    # A tar header states the exact data size, so the cap is checked up front.
    if info.size > limits.max_member_bytes:
        detail = f"{info.size} bytes, limit {limits.max_member_bytes}"
        return ArchiveProblem(relative, ArchiveProblemKind.MEMBER_TOO_LARGE, detail, count)
    if info.size > limits.max_total_bytes - count:
        detail = (
            f"{info.size} bytes would bring the archive past {limits.max_total_bytes} bytes;"
            " reading stopped"
        )
        return ArchiveProblem(relative, ArchiveProblemKind.TOTAL_TOO_LARGE, detail, count)
    return None


def _read_tar_member(
    archive: tarfile.TarFile, info: tarfile.TarInfo, relative: str, reader: _CountingReader
) -> ArchiveMember | ArchiveProblem:
    fh = archive.extractfile(info)
    if fh is None:  # pragma: no cover - isreg() members always have a file object
        raise AssertionError(f"tarfile gave no data for regular member {relative}")
    chunks: list[bytes] = []
    with fh:
        while chunk := fh.read(READ_CHUNK):
            chunks.append(chunk)
    data = b"".join(chunks)
    if _nested_by_content(data):
        return ArchiveProblem(
            relative, ArchiveProblemKind.NESTED_ARCHIVE, "archive content, not opened", reader.count
        )
    return ArchiveMember(relative, data)


def _trailing_data(archive: tarfile.TarFile) -> int:
    """Non-zero bytes after the end-of-archive marker (tarfile stops there silently).

    The rest of the stream is drained through the counting reader, so caps
    still hold; a clean archive ends in zero padding.
    """
    found = 0
    while chunk := archive.fileobj.read(READ_CHUNK):
        found += len(chunk) - chunk.count(0)
    return found
