"""A zip (a wheel or a zip sdist) read member by member, in memory, within the caps.

``zipfile`` decompresses deflate members in bounded steps but bzip2 and LZMA
members in one unbounded call per read (CPython ``zipfile.ZipExtFile._read1``):
such members are reported as unreadable. The declared sizes are checked
before a byte is decompressed, and every cap again as the bytes arrive.
"""

from __future__ import annotations

import enum
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, assert_never

from caplet._scan._archive_format import nested_by_content, nested_by_name, zip_errors
from caplet._scan._archive_model import (
    READ_CHUNK,
    ArchiveLimits,
    ArchiveMember,
    ArchiveProblem,
    ArchiveProblemKind,
)
from caplet._scan._archive_names import (
    DUPLICATE_DETAIL,
    Names,
    check_name,
    display_name,
    readable_name,
)

__all__ = ["iter_zip"]

#: What zipfile raises on a malformed directory or member (one list, with the sniffing
#: of :mod:`caplet._scan._archive_format`).
ZIP_ERRORS: Final = zip_errors()
#: And what reading a member raises besides (a method zipfile lacks, an encrypted one).
_READ_ERRORS: Final[tuple[type[Exception], ...]] = (*ZIP_ERRORS, NotImplementedError, RuntimeError)


def _zip_top(infos: list[zipfile.ZipInfo]) -> str | None:
    """The single top-level folder every member of a zip sdist sits in, if there is one."""
    tops: set[str] = set()
    for info in infos:
        checked = check_name(info.orig_filename)
        if isinstance(checked, tuple) or not checked:
            continue
        first, sep, _ = checked.partition("/")
        if not sep and not info.is_dir():
            return None
        tops.add(first)
    return tops.pop() if len(tops) == 1 else None


#: What a zip's link entry is reported as (it is read as a file too).
_ZIP_LINK = "symbolic link; installers write its bytes as a regular file, read as one"


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


def iter_zip(
    path: Path | BinaryIO, limits: ArchiveLimits, *, strip_top: bool
) -> Iterator[ArchiveMember | ArchiveProblem]:
    try:
        archive = zipfile.ZipFile(path)
    except ZIP_ERRORS as exc:
        yield ArchiveProblem(
            "", ArchiveProblemKind.CORRUPT, f"cannot read the zip directory: {exc}"
        )
        return
    total = 0
    with archive:
        infos = archive.infolist()
        names = Names(_zip_top(infos) if strip_top else None)
        for index, info in enumerate(infos):
            if index >= limits.max_members:
                yield ArchiveProblem(
                    "",
                    ArchiveProblemKind.TOO_MANY_MEMBERS,
                    f"{len(infos)} members, limit {limits.max_members}; the rest were not read",
                    total,
                )
                return
            checked = check_name(info.orig_filename)
            if isinstance(checked, tuple):
                kind, detail = checked
                yield ArchiveProblem(display_name(info.orig_filename), kind, detail, total)
                readable = readable_name(info.orig_filename)
                if kind is not ArchiveProblemKind.UNSAFE_NAME or readable is None:
                    continue
                checked = readable  # extracted as it is: read too (attack8)
            entry = _zip_kind(info)
            relative = names.strip(checked)
            if entry is _Entry.DIR or not relative:
                continue
            if entry is _Entry.LINK:
                # pip writes a zip's link entry as a regular file of its bytes (its
                # unzip_file and wheel installer know no links): reported, and read as
                # the file pip makes of it; a setup.py so stored hid its payload (attack8)
                yield ArchiveProblem(relative, ArchiveProblemKind.LINK, _ZIP_LINK, total)
                entry = _Entry.FILE
            if entry is _Entry.FILE and names.is_duplicate(relative):
                # reported, and read like any member: the copy an installer keeps is
                # the last one, so skipping it hid a payload (scanfuzz)
                yield ArchiveProblem(
                    relative, ArchiveProblemKind.DUPLICATE, DUPLICATE_DETAIL, total
                )
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
    names: Names,
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
    except _READ_ERRORS as exc:
        problem = ArchiveProblem(relative, ArchiveProblemKind.CORRUPT, str(exc), total)
        return _ZipRead(problem, total)
    data = b"".join(chunks)
    if nested_by_content(data) or nested_by_name(relative):
        # read within the caps, for the scanner to open if it is a zip (attack8)
        detail = f"archive {'member' if nested_by_name(relative) else 'content'}, not opened"
        problem = ArchiveProblem(
            relative, ArchiveProblemKind.NESTED_ARCHIVE, detail, total, data=data
        )
        return _ZipRead(problem, total)
    return _ZipRead(ArchiveMember(relative, data), total)
