"""A tar stream is counted and capped as it is decompressed: a bomb costs its cap, not its size."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

from caplet._scan._archive import READ_CHUNK, ArchiveLimits, ArchiveProblem
from tests._scan.archivekit import (
    GIB,
    MIB,
    NO_RATIO,
    SDIST,
    SDIST_MEMBERS,
    K,
    make_tar,
    read_items,
    tar_file,
    tar_gz_bomb,
    zero_stream,
)


def test_tar_gz_member_of_zeros_is_refused_by_ratio_while_streaming(tmp_path: Path) -> None:
    path = tar_gz_bomb(tmp_path / "bomb-1.0.tar.gz", member_size=32 * MIB, zeros=33 * MIB)
    limits = ArchiveLimits()
    [problem] = read_items(path)
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("bomb.py", K.COMPRESSION_RATIO)
    assert problem.detail.endswith(f"compressed (over {limits.max_ratio}:1); reading stopped")
    assert limits.ratio_floor_bytes < problem.decompressed <= limits.ratio_floor_bytes + READ_CHUNK


@pytest.mark.parametrize("compression", ["bz2", "xz"])
def test_bz2_and_xz_members_of_zeros_are_refused_by_ratio(tmp_path: Path, compression: str) -> None:
    members = [tar_file("pkg-1.0/bomb.py", bytes(4 * MIB))]
    path = make_tar(tmp_path / f"bomb-1.0.tar.{compression}", members, compression)
    limits = ArchiveLimits()
    [problem] = read_items(path)
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("bomb.py", K.COMPRESSION_RATIO)
    assert limits.ratio_floor_bytes < problem.decompressed <= limits.ratio_floor_bytes + READ_CHUNK


def test_tar_gz_with_10_gib_of_zeros_after_the_end_is_capped_while_streaming(
    tmp_path: Path,
) -> None:
    small = make_tar(tmp_path / "small.tar", SDIST, "").read_bytes()
    path = tmp_path / "bomb-1.0.tar.gz"
    path.write_bytes(zero_stream(small, 10 * GIB, wbits=31))
    cap = 8 * MIB
    items = read_items(path, max_total_bytes=cap, **NO_RATIO)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("", K.TOTAL_TOO_LARGE)
    assert problem.detail == f"the archive expands past {cap} bytes; reading stopped"
    assert cap < problem.decompressed <= cap + READ_CHUNK


def test_concatenated_gzip_members_and_zero_padding_are_read(tmp_path: Path) -> None:
    plain = make_tar(tmp_path / "plain.tar", SDIST, "").read_bytes()
    half = len(plain) // 2
    first, second = (zlib.compressobj(6, zlib.DEFLATED, 31) for _ in range(2))
    stream = first.compress(plain[:half]) + first.flush() + bytes(512)
    stream += second.compress(plain[half:]) + second.flush() + bytes(100)
    path = tmp_path / "pkg-1.0.tar.gz"
    path.write_bytes(stream)
    assert read_items(path) == SDIST_MEMBERS


def test_gzip_with_a_wrong_crc_is_corrupt(tmp_path: Path) -> None:
    noise = random.Random(2).randbytes(64 * 1024)
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, tar_file("pkg-1.0/noise.bin", noise)])
    raw = bytearray(path.read_bytes())
    raw[-8] ^= 0xFF  # the trailer's CRC-32 (RFC 1952)
    path.write_bytes(bytes(raw))
    items = read_items(path)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("", K.CORRUPT)
    assert problem.detail.startswith("tar.gz archive: ")
    assert problem.detail.endswith("Error -3 while decompressing data: incorrect data check")
