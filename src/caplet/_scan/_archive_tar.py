"""A tar archive (plain, gzip, bzip2 or xz) read in one pass, in memory, within the caps.

Read in stream mode (``"r|"``) through :class:`CountingReader`, so even
tarfile's own reads (pax headers, skipped members) are counted; a header
states its member's size, so the caps are checked before its data is read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import lzma
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from caplet._scan._archive_format import nested_by_content, nested_by_name
from caplet._scan._archive_model import (
    READ_CHUNK,
    ArchiveFormat,
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
from caplet._scan._archive_streams import CountingReader, RefusedError, SteppedReader, open_stream

__all__ = ["iter_tar"]

# tarfile, gzip, bz2 and lzma raise these on damaged or truncated input.
_TAR_ERRORS: Final = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)


def iter_tar(
    path: Path, fmt: ArchiveFormat, limits: ArchiveLimits
) -> Iterator[ArchiveMember | ArchiveProblem]:
    try:
        raw = path.open("rb") if fmt is ArchiveFormat.TAR else SteppedReader(io.FileIO(path))
    except OSError as exc:
        yield ArchiveProblem("", ArchiveProblemKind.CORRUPT, f"cannot reopen: {exc}")
        return
    stream, consumed = open_stream(fmt, raw)
    with raw, contextlib.closing(stream):
        reader = CountingReader(stream, consumed, limits)
        current = ""
        try:
            with tarfile.open(fileobj=reader, mode="r|") as archive:
                names: Names | None = None
                for count, info in enumerate(archive, start=1):
                    if count > limits.max_members:
                        yield ArchiveProblem(
                            "",
                            ArchiveProblemKind.TOO_MANY_MEMBERS,
                            f"more than {limits.max_members} members; the rest were not read",
                            reader.count,
                        )
                        return
                    checked = check_name(info.name)
                    if isinstance(checked, tuple):
                        kind, detail = checked
                        yield ArchiveProblem(display_name(info.name), kind, detail, reader.count)
                        readable = readable_name(info.name)
                        if kind is not ArchiveProblemKind.UNSAFE_NAME or readable is None:
                            continue
                        checked = readable  # extracted as it is: read too (attack8)
                    if names is None:
                        names = Names(_tar_top(checked, info))
                    relative = names.strip(checked)
                    if info.isdir() or not relative:
                        continue
                    if info.isreg() and names.is_duplicate(relative):
                        # reported, and read like any member: the copy an installer keeps
                        # is the last one, so skipping it hid a payload (scanfuzz)
                        yield ArchiveProblem(
                            relative, ArchiveProblemKind.DUPLICATE, DUPLICATE_DETAIL, reader.count
                        )
                    refusal = _tar_refusal(info, relative, names, limits, reader.count)
                    if refusal is not None and refusal.kind is ArchiveProblemKind.NESTED_ARCHIVE:
                        current = relative
                        read = _read_tar_member(archive, info, relative, reader)
                        current = ""
                        yield dataclasses.replace(refusal, data=read.data)
                        continue
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
        except RefusedError as refusal:
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


def _link_target(info: tarfile.TarInfo, names: Names) -> str:
    """The member a link points to, relative as members are (``""``: outside the
    archive). pip extracts a link inside the tree (tarfile's data filter, PEP 706,
    keeps it), so a ``setup.py`` linked to ``README.txt`` runs README's bytes
    (attack8): the scanner reads them under the link's name. A hard link names an
    archive path; a symbolic one a path from its own folder."""
    if info.islnk():
        linked = info.linkname
    elif info.linkname.startswith("/"):
        return ""
    else:
        linked = posixpath.join(posixpath.dirname(info.name), info.linkname)
    checked = check_name(posixpath.normpath(linked))
    return "" if isinstance(checked, tuple) else names.strip(checked)


def _tar_refusal(
    info: tarfile.TarInfo, relative: str, names: Names, limits: ArchiveLimits, count: int
) -> ArchiveProblem | None:
    """Why a tar member is refused before its data is read, if it is."""
    if info.issym() or info.islnk():
        how = "symbolic" if info.issym() else "hard"
        detail = f"{how} link to {display_name(info.linkname)}"
        target = _link_target(info, names)
        return ArchiveProblem(relative, ArchiveProblemKind.LINK, detail, count, target)
    if not info.isreg():
        detail = f"tar member type {info.type!r} (device, FIFO or unknown), not read"
        return ArchiveProblem(relative, ArchiveProblemKind.SPECIAL_FILE, detail, count)
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
    if nested_by_name(relative):
        # within the caps: read, for the scanner to open if it is a zip (attack8)
        detail = "archive member, not opened"
        return ArchiveProblem(relative, ArchiveProblemKind.NESTED_ARCHIVE, detail, count)
    return None


def _read_tar_member(
    archive: tarfile.TarFile, info: tarfile.TarInfo, relative: str, reader: CountingReader
) -> ArchiveMember | ArchiveProblem:
    fh = archive.extractfile(info)
    if fh is None:  # pragma: no cover - isreg() members always have a file object
        raise AssertionError(f"tarfile gave no data for regular member {relative}")
    chunks: list[bytes] = []
    with fh:
        while chunk := fh.read(READ_CHUNK):
            chunks.append(chunk)
    data = b"".join(chunks)
    if nested_by_content(data):
        detail = "archive content, not opened"
        return ArchiveProblem(
            relative, ArchiveProblemKind.NESTED_ARCHIVE, detail, reader.count, data=data
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
