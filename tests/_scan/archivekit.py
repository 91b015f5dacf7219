"""Archives built at test time, for the tests of :mod:`caplet._scan._archive` and its parts.

Bombs are built by repeating one deflate block of a fully flushed run of
zeros (``Z_FULL_FLUSH`` resets the compressor, so every further MiB of zeros
compresses to the very same bytes): a 10 GiB bomb is ~10 MB on disk and
costs milliseconds to write. Their CRCs are wrong on purpose: a reader that
got that far has already failed the test.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from caplet._scan._archive import (
    ArchiveLimits,
    ArchiveMember,
    ArchiveProblem,
    ArchiveProblemKind,
    iter_archive,
)

MIB = 1024 * 1024
GIB = 1024 * MIB
K = ArchiveProblemKind

#: The ratio check off, to reach the caps behind it.
NO_RATIO = {"max_ratio": 10**9}


# -- builders -------------------------------------------------------------------


def tar_file(name: str, data: bytes = b"") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def tar_special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, b""


_COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "": bytes,
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


def make_tar(
    path: Path, members: list[tuple[tarfile.TarInfo, bytes]], compression: str = "gz"
) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(_COMPRESS[compression](buffer.getvalue()))
    return path


def make_zip(
    path: Path,
    members: list[tuple[str | zipfile.ZipInfo, bytes]],
    method: int = zipfile.ZIP_DEFLATED,
) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return path


SDIST = [
    tar_special("pkg-1.0", tarfile.DIRTYPE),
    tar_file("pkg-1.0/setup.py", b"from setuptools import setup\nsetup()\n"),
    tar_file("pkg-1.0/src/pkg/__init__.py", b"VERSION = '1.0'\n"),
]
SDIST_MEMBERS = [
    ArchiveMember("setup.py", b"from setuptools import setup\nsetup()\n"),
    ArchiveMember("src/pkg/__init__.py", b"VERSION = '1.0'\n"),
]


def read_items(path: Path, **limits: int) -> list[ArchiveMember | ArchiveProblem]:
    return list(iter_archive(path, limits=ArchiveLimits(**limits)))


def read_problems(path: Path, **limits: int) -> list[ArchiveProblem]:
    return [i for i in read_items(path, **limits) if isinstance(i, ArchiveProblem)]


def read_members(path: Path, **limits: int) -> list[ArchiveMember]:
    return [i for i in read_items(path, **limits) if isinstance(i, ArchiveMember)]


def zero_stream(prefix: bytes, zeros: int, wbits: int) -> bytes:
    """``prefix`` then ``zeros`` zero bytes (a multiple of 1 MiB), deflated by repetition."""
    assert zeros % MIB == 0
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(MIB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return head + block * (zeros // MIB) + compressor.flush()


def tar_gz_bomb(path: Path, *, member_size: int, zeros: int, prefix: bytes = b"") -> Path:
    """A gzip stream: ``prefix``, one member header declaring ``member_size``, zeros."""
    info = tarfile.TarInfo("pkg-1.0/bomb.py")
    info.size = member_size
    header = info.tobuf(tarfile.PAX_FORMAT) if member_size else b""
    path.write_bytes(zero_stream(prefix + header, zeros, wbits=31))
    return path


def zip_bomb(path: Path, *, declared: int, zeros: int, crc: int = 0) -> Path:
    """One deflated member of ``zeros`` zero bytes that declares ``declared`` (Zip64)."""
    name = b"pkg-1.0/bomb.py"
    data = zero_stream(b"", zeros, wbits=-15)
    extra = struct.pack("<HHQQ", 1, 16, declared, len(data))
    big = 0xFFFFFFFF
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0x21, crc, big, big, len(name), len(extra)
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50,
        (3 << 8) | 45,
        45,
        0,
        8,
        0,
        0x21,
        crc,
        big,
        big,
        len(name),
        len(extra),
        0,
        0,
        0,
        (stat.S_IFREG | 0o644) << 16,
        0,
    )
    body = local + name + extra + data
    directory = central + name + extra
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(directory), len(body), 0)
    path.write_bytes(body + directory + end)
    return path
