"""The format comes from the bytes: a name that disagrees, a polyglot, an archive inside."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from caplet._errors import ScanError
from caplet._scan._archive import ArchiveFormat, ArchiveMember, ArchiveProblem, iter_archive
from caplet._scan._archive_format import _zip_opens, detect_format
from tests._scan.archivekit import SDIST, SDIST_MEMBERS, K, make_tar, make_zip, read_items, tar_file


@pytest.mark.parametrize(
    ("name", "data", "detail"),
    [
        ("pkg-1.0/vendor.whl", b"anything", "archive member, not opened"),
        ("pkg-1.0/data.tar.gz", b"anything", "archive member, not opened"),
        ("pkg-1.0/blob.bin", b"PK\x03\x04rest", "archive content, not opened"),
        ("pkg-1.0/blob.bin", b"\x1f\x8b\x08rest", "archive content, not opened"),
        ("pkg-1.0/blob.bin", b"BZh91AY&SYrest", "archive content, not opened"),
        ("pkg-1.0/blob.bin", bytes(257) + b"ustar\x0000", "archive content, not opened"),
    ],
)
def test_nested_archives_are_reported_not_opened(
    tmp_path: Path, name: str, data: bytes, detail: str
) -> None:
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [tar_file(name, data)])
    assert read_items(path) == [ArchiveProblem(name[8:], K.NESTED_ARCHIVE, detail, 10240)]


def test_text_mentioning_ustar_elsewhere_is_not_an_archive(tmp_path: Path) -> None:
    data = b"# ustar\n" * 100
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [tar_file("pkg-1.0/notes.py", data)])
    assert read_items(path) == [ArchiveMember("notes.py", data)]


def test_wheel_that_is_a_tarball_is_a_mismatch_and_read_as_tar(tmp_path: Path) -> None:
    path = make_tar(tmp_path / "pkg-1.0-py3-none-any.whl", SDIST)
    items = read_items(path)
    assert items[0] == ArchiveProblem(
        "",
        K.FORMAT_MISMATCH,
        "pkg-1.0-py3-none-any.whl is named like a zip file but is a tar.gz archive",
    )
    assert items[1:] == SDIST_MEMBERS


def test_tarball_that_is_also_a_zip_is_read_as_pip_would(tmp_path: Path) -> None:
    tar = make_tar(tmp_path / "t.tar.gz", SDIST)
    zipped = make_zip(tmp_path / "z.zip", [("pkg-1.0/evil.py", b"evil()\n")])
    path = tmp_path / "pkg-1.0.tar.gz"
    path.write_bytes(tar.read_bytes() + zipped.read_bytes())
    assert read_items(path) == [
        ArchiveProblem(
            "",
            K.FORMAT_MISMATCH,
            "pkg-1.0.tar.gz is both a tar.gz stream and a zip archive;"
            " read as a zip, as pip would unpack it",
        ),
        ArchiveProblem(
            "", K.FORMAT_MISMATCH, "pkg-1.0.tar.gz is named like a tar.gz file but is a zip archive"
        ),
        ArchiveMember("evil.py", b"evil()\n"),
    ]


def test_detect_format_reads_the_bytes(tmp_path: Path) -> None:
    assert detect_format(make_tar(tmp_path / "a.whl", SDIST, "bz2")) is ArchiveFormat.TAR_BZ2
    assert detect_format(make_tar(tmp_path / "b", SDIST, "xz")) is ArchiveFormat.TAR_XZ
    assert detect_format(make_tar(tmp_path / "c", SDIST, "")) is ArchiveFormat.TAR
    assert detect_format(make_tar(tmp_path / "d", SDIST, "gz")) is ArchiveFormat.TAR_GZ
    assert detect_format(make_zip(tmp_path / "e.tar.gz", [("a", b"")])) is ArchiveFormat.ZIP
    source = tmp_path / "f.py"
    source.write_text("print('hi')\n")
    assert detect_format(source) is None


def test_missing_archive_is_a_scan_error_at_call_time(tmp_path: Path) -> None:
    missing = tmp_path / "nope.whl"
    with pytest.raises(ScanError, match=r"cannot read archive .*nope\.whl: No such file"):
        iter_archive(missing)  # not iterated: the error comes at once


def test_directory_is_not_an_archive(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="Is a directory; pass an existing, readable wheel"):
        iter_archive(tmp_path)


def test_text_file_named_like_a_wheel_is_a_scan_error(tmp_path: Path) -> None:
    path = tmp_path / "fake.whl"
    path.write_text("not an archive\n")
    with pytest.raises(
        ScanError, match=r"fake\.whl: it is neither a zip \(\.whl, \.zip\) nor a tar"
    ):
        iter_archive(path)


def _zip_with_comment(comment: bytes, prefix: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pkg/mod.py", "x = 1\n")
        archive.comment = comment
    return prefix + buffer.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_zip_with_comment(b""), id="plain zip"),
        # the end record as far from the end as zipfile looks (a 64 KiB comment)
        pytest.param(_zip_with_comment(b"c" * 0xFFFF), id="longest comment"),
        pytest.param(_zip_with_comment(b"", b"\x89PNG" * 50_000), id="appended"),
        pytest.param(_zip_with_comment(b"")[:-5], id="truncated end record"),
        pytest.param(b"x = b'PK\\x05\\x06'\n" + b"PK\x05\x06" + bytes(18), id="lookalike"),
        pytest.param(b"PK\x05\x06" + bytes(18) + b"#" * 70_000, id="record too early"),
        pytest.param(b"import os\n" * 10_000, id="source"),
        pytest.param(b"", id="empty"),
    ],
)
def test_the_quick_zip_answer_is_zipfiles(tmp_path: Path, data: bytes) -> None:
    """A file without the end record's signature in zipfile's search window is answered
    without zipfile (the start-up of `caplet scan DIR`); every answer is still zipfile's."""
    path = tmp_path / "candidate"
    path.write_bytes(data)
    try:
        with zipfile.ZipFile(path):
            opens = True
    except zipfile.BadZipFile:
        opens = False
    assert _zip_opens(path) is opens
