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

The parts, one concern each: :mod:`~caplet._scan._archive_model` (formats,
limits, members, problems), :mod:`~caplet._scan._archive_format` (detection
and nested archives), :mod:`~caplet._scan._archive_names` (names and
duplicates), :mod:`~caplet._scan._archive_streams` (the counted, capped
decompression of a tar stream), :mod:`~caplet._scan._archive_zip` and
:mod:`~caplet._scan._archive_tar` (the readers); this module picks the reader.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Final, assert_never

from caplet._scan._archive_format import detect_format, resolve_format
from caplet._scan._archive_model import (
    DEFAULT_LIMITS,
    READ_CHUNK,
    ArchiveFormat,
    ArchiveLimits,
    ArchiveMember,
    ArchiveProblem,
    ArchiveProblemKind,
)

__all__ = [
    "DEFAULT_LIMITS",
    "NESTED_LIMITS",
    "READ_CHUNK",
    "ArchiveFormat",
    "ArchiveLimits",
    "ArchiveMember",
    "ArchiveProblem",
    "ArchiveProblemKind",
    "detect_format",
    "iter_archive",
    "iter_nested",
]

#: What reading a zip inside the package may cost (each one).
NESTED_LIMITS: Final = ArchiveLimits(max_member_bytes=16 << 20, max_total_bytes=64 << 20)


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
    fmt, problems = resolve_format(path)
    return _iterate(path, fmt, problems, limits)


def _iterate(
    path: Path, fmt: ArchiveFormat, problems: list[ArchiveProblem], limits: ArchiveLimits
) -> Iterator[ArchiveMember | ArchiveProblem]:
    # The readers (tarfile, zipfile and their decompressors) are imported by the first
    # archive read, not by every `caplet scan` (issue 16: start-up <= 150 ms of CPU).
    from caplet._scan._archive_tar import iter_tar
    from caplet._scan._archive_zip import iter_zip

    yield from problems
    if fmt is ArchiveFormat.ZIP:
        # A wheel's root holds the package and its .dist-info: there is no top folder.
        yield from iter_zip(path, limits, strip_top=not path.name.lower().endswith(".whl"))
    elif fmt in (
        ArchiveFormat.TAR,
        ArchiveFormat.TAR_GZ,
        ArchiveFormat.TAR_BZ2,
        ArchiveFormat.TAR_XZ,
    ):
        yield from iter_tar(path, fmt, limits)
    else:
        assert_never(fmt)


def iter_nested(problem: ArchiveProblem) -> Iterator[ArchiveMember | ArchiveProblem]:
    """The members of a zip inside the package (``deps.zip``, an ``.egg``, a vendored
    wheel, by name or by content), each named under it (``deps.zip/helper.py``), read
    with :data:`NESTED_LIMITS`; nothing for another format or no data.

    Python imports from a zip put on ``sys.path`` (zipimport; an ``.egg`` or ``.pyz``
    the same), so ``sys.path.insert(0, "deps.zip"); import helper`` in setup.py ran a
    payload no rule read (attack8). One level: an archive inside it is reported, not
    opened. What else is wrong inside it (a ``..`` name, a link, a bomb) is reported as
    part of a nested archive, never as the package's own trick: nothing extracts it at
    install (distlib's tests ship a Zip Slip zip and wheel as fixtures).
    """
    import zipfile  # as in _iterate: with the first archive read

    from caplet._scan._archive_zip import iter_zip

    if not problem.data or not zipfile.is_zipfile(io.BytesIO(problem.data)):
        return
    prefix = problem.relative + "/"
    for item in iter_zip(io.BytesIO(problem.data), NESTED_LIMITS, strip_top=False):
        if isinstance(item, ArchiveMember):
            yield ArchiveMember(prefix + item.relative, item.data)
        else:
            yield ArchiveProblem(
                prefix + item.relative if item.relative else problem.relative,
                ArchiveProblemKind.NESTED_ARCHIVE,
                f"inside a nested archive: {item.kind.value}: {item.detail}",
                item.decompressed,
            )
