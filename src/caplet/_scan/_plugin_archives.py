"""Whether a file of a plugin is an archive: code in it is code the scanner never read.

The scanner reads archives only as the target of a package scan (an sdist, a wheel). In a
plugin's tree an archive was a data file, which the auditor model is shown as "binary,
content not shown": a plugin that shipped ``payload.tar`` holding ``evil.py`` (``import
ctypes``), extracted it at run time into its private ``/tmp`` and imported it from there
passed the danger gate with a supply-chain warning for the import, and ran ctypes in its
jail (steer22). So in plugin mode an archive is CPL-SCAN-006, danger, as a file too large to
scan is (CPL-SCAN-001): the gate fails closed on code it could not read, and a plugin ships
its files unpacked.

Judged by the bytes, never the name (``notes.dat`` may be a zip): the signatures of zip,
gzip, bzip2, xz, zstd and 7-Zip at the start, a tar header's ``ustar`` magic, and a zip's
end record anywhere zipfile would find it (a zip appended to a PNG opens as a zip).
"""

from __future__ import annotations

import os
import stat
from typing import Final

__all__ = ["is_archive"]

#: What the start of an archive or a compressed stream looks like.
_SIGNATURES: Final = (
    b"PK\x03\x04",  # zip: a local file header
    b"PK\x05\x06",  # zip: an empty archive's end record
    b"\x1f\x8b",  # gzip (a .tar.gz, or one file gzipped)
    b"BZh",  # bzip2
    b"\xfd7zXZ\x00",  # xz
    b"\x28\xb5\x2f\xfd",  # zstd
    b"7z\xbc\xaf\x27\x1c",  # 7-Zip
)
#: Where a tar header (POSIX ustar or GNU) says what it is.
_TAR_MAGIC: Final = slice(257, 262)
_HEAD: Final = 512


def is_archive(path: str) -> bool:
    """True when the regular file at ``path`` is an archive or a compressed stream.

    Opened as the collector opens sources (no link followed, no FIFO waited on); a
    file that cannot be read is not judged here (the collector reports it).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with os.fdopen(os.dup(fd), "rb") as handle:
            head = handle.read(_HEAD)
            if head.startswith(_SIGNATURES) or head[_TAR_MAGIC] == b"ustar":
                return True
            # zipfile finds a zip by its end record, wherever the file starts (a
            # polyglot); it reads at most the last 64 KiB and a little more. Imported
            # here, by the first data file asked about, not by every `caplet scan`
            # (issue 16: start-up <= 150 ms of CPU).
            import zipfile

            return zipfile.is_zipfile(handle)
    except OSError:
        return False
    finally:
        os.close(fd)
