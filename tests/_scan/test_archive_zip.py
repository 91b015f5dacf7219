"""A zip's members: links, special files, unreadable methods, lying sizes and damage."""

from __future__ import annotations

import random
import stat
import zipfile
import zlib
from pathlib import Path

import pytest

from caplet._scan._archive import READ_CHUNK, ArchiveMember, ArchiveProblem, ArchiveProblemKind
from tests._scan.archivekit import GIB, MIB, NO_RATIO, K, make_zip, read_items, zip_bomb


@pytest.mark.parametrize(
    ("mode", "kind", "detail"),
    [
        (stat.S_IFIFO | 0o644, K.SPECIAL_FILE, "special file (mode prw-r--r--)"),
        (stat.S_IFCHR | 0o644, K.SPECIAL_FILE, "special file (mode crw-r--r--)"),
    ],
)
def test_zip_links_and_special_files_are_refused(
    tmp_path: Path, mode: int, kind: ArchiveProblemKind, detail: str
) -> None:
    info = zipfile.ZipInfo("pkg/link.py")
    info.create_system = 3
    info.external_attr = mode << 16
    path = make_zip(tmp_path / "x.whl", [(info, b"/etc/passwd"), ("pkg/ok.py", b"")])
    assert read_items(path) == [
        ArchiveProblem("pkg/link.py", kind, detail),
        ArchiveMember("pkg/ok.py", b""),
    ]


def test_a_zip_link_is_reported_and_read_as_the_file_installers_write(tmp_path: Path) -> None:
    # pip's unzip_file and wheel installer write a link entry's bytes as a regular file:
    # a setup.py stored as a "link" whose bytes are the payload was never read (attack8)
    info = zipfile.ZipInfo("pkg/link.py")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    path = make_zip(tmp_path / "x.whl", [(info, b"import os"), ("pkg/ok.py", b"")])
    problem, member, other = read_items(path)
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("pkg/link.py", K.LINK)
    assert "read as one" in problem.detail
    assert member == ArchiveMember("pkg/link.py", b"import os")
    assert other == ArchiveMember("pkg/ok.py", b"")


def test_encrypted_zip_member_is_unreadable(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "x.whl", [("pkg/a.py", b"x")])
    raw = bytearray(path.read_bytes())
    central = raw.index(b"PK\x01\x02")
    raw[6] |= 1  # general purpose flags, bit 0: encrypted (local header ...
    raw[central + 8] |= 1  # ... and central directory)
    path.write_bytes(bytes(raw))
    assert read_items(path) == [ArchiveProblem("pkg/a.py", K.UNREADABLE, "encrypted")]


def test_bzip2_zip_member_is_unreadable(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "x.whl", [("pkg/a.py", b"x")], zipfile.ZIP_BZIP2)
    [problem] = read_items(path)
    assert isinstance(problem, ArchiveProblem)
    assert problem.kind is K.UNREADABLE
    assert problem.detail.startswith("compression method 12 (only stored and deflate are read")


def test_zip_member_declaring_10_gib_is_refused_before_decompressing(tmp_path: Path) -> None:
    path = zip_bomb(tmp_path / "bomb.zip", declared=10 * GIB, zeros=10 * GIB)
    assert path.stat().st_size < 12 * MIB
    with zipfile.ZipFile(path) as archive:
        packed = archive.getinfo("pkg-1.0/bomb.py").compress_size
    [by_ratio] = read_items(path)
    assert by_ratio == ArchiveProblem(
        "bomb.py",
        K.COMPRESSION_RATIO,
        f"declares {10 * GIB} bytes from {packed} compressed (over 200:1)",
        0,
    )
    [by_size] = read_items(path, **NO_RATIO)
    assert by_size == ArchiveProblem(
        "bomb.py", K.MEMBER_TOO_LARGE, f"declares {10 * GIB} bytes, limit {64 * MIB}", 0
    )


def test_zip_member_that_lies_about_its_size_stops_at_the_declared_size(tmp_path: Path) -> None:
    # The stream holds 10 GiB but the directory says 1 MiB: zipfile stops there,
    # then the CRC (wrong on purpose) fails.
    path = zip_bomb(tmp_path / "bomb.zip", declared=MIB, zeros=10 * GIB)
    [problem] = read_items(path)
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("bomb.py", K.CORRUPT)
    assert problem.detail == "Bad CRC-32 for file 'pkg-1.0/bomb.py'"
    # Counted as zipfile delivers it: the read that failed the CRC delivered nothing.
    assert MIB - READ_CHUNK <= problem.decompressed <= MIB + READ_CHUNK


def test_zip_with_a_correct_crc_but_trailing_stream_yields_only_the_declared_bytes(
    tmp_path: Path,
) -> None:
    path = zip_bomb(tmp_path / "bomb.zip", declared=MIB, zeros=10 * GIB, crc=zlib.crc32(bytes(MIB)))
    assert read_items(path) == [ArchiveMember("bomb.py", bytes(MIB))]


def test_zip_total_cap_stops_reading(tmp_path: Path) -> None:
    rng = random.Random(4)
    blobs = [rng.randbytes(512 * 1024) for _ in range(3)]
    path = make_zip(tmp_path / "x.whl", [(f"pkg/{i}.bin", blob) for i, blob in enumerate(blobs)])
    items = read_items(path, max_total_bytes=MIB)
    assert items[:2] == [ArchiveMember("pkg/0.bin", blobs[0]), ArchiveMember("pkg/1.bin", blobs[1])]
    assert items[2:] == [
        ArchiveProblem(
            "pkg/2.bin",
            K.TOTAL_TOO_LARGE,
            f"would bring the archive past {MIB} bytes; reading stopped",
            MIB,
        )
    ]


def test_zip_with_a_broken_member_keeps_the_others(tmp_path: Path) -> None:
    path = make_zip(
        tmp_path / "x.whl", [("pkg/a.py", b"a" * 100), ("pkg/b.py", b"b")], zipfile.ZIP_STORED
    )
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"a" * 100, b"a" * 99 + b"!", 1))
    assert read_items(path) == [
        ArchiveProblem("pkg/a.py", K.CORRUPT, "Bad CRC-32 for file 'pkg/a.py'", 0),
        ArchiveMember("pkg/b.py", b"b"),
    ]


def test_zip_magic_without_a_directory_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "x.whl"
    path.write_bytes(b"PK\x03\x04" + bytes(100))
    assert read_items(path) == [
        ArchiveProblem("", K.CORRUPT, "cannot read the zip directory: File is not a zip file")
    ]
