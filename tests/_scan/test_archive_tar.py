"""A tar's members: links and special files, sizes from the header, damage, data after the end."""

from __future__ import annotations

import random
import tarfile
from pathlib import Path

import pytest

from caplet._scan._archive import READ_CHUNK, ArchiveLimits, ArchiveProblem, ArchiveProblemKind
from tests._scan.archivekit import (
    GIB,
    MIB,
    SDIST,
    SDIST_MEMBERS,
    K,
    make_tar,
    read_items,
    read_problems,
    tar_file,
    tar_gz_bomb,
    tar_special,
)


@pytest.mark.parametrize(
    ("member", "kind", "detail"),
    [
        (
            tar_special("pkg-1.0/s", tarfile.SYMTYPE, "/etc/passwd"),
            K.LINK,
            "symbolic link to /etc/passwd",
        ),
        (
            tar_special("pkg-1.0/h", tarfile.LNKTYPE, "pkg-1.0/setup.py"),
            K.LINK,
            "hard link to pkg-1.0",
        ),
        (tar_special("pkg-1.0/s", tarfile.CHRTYPE), K.SPECIAL_FILE, "tar member type b'3'"),
        (tar_special("pkg-1.0/s", tarfile.BLKTYPE), K.SPECIAL_FILE, "tar member type b'4'"),
        (tar_special("pkg-1.0/s", tarfile.FIFOTYPE), K.SPECIAL_FILE, "tar member type b'6'"),
    ],
)
def test_links_and_special_tar_members_are_refused(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes], kind: ArchiveProblemKind, detail: str
) -> None:
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, member])
    assert read_problems(path) == [
        ArchiveProblem(member[0].name[8:], kind, detail + _tail(detail), 10240)
    ]


def _tail(detail: str) -> str:
    # The rest of each detail, so the whole message is compared.
    if detail.startswith("hard"):
        return "/setup.py"
    if detail.startswith("tar"):
        return " (device, FIFO or unknown), not read"
    return ""


def test_tar_gz_member_declaring_10_gib_is_refused_from_its_header(tmp_path: Path) -> None:
    path = tar_gz_bomb(tmp_path / "bomb-1.0.tar.gz", member_size=10 * GIB, zeros=10 * GIB)
    assert path.stat().st_size < 12 * MIB
    limits = ArchiveLimits()
    member, total = read_items(path)
    assert isinstance(member, ArchiveProblem)
    assert isinstance(total, ArchiveProblem)
    assert (member.relative, member.kind) == ("bomb.py", K.MEMBER_TOO_LARGE)
    assert member.detail == f"{10 * GIB} bytes, limit {limits.max_member_bytes}"
    assert total.kind is K.TOTAL_TOO_LARGE
    assert total.detail.startswith(f"skipping its {10 * GIB} bytes would bring the archive past")
    # Only the header records were decompressed: not one byte of the member.
    assert total.decompressed <= 2 * 10240 < limits.max_member_bytes + READ_CHUNK


def test_truncated_tar_gz_yields_what_was_read_then_corrupt(tmp_path: Path) -> None:
    noise = random.Random(1).randbytes(256 * 1024)
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, tar_file("pkg-1.0/noise.bin", noise)])
    path.write_bytes(path.read_bytes()[: 128 * 1024])
    items = read_items(path)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("", K.CORRUPT)
    assert problem.detail == (
        "tar.gz archive: Compressed file ended before the end-of-stream marker was reached"
    )


def test_data_hidden_after_the_tar_end_marker_is_reported(tmp_path: Path) -> None:
    path = make_tar(tmp_path / "pkg-1.0.tar", SDIST, "")
    path.write_bytes(path.read_bytes() + b"import os; os.system('evil')\n")
    items = read_items(path)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert problem.kind is K.CORRUPT
    assert problem.detail.startswith("29 bytes of data after the end of the tar archive")
