"""What an archive is, from its bytes: its format, a name that disagrees, an archive inside.

The format is detected from the bytes, not the name; a name that disagrees
(a ``.whl`` that is a tarball) is a problem, not a reason to trust the name.
pip unpacks any file that ``zipfile`` can open as a zip before trying tar
(``pip._internal.utils.unpacking.unpack_file``), so a file that is both (a
polyglot) is read as a zip, and reported. A member that is itself an
archive, by its name or its leading bytes, is reported and never opened.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Final

from caplet._errors import ScanError
from caplet._scan._archive_model import ArchiveFormat, ArchiveProblem, ArchiveProblemKind

__all__ = [
    "detect_format",
    "nested_by_content",
    "nested_by_name",
    "resolve_format",
    "zip_errors",
]

_HEAD_BYTES: Final = 512
#: How far from the end zipfile looks for its end record, and what it looks for.
_ZIP_TAIL: Final = (1 << 16) + 22
_ZIP_END_RECORD: Final = b"PK\x05\x06"
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


def zip_errors() -> tuple[type[Exception], ...]:
    """What zipfile raises (and only that) on a malformed directory or member.

    ValueError covers UnicodeDecodeError on a name flagged UTF-8 that is not.
    zipfile (with bz2 and lzma) is imported by the first file asked about, not by
    every `caplet scan` (issue 16: start-up <= 150 ms of CPU).
    """
    import zipfile

    return (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


def _zip_opens(path: Path) -> bool:
    """Whether zipfile, and so pip, sees a zip (it looks at the end of the file).

    zipfile opens only a file whose last 64 KiB and 22 bytes hold the end record's
    signature (``zipfile._EndRecData``), so a file without it is answered without
    importing zipfile: `caplet scan DIR` asks this of a folder's first file to know
    whether the folder is one of sdists (issue 16: start-up).
    """
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - _ZIP_TAIL, 0))
            if _ZIP_END_RECORD not in fh.read(_ZIP_TAIL):
                return False
    except OSError:
        return False  # as zipfile's own OSError below: not a zip it can open
    import zipfile  # see zip_errors

    try:
        with zipfile.ZipFile(path):
            return True
    except zip_errors():
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


def resolve_format(path: Path) -> tuple[ArchiveFormat, list[ArchiveProblem]]:
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


def nested_by_name(relative: str) -> bool:
    return relative.lower().endswith(_NESTED_SUFFIXES)


def nested_by_content(data: bytes) -> bool:
    if data.startswith(_NESTED_MAGIC) or _has_tar_magic(data):
        return True
    # bzip2: "BZh" + block size + the block or end-of-stream magic (pi, sqrt(pi)).
    return data[:3] == b"BZh" and data[4:10] in (b"1AY&SY", b"\x17rE8P\x90")
