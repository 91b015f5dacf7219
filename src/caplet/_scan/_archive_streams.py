"""A tar archive's decompressed stream, counted and capped as tarfile reads it.

Every byte a decompressor produces is counted as it is produced, and
reading stops as soon as the total cap or the compression-ratio bound is
crossed (:class:`RefusedError`), so a decompression bomb costs at most its
cap plus one read, never its expanded size. The compressed input is handed
over in small steps (and gzip is inflated here with :mod:`zlib`) so the
compressed bytes a ratio is measured against are what was really used.
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from collections.abc import Callable
from typing import Final, Protocol, assert_never

from caplet._scan._archive_model import READ_CHUNK, ArchiveFormat, ArchiveLimits, ArchiveProblemKind

__all__ = ["CountingReader", "RefusedError", "SteppedReader", "open_stream"]


class RefusedError(Exception):
    """Raised by the counting reader when a cap is crossed (never caught by tarfile)."""

    def __init__(self, kind: ArchiveProblemKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class CountingReader:
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
            raise RefusedError(
                ArchiveProblemKind.TOTAL_TOO_LARGE,
                f"the archive expands past {limits.max_total_bytes} bytes; reading stopped",
            )
        if self._consumed is not None and self.count > limits.ratio_floor_bytes:
            packed = max(self._consumed(), 1)
            if self.count > limits.max_ratio * packed:
                raise RefusedError(
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
        """The files are closed by their owner, :func:`iter_tar`."""


#: Compressed bytes handed to a tar stream's decompressor per read.
_RAW_STEP: Final = 2048


class SteppedReader(io.BufferedReader):
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


class _Decompressed(Protocol):
    def read(self, size: int, /) -> bytes: ...
    def close(self) -> None: ...


def open_stream(
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
