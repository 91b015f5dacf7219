"""iter_archive: the format from the bytes picks the reader; members and problems in order.

All archives are generated at test time (tests/_scan/archivekit.py). The
tests of each part are beside it: test_archive_format, _names, _streams,
_zip, _tar and _model.
"""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

from caplet._scan._archive import ArchiveMember, ArchiveProblem
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from tests._scan.archivekit import (
    SDIST,
    SDIST_MEMBERS,
    K,
    make_tar,
    make_zip,
    read_items,
    tar_file,
    tar_special,
)


@pytest.mark.parametrize(
    ("suffix", "compression"),
    [
        (".tar.gz", "gz"),
        (".tgz", "gz"),
        (".tar", ""),
        (".tar.bz2", "bz2"),
        (".tar.xz", "xz"),
    ],
)
def test_tar_sdist_members_lose_the_top_folder(
    tmp_path: Path, suffix: str, compression: str
) -> None:
    path = make_tar(tmp_path / f"pkg-1.0{suffix}", SDIST, compression)
    assert read_items(path) == SDIST_MEMBERS


def test_zip_sdist_members_lose_the_top_folder(tmp_path: Path) -> None:
    path = make_zip(
        tmp_path / "pkg-1.0.zip",
        [
            ("pkg-1.0/", b""),
            ("pkg-1.0/setup.py", SDIST[1][1]),
            ("pkg-1.0/src/pkg/__init__.py", SDIST[2][1]),
        ],
    )
    assert read_items(path) == SDIST_MEMBERS


def test_stored_zip_members_are_read(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "pkg-1.0.zip", [("pkg-1.0/a.py", b"x = 1\n")], zipfile.ZIP_STORED)
    assert read_items(path) == [ArchiveMember("a.py", b"x = 1\n")]


def test_wheel_keeps_its_root(tmp_path: Path) -> None:
    path = make_zip(
        tmp_path / "pkg-1.0-py3-none-any.whl",
        [("pkg/__init__.py", b"x = 1\n"), ("pkg-1.0.dist-info/METADATA", b"Name: pkg\n")],
    )
    assert read_items(path) == [
        ArchiveMember("pkg/__init__.py", b"x = 1\n"),
        ArchiveMember("pkg-1.0.dist-info/METADATA", b"Name: pkg\n"),
    ]


def test_single_package_wheel_is_not_stripped(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "pkg-1.0-py3-none-any.whl", [("pkg/__init__.py", b"")])
    assert read_items(path) == [ArchiveMember("pkg/__init__.py", b"")]


def test_tar_without_top_folder_keeps_paths_and_drops_dot_components(tmp_path: Path) -> None:
    path = make_tar(
        tmp_path / "flat.tar.gz",
        [
            tar_special(".", tarfile.DIRTYPE),
            tar_file("./setup.py", b"a"),
            tar_file("./src//m.py", b"b"),
        ],
    )
    assert read_items(path) == [ArchiveMember("setup.py", b"a"), ArchiveMember("src/m.py", b"b")]


def test_member_outside_the_top_folder_keeps_its_full_path(tmp_path: Path) -> None:
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, tar_file("extra/x.py", b"c")])
    assert read_items(path) == [*SDIST_MEMBERS, ArchiveMember("extra/x.py", b"c")]


def test_member_over_the_cap_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    path = make_tar(
        tmp_path / "pkg-1.0.tar.gz",
        [tar_file("pkg-1.0/big.py", b"#" * 2048), tar_file("pkg-1.0/small.py", b"x")],
    )
    assert read_items(path, max_member_bytes=1024) == [
        ArchiveProblem("big.py", K.MEMBER_TOO_LARGE, "2048 bytes, limit 1024", 10240),
        ArchiveMember("small.py", b"x"),
    ]
    zipped = make_zip(tmp_path / "x.whl", [("pkg/big.py", b"#" * 2048), ("pkg/small.py", b"x")])
    assert read_items(zipped, max_member_bytes=1024) == [
        ArchiveProblem("pkg/big.py", K.MEMBER_TOO_LARGE, "declares 2048 bytes, limit 1024"),
        ArchiveMember("pkg/small.py", b"x"),
    ]


def test_too_many_members_stop_reading(tmp_path: Path) -> None:
    files = [tar_file(f"pkg-1.0/m{i}.py", b"") for i in range(5)]
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", files)
    items = read_items(path, max_members=3)
    assert [i.relative for i in items] == ["m0.py", "m1.py", "m2.py", ""]
    problem = items[-1]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.kind, problem.detail) == (
        K.TOO_MANY_MEMBERS,
        "more than 3 members; the rest were not read",
    )
    zipped = make_zip(tmp_path / "x.whl", [(f"pkg/m{i}.py", b"") for i in range(5)])
    assert read_items(zipped, max_members=3)[3:] == [
        ArchiveProblem("", K.TOO_MANY_MEMBERS, "5 members, limit 3; the rest were not read")
    ]


DROPPER = b'import base64\nexec(base64.b64decode("aW1wb3J0IG9zOyBvcy5zeXN0ZW0oJ2lkJyk="))\n'


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE], ids=lambda m: m.value)
@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_a_payload_in_the_second_copy_of_a_name_is_found(
    tmp_path: Path, kind: str, mode: ScanMode
) -> None:
    # Attack (scanfuzz): the second member of a name was "not read", a warning, while
    # the installer unpacks the last copy: a dropper in it passed even a plugin's gate.
    if kind == "zip":
        with pytest.warns(UserWarning, match="Duplicate name"):
            path = make_zip(
                tmp_path / "pkg-1.0-py3-none-any.whl",
                [("pkg/a.py", b"VALUE = 1\n"), ("pkg/a.py", DROPPER)],
            )
    else:
        path = make_tar(
            tmp_path / "pkg-1.0.tar.gz",
            [
                *SDIST,
                tar_file("pkg-1.0/pkg/a.py", b"VALUE = 1\n"),
                tar_file("pkg-1.0/pkg/a.py", DROPPER),
            ],
        )
    report = scan_tree(path, mode=mode)
    assert ("CPL-THR-001", "pkg/a.py", 2) in {
        (f.rule_id, f.file, f.line) for f in report.uncovered_dangers()
    }
    [duplicate] = [f for f in report.findings if f.rule_id == "CPL-ARC-003"]
    assert "scanned too (an installer keeps the last copy)" in duplicate.message
