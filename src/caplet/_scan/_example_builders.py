"""Builders of the examples' sources and trees: dedented code, fullwidth names, file trees,
archives built in memory (bombs included: a Z_FULL_FLUSH deflate block of zeros repeated,
so a member of megabytes costs a few kilobytes and no compression time)."""

from __future__ import annotations

import importlib.util
import io
import struct
import tarfile
import zlib
from collections.abc import Sequence
from typing import Final

from caplet._capabilities._model import EnvReadCapability
from caplet._scan._example_model import FileTree, Link
from caplet._scan._model import ScanMode

__all__ = [
    "ELF",
    "LONG",
    "MIB",
    "PACKAGE_MODE",
    "PLUGIN_MODE",
    "PYC",
    "SETUP",
    "TOKEN_READER",
    "code",
    "fullwidth",
    "tar_gz",
    "tar_gz_of_zeros",
    "tree",
    "zip",
    "zip_of_zeros",
]


def code(text: str) -> str:
    """Dedented source, without the leading newline of a triple-quoted literal.

    ``textwrap.dedent`` does the same with regular expressions, ten times
    slower: the examples are built on the first scan of every process.
    """
    lines = text.lstrip("\n").split("\n")
    indent = min(len(line) - len(line.lstrip(" ")) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def fullwidth(name: str) -> str:
    """``name`` in fullwidth letters: Python reads them as ASCII (NFKC, PEP 3131)."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in name)


def tree(*entries: tuple[str, str | bytes | Link]) -> FileTree:
    """A tree; text entries are stored as UTF-8."""
    return tuple((p, d.encode() if isinstance(d, str) else d) for p, d in entries)


MIB: Final = 1024 * 1024
_ZERO_BLOCK: Final = 64 * 1024
#: Archives expand this much before their compression ratio is judged
#: (``ArchiveLimits.ratio_floor_bytes``): a bomb must be larger.
_RATIO_FLOOR: Final = MIB


def _zeros_deflated(prefix: bytes, zeros: int, *, checksum: bool) -> tuple[bytes, int]:
    """Raw deflate of ``prefix`` then ``zeros`` zero bytes, and its CRC-32 (or 0).

    After a Z_FULL_FLUSH the compressor keeps no history, so every further
    block of zeros compresses to the very same bytes: they are repeated
    instead of compressed again (megabytes cost microseconds). Without
    ``checksum`` the CRC is 0: a bomb is refused long before its end, where
    the CRC would be checked, and hashing its megabytes is the one cost left.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    blocks, rest = divmod(zeros, _ZERO_BLOCK)
    block = compressor.compress(bytes(_ZERO_BLOCK)) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.compress(bytes(rest)) + compressor.flush()
    crc = 0
    if checksum:
        crc = zlib.crc32(prefix)
        zero_block = bytes(_ZERO_BLOCK)
        for _ in range(blocks):
            crc = zlib.crc32(zero_block, crc)
        crc = zlib.crc32(bytes(rest), crc)
    return head + block * blocks + tail, crc


def _tar_bytes(members: Sequence[tuple[str, bytes | Link]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if isinstance(data, Link):
                info.type = tarfile.SYMTYPE
                info.linkname = data.target
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _gzip(raw_deflate: bytes, crc: int, size: int) -> bytes:
    """A gzip member around a raw deflate stream (mtime 0: reproducible bytes)."""
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + raw_deflate + struct.pack("<II", crc, size & 0xFFFFFFFF)


def tar_gz(*members: tuple[str, str | bytes | Link]) -> bytes:
    """A small .tar.gz of ``members`` (text is stored as UTF-8)."""
    data = _tar_bytes(tree(*members))
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = compressor.compress(data) + compressor.flush()
    return _gzip(raw, zlib.crc32(data), len(data))


def tar_gz_of_zeros(name: str, size: int) -> bytes:
    """A .tar.gz whose one member is ``size`` zero bytes (a bomb when ``size`` is large)."""
    info = tarfile.TarInfo(name)
    info.size = size
    header = info.tobuf(tarfile.PAX_FORMAT)
    # Member data, padding and the end-of-archive blocks are all zeros.
    zeros = -(-size // 512) * 512 + 2 * 512
    raw, crc = _zeros_deflated(header, zeros, checksum=size <= _RATIO_FLOOR)
    return _gzip(raw, crc, len(header) + zeros)


def zip_of_zeros(name: str, size: int) -> bytes:
    """A zip whose one deflated member is ``size`` zero bytes, with honest sizes."""
    encoded = name.encode()
    data, crc = _zeros_deflated(b"", size, checksum=size <= _RATIO_FLOOR)
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), size, len(encoded), 0
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50,
        (3 << 8) | 20,
        20,
        0,
        8,
        0,
        0x21,
        crc,
        len(data),
        size,
        len(encoded),
        0,
        0,
        0,
        0,
        0o100644 << 16,
        0,
    )
    body = local + encoded + data
    directory = central + encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(directory), len(body), 0)
    return body + directory + end


def zip(*members: tuple[str, str | bytes]) -> bytes:
    """A small stored zip of ``members`` (names as given: tricks included)."""
    body = b""
    directory = b""
    for name, text in members:
        encoded = name.encode()
        data = text.encode() if isinstance(text, str) else text
        crc = zlib.crc32(data)
        offset = len(body)
        sizes = (crc, len(data), len(data), len(encoded))
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, *sizes, 0)
        body += encoded + data
        directory += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            (3 << 8) | 20,
            20,
            0,
            0,
            0,
            0x21,
            crc,
            len(data),
            len(data),
            len(encoded),
            0,
            0,
            0,
            0,
            0o100644 << 16,
            offset,
        )
        directory += encoded
    end = struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), len(body), 0
    )
    return body + directory + end


#: A directory name of 250 characters; 17 of them nest deeper than PATH_MAX
#: (4096 bytes on Linux), so the walk cannot open the innermost directory.
LONG: Final = "d" * 250
TOKEN_READER = EnvReadCapability(name="TOKEN", declared="env.read:TOKEN")
ELF: Final = b"\x7fELF\x02\x01\x01" + bytes(57)
PYC: Final = importlib.util.MAGIC_NUMBER + bytes(12) + b"\xe3" + bytes(15)
SETUP = code(
    """
    from setuptools import setup

    setup(name="demo", version="1.0", url="https://github.com/example/demo")
    """
)

PLUGIN_MODE, PACKAGE_MODE = ScanMode.PLUGIN, ScanMode.PACKAGE
