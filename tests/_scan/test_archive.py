"""Archives are read without extraction; every trick and every bomb becomes a problem.

All archives are generated at test time. Bombs are built by repeating one
deflate block of a fully flushed run of zeros (``Z_FULL_FLUSH`` resets the
compressor, so every further MiB of zeros compresses to the very same bytes):
a 10 GiB bomb is ~10 MB on disk and costs milliseconds to write. Their CRCs
are wrong on purpose: a reader that got that far has already failed the test.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import stat
import struct
import tarfile
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from caplet._errors import ScanError
from caplet._scan._archive import (
    READ_CHUNK,
    ArchiveFormat,
    ArchiveLimits,
    ArchiveMember,
    ArchiveProblem,
    ArchiveProblemKind,
    detect_format,
    iter_archive,
)

MIB = 1024 * 1024
GIB = 1024 * MIB
K = ArchiveProblemKind

#: The ratio check off, to reach the caps behind it.
NO_RATIO = {"max_ratio": 10**9}


# -- builders -------------------------------------------------------------------


def _file(name: str, data: bytes = b"") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
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


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], compression: str = "gz") -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(_COMPRESS[compression](buffer.getvalue()))
    return path


def _zip(
    path: Path,
    members: list[tuple[str | zipfile.ZipInfo, bytes]],
    method: int = zipfile.ZIP_DEFLATED,
) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return path


SDIST = [
    _special("pkg-1.0", tarfile.DIRTYPE),
    _file("pkg-1.0/setup.py", b"from setuptools import setup\nsetup()\n"),
    _file("pkg-1.0/src/pkg/__init__.py", b"VERSION = '1.0'\n"),
]
SDIST_MEMBERS = [
    ArchiveMember("setup.py", b"from setuptools import setup\nsetup()\n"),
    ArchiveMember("src/pkg/__init__.py", b"VERSION = '1.0'\n"),
]


def _items(path: Path, **limits: int) -> list[ArchiveMember | ArchiveProblem]:
    return list(iter_archive(path, limits=ArchiveLimits(**limits)))


def _problems(path: Path, **limits: int) -> list[ArchiveProblem]:
    return [i for i in _items(path, **limits) if isinstance(i, ArchiveProblem)]


def _members(path: Path, **limits: int) -> list[ArchiveMember]:
    return [i for i in _items(path, **limits) if isinstance(i, ArchiveMember)]


def _zero_stream(prefix: bytes, zeros: int, wbits: int) -> bytes:
    """``prefix`` then ``zeros`` zero bytes (a multiple of 1 MiB), deflated by repetition."""
    assert zeros % MIB == 0
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(MIB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return head + block * (zeros // MIB) + compressor.flush()


def _tar_gz_bomb(path: Path, *, member_size: int, zeros: int, prefix: bytes = b"") -> Path:
    """A gzip stream: ``prefix``, one member header declaring ``member_size``, zeros."""
    info = tarfile.TarInfo("pkg-1.0/bomb.py")
    info.size = member_size
    header = info.tobuf(tarfile.PAX_FORMAT) if member_size else b""
    path.write_bytes(_zero_stream(prefix + header, zeros, wbits=31))
    return path


def _zip_bomb(path: Path, *, declared: int, zeros: int, crc: int = 0) -> Path:
    """One deflated member of ``zeros`` zero bytes that declares ``declared`` (Zip64)."""
    name = b"pkg-1.0/bomb.py"
    data = _zero_stream(b"", zeros, wbits=-15)
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


# -- reading -------------------------------------------------------------------------


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
    path = _tar(tmp_path / f"pkg-1.0{suffix}", SDIST, compression)
    assert _items(path) == SDIST_MEMBERS


def test_zip_sdist_members_lose_the_top_folder(tmp_path: Path) -> None:
    path = _zip(
        tmp_path / "pkg-1.0.zip",
        [
            ("pkg-1.0/", b""),
            ("pkg-1.0/setup.py", SDIST[1][1]),
            ("pkg-1.0/src/pkg/__init__.py", SDIST[2][1]),
        ],
    )
    assert _items(path) == SDIST_MEMBERS


def test_stored_zip_members_are_read(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pkg-1.0.zip", [("pkg-1.0/a.py", b"x = 1\n")], zipfile.ZIP_STORED)
    assert _items(path) == [ArchiveMember("a.py", b"x = 1\n")]


def test_wheel_keeps_its_root(tmp_path: Path) -> None:
    path = _zip(
        tmp_path / "pkg-1.0-py3-none-any.whl",
        [("pkg/__init__.py", b"x = 1\n"), ("pkg-1.0.dist-info/METADATA", b"Name: pkg\n")],
    )
    assert _items(path) == [
        ArchiveMember("pkg/__init__.py", b"x = 1\n"),
        ArchiveMember("pkg-1.0.dist-info/METADATA", b"Name: pkg\n"),
    ]


def test_single_package_wheel_is_not_stripped(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pkg-1.0-py3-none-any.whl", [("pkg/__init__.py", b"")])
    assert _items(path) == [ArchiveMember("pkg/__init__.py", b"")]


def test_tar_without_top_folder_keeps_paths_and_drops_dot_components(tmp_path: Path) -> None:
    path = _tar(
        tmp_path / "flat.tar.gz",
        [_special(".", tarfile.DIRTYPE), _file("./setup.py", b"a"), _file("./src//m.py", b"b")],
    )
    assert _items(path) == [ArchiveMember("setup.py", b"a"), ArchiveMember("src/m.py", b"b")]


def test_member_outside_the_top_folder_keeps_its_full_path(tmp_path: Path) -> None:
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, _file("extra/x.py", b"c")])
    assert _items(path) == [*SDIST_MEMBERS, ArchiveMember("extra/x.py", b"c")]


# -- tricks in names and member types ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "detail"),
    [
        ("../evil.py", K.PARENT_TRAVERSAL, "'..' component"),
        ("pkg-1.0/../../etc/evil.py", K.PARENT_TRAVERSAL, "'..' component"),
        ("/etc/cron.d/evil", K.ABSOLUTE_PATH, "absolute path"),
        ("C:/Windows/evil.py", K.UNSAFE_NAME, "drive letter"),
        ("pkg-1.0\\..\\evil.py", K.UNSAFE_NAME, "backslash"),
        ("pkg-1.0/a\x01.py", K.UNSAFE_NAME, "control character U+0001"),
        ("pkg-1.0/evil\u202eyp.py", K.UNSAFE_NAME, "bidirectional control U+202E"),
    ],
)
def test_unsafe_tar_names_are_refused(
    tmp_path: Path, name: str, kind: ArchiveProblemKind, detail: str
) -> None:
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, _file(name, b"payload")])
    items = _items(path)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    shown = name if name.isprintable() else repr(name)[1:-1]
    assert (problem.kind, problem.relative) == (kind, shown)
    assert detail in problem.detail


@pytest.mark.parametrize(
    ("member", "kind", "detail"),
    [
        (
            _special("pkg-1.0/s", tarfile.SYMTYPE, "/etc/passwd"),
            K.LINK,
            "symbolic link to /etc/passwd",
        ),
        (
            _special("pkg-1.0/h", tarfile.LNKTYPE, "pkg-1.0/setup.py"),
            K.LINK,
            "hard link to pkg-1.0",
        ),
        (_special("pkg-1.0/s", tarfile.CHRTYPE), K.SPECIAL_FILE, "tar member type b'3'"),
        (_special("pkg-1.0/s", tarfile.BLKTYPE), K.SPECIAL_FILE, "tar member type b'4'"),
        (_special("pkg-1.0/s", tarfile.FIFOTYPE), K.SPECIAL_FILE, "tar member type b'6'"),
    ],
)
def test_links_and_special_tar_members_are_refused(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes], kind: ArchiveProblemKind, detail: str
) -> None:
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, member])
    assert _problems(path) == [
        ArchiveProblem(member[0].name[8:], kind, detail + _tail(detail), 10240)
    ]


def _tail(detail: str) -> str:
    # The rest of each detail, so the whole message is compared.
    if detail.startswith("hard"):
        return "/setup.py"
    if detail.startswith("tar"):
        return " (device, FIFO or unknown), not read"
    return ""


def test_second_member_of_a_name_is_refused_and_the_first_kept(tmp_path: Path) -> None:
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, _file("pkg-1.0/setup.py", b"evil()\n")])
    items = _items(path)
    assert items[:2] == SDIST_MEMBERS
    assert items[2:] == [
        ArchiveProblem("setup.py", K.DUPLICATE, "second member with this name; not read", 10240)
    ]


def test_names_equal_after_unicode_normalisation_are_duplicates(tmp_path: Path) -> None:
    nfc = unicodedata.normalize("NFC", "pkg-1.0/caf\u00e9.py")
    nfd = unicodedata.normalize("NFD", nfc)
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [_file(nfc, b"a"), _file(nfd, b"b")])
    items = _items(path)
    assert items[0] == ArchiveMember("caf\u00e9.py", b"a")
    assert [(p.kind, p.relative) for p in items[1:] if isinstance(p, ArchiveProblem)] == [
        (K.DUPLICATE, nfd[8:])
    ]


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
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [_file(name, data)])
    assert _items(path) == [ArchiveProblem(name[8:], K.NESTED_ARCHIVE, detail, 10240)]


def test_text_mentioning_ustar_elsewhere_is_not_an_archive(tmp_path: Path) -> None:
    data = b"# ustar\n" * 100
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [_file("pkg-1.0/notes.py", data)])
    assert _items(path) == [ArchiveMember("notes.py", data)]


def test_unsafe_zip_names_are_refused(tmp_path: Path) -> None:
    path = _zip(
        tmp_path / "x.whl",
        [("../evil.py", b"a"), ("/abs.py", b"b"), ("pkg/ok.py", b"c"), ("pkg\\win.py", b"d")],
    )
    assert _items(path) == [
        ArchiveProblem("../evil.py", K.PARENT_TRAVERSAL, "'..' component in the path"),
        ArchiveProblem("/abs.py", K.ABSOLUTE_PATH, "absolute path"),
        ArchiveMember("pkg/ok.py", b"c"),
        ArchiveProblem(
            "pkg\\win.py", K.UNSAFE_NAME, "backslash in the name, a path separator on Windows", 1
        ),
    ]


def test_nul_in_a_zip_name_is_refused_not_truncated(tmp_path: Path) -> None:
    # zipfile cuts names at NUL ("a.py\0.txt" reads as "a.py"); the raw name is checked.
    path = _zip(tmp_path / "x.whl", [("pkg/a.pyX.txt", b"evil()\n")])
    path.write_bytes(path.read_bytes().replace(b"pkg/a.pyX.txt", b"pkg/a.py\x00.txt"))
    assert _items(path) == [
        ArchiveProblem("pkg/a.py\\x00.txt", K.UNSAFE_NAME, "control character U+0000 in the name")
    ]


@pytest.mark.parametrize(
    ("mode", "kind", "detail"),
    [
        (stat.S_IFLNK | 0o777, K.LINK, "symbolic link"),
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
    path = _zip(tmp_path / "x.whl", [(info, b"/etc/passwd"), ("pkg/ok.py", b"")])
    assert _items(path) == [
        ArchiveProblem("pkg/link.py", kind, detail),
        ArchiveMember("pkg/ok.py", b""),
    ]


def test_duplicate_zip_names_are_refused(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name: 'pkg/a.py'"):
        path = _zip(tmp_path / "x.whl", [("pkg/a.py", b"good"), ("pkg/a.py", b"evil")])
    assert _items(path) == [
        ArchiveMember("pkg/a.py", b"good"),
        ArchiveProblem("pkg/a.py", K.DUPLICATE, "second member with this name; not read", 4),
    ]


def test_encrypted_zip_member_is_unreadable(tmp_path: Path) -> None:
    path = _zip(tmp_path / "x.whl", [("pkg/a.py", b"x")])
    raw = bytearray(path.read_bytes())
    central = raw.index(b"PK\x01\x02")
    raw[6] |= 1  # general purpose flags, bit 0: encrypted (local header ...
    raw[central + 8] |= 1  # ... and central directory)
    path.write_bytes(bytes(raw))
    assert _items(path) == [ArchiveProblem("pkg/a.py", K.UNREADABLE, "encrypted")]


def test_bzip2_zip_member_is_unreadable(tmp_path: Path) -> None:
    path = _zip(tmp_path / "x.whl", [("pkg/a.py", b"x")], zipfile.ZIP_BZIP2)
    [problem] = _items(path)
    assert isinstance(problem, ArchiveProblem)
    assert problem.kind is K.UNREADABLE
    assert problem.detail.startswith("compression method 12 (only stored and deflate are read")


# -- caps and bombs ----------------------------------------------------------------------


def test_tar_gz_member_declaring_10_gib_is_refused_from_its_header(tmp_path: Path) -> None:
    path = _tar_gz_bomb(tmp_path / "bomb-1.0.tar.gz", member_size=10 * GIB, zeros=10 * GIB)
    assert path.stat().st_size < 12 * MIB
    limits = ArchiveLimits()
    member, total = _items(path)
    assert isinstance(member, ArchiveProblem)
    assert isinstance(total, ArchiveProblem)
    assert (member.relative, member.kind) == ("bomb.py", K.MEMBER_TOO_LARGE)
    assert member.detail == f"{10 * GIB} bytes, limit {limits.max_member_bytes}"
    assert total.kind is K.TOTAL_TOO_LARGE
    assert total.detail.startswith(f"skipping its {10 * GIB} bytes would bring the archive past")
    # Only the header records were decompressed: not one byte of the member.
    assert total.decompressed <= 2 * 10240 < limits.max_member_bytes + READ_CHUNK


def test_tar_gz_member_of_zeros_is_refused_by_ratio_while_streaming(tmp_path: Path) -> None:
    path = _tar_gz_bomb(tmp_path / "bomb-1.0.tar.gz", member_size=32 * MIB, zeros=33 * MIB)
    limits = ArchiveLimits()
    [problem] = _items(path)
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("bomb.py", K.COMPRESSION_RATIO)
    assert problem.detail.endswith(f"compressed (over {limits.max_ratio}:1); reading stopped")
    assert limits.ratio_floor_bytes < problem.decompressed <= limits.ratio_floor_bytes + READ_CHUNK


@pytest.mark.parametrize("compression", ["bz2", "xz"])
def test_bz2_and_xz_members_of_zeros_are_refused_by_ratio(tmp_path: Path, compression: str) -> None:
    members = [_file("pkg-1.0/bomb.py", bytes(4 * MIB))]
    path = _tar(tmp_path / f"bomb-1.0.tar.{compression}", members, compression)
    limits = ArchiveLimits()
    [problem] = _items(path)
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("bomb.py", K.COMPRESSION_RATIO)
    assert limits.ratio_floor_bytes < problem.decompressed <= limits.ratio_floor_bytes + READ_CHUNK


def test_tar_gz_with_10_gib_of_zeros_after_the_end_is_capped_while_streaming(
    tmp_path: Path,
) -> None:
    small = _tar(tmp_path / "small.tar", SDIST, "").read_bytes()
    path = tmp_path / "bomb-1.0.tar.gz"
    path.write_bytes(_zero_stream(small, 10 * GIB, wbits=31))
    cap = 8 * MIB
    items = _items(path, max_total_bytes=cap, **NO_RATIO)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("", K.TOTAL_TOO_LARGE)
    assert problem.detail == f"the archive expands past {cap} bytes; reading stopped"
    assert cap < problem.decompressed <= cap + READ_CHUNK


def test_zip_member_declaring_10_gib_is_refused_before_decompressing(tmp_path: Path) -> None:
    path = _zip_bomb(tmp_path / "bomb.zip", declared=10 * GIB, zeros=10 * GIB)
    assert path.stat().st_size < 12 * MIB
    with zipfile.ZipFile(path) as archive:
        packed = archive.getinfo("pkg-1.0/bomb.py").compress_size
    [by_ratio] = _items(path)
    assert by_ratio == ArchiveProblem(
        "bomb.py",
        K.COMPRESSION_RATIO,
        f"declares {10 * GIB} bytes from {packed} compressed (over 200:1)",
        0,
    )
    [by_size] = _items(path, **NO_RATIO)
    assert by_size == ArchiveProblem(
        "bomb.py", K.MEMBER_TOO_LARGE, f"declares {10 * GIB} bytes, limit {64 * MIB}", 0
    )


def test_zip_member_that_lies_about_its_size_stops_at_the_declared_size(tmp_path: Path) -> None:
    # The stream holds 10 GiB but the directory says 1 MiB: zipfile stops there,
    # then the CRC (wrong on purpose) fails.
    path = _zip_bomb(tmp_path / "bomb.zip", declared=MIB, zeros=10 * GIB)
    [problem] = _items(path)
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("bomb.py", K.CORRUPT)
    assert problem.detail == "Bad CRC-32 for file 'pkg-1.0/bomb.py'"
    # Counted as zipfile delivers it: the read that failed the CRC delivered nothing.
    assert MIB - READ_CHUNK <= problem.decompressed <= MIB + READ_CHUNK


def test_zip_with_a_correct_crc_but_trailing_stream_yields_only_the_declared_bytes(
    tmp_path: Path,
) -> None:
    path = _zip_bomb(
        tmp_path / "bomb.zip", declared=MIB, zeros=10 * GIB, crc=zlib.crc32(bytes(MIB))
    )
    assert _items(path) == [ArchiveMember("bomb.py", bytes(MIB))]


def test_zip_total_cap_stops_reading(tmp_path: Path) -> None:
    rng = random.Random(4)
    blobs = [rng.randbytes(512 * 1024) for _ in range(3)]
    path = _zip(tmp_path / "x.whl", [(f"pkg/{i}.bin", blob) for i, blob in enumerate(blobs)])
    items = _items(path, max_total_bytes=MIB)
    assert items[:2] == [ArchiveMember("pkg/0.bin", blobs[0]), ArchiveMember("pkg/1.bin", blobs[1])]
    assert items[2:] == [
        ArchiveProblem(
            "pkg/2.bin",
            K.TOTAL_TOO_LARGE,
            f"would bring the archive past {MIB} bytes; reading stopped",
            MIB,
        )
    ]


def test_member_over_the_cap_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    path = _tar(
        tmp_path / "pkg-1.0.tar.gz",
        [_file("pkg-1.0/big.py", b"#" * 2048), _file("pkg-1.0/small.py", b"x")],
    )
    assert _items(path, max_member_bytes=1024) == [
        ArchiveProblem("big.py", K.MEMBER_TOO_LARGE, "2048 bytes, limit 1024", 10240),
        ArchiveMember("small.py", b"x"),
    ]
    zipped = _zip(tmp_path / "x.whl", [("pkg/big.py", b"#" * 2048), ("pkg/small.py", b"x")])
    assert _items(zipped, max_member_bytes=1024) == [
        ArchiveProblem("pkg/big.py", K.MEMBER_TOO_LARGE, "declares 2048 bytes, limit 1024"),
        ArchiveMember("pkg/small.py", b"x"),
    ]


def test_too_many_members_stop_reading(tmp_path: Path) -> None:
    files = [_file(f"pkg-1.0/m{i}.py", b"") for i in range(5)]
    path = _tar(tmp_path / "pkg-1.0.tar.gz", files)
    items = _items(path, max_members=3)
    assert [i.relative for i in items] == ["m0.py", "m1.py", "m2.py", ""]
    problem = items[-1]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.kind, problem.detail) == (
        K.TOO_MANY_MEMBERS,
        "more than 3 members; the rest were not read",
    )
    zipped = _zip(tmp_path / "x.whl", [(f"pkg/m{i}.py", b"") for i in range(5)])
    assert _items(zipped, max_members=3)[3:] == [
        ArchiveProblem("", K.TOO_MANY_MEMBERS, "5 members, limit 3; the rest were not read")
    ]


def test_limits_must_be_positive() -> None:
    with pytest.raises(
        ValueError, match=r"ArchiveLimits\.max_members must be a positive integer, got 0"
    ):
        ArchiveLimits(max_members=0)


# -- damage and formats ------------------------------------------------------------------


def test_truncated_tar_gz_yields_what_was_read_then_corrupt(tmp_path: Path) -> None:
    noise = random.Random(1).randbytes(256 * 1024)
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, _file("pkg-1.0/noise.bin", noise)])
    path.write_bytes(path.read_bytes()[: 128 * 1024])
    items = _items(path)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("", K.CORRUPT)
    assert problem.detail == (
        "tar.gz archive: Compressed file ended before the end-of-stream marker was reached"
    )


def test_concatenated_gzip_members_and_zero_padding_are_read(tmp_path: Path) -> None:
    plain = _tar(tmp_path / "plain.tar", SDIST, "").read_bytes()
    half = len(plain) // 2
    first, second = (zlib.compressobj(6, zlib.DEFLATED, 31) for _ in range(2))
    stream = first.compress(plain[:half]) + first.flush() + bytes(512)
    stream += second.compress(plain[half:]) + second.flush() + bytes(100)
    path = tmp_path / "pkg-1.0.tar.gz"
    path.write_bytes(stream)
    assert _items(path) == SDIST_MEMBERS


def test_gzip_with_a_wrong_crc_is_corrupt(tmp_path: Path) -> None:
    noise = random.Random(2).randbytes(64 * 1024)
    path = _tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, _file("pkg-1.0/noise.bin", noise)])
    raw = bytearray(path.read_bytes())
    raw[-8] ^= 0xFF  # the trailer's CRC-32 (RFC 1952)
    path.write_bytes(bytes(raw))
    items = _items(path)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert (problem.relative, problem.kind) == ("", K.CORRUPT)
    assert problem.detail.startswith("tar.gz archive: ")
    assert problem.detail.endswith("Error -3 while decompressing data: incorrect data check")


def test_data_hidden_after_the_tar_end_marker_is_reported(tmp_path: Path) -> None:
    path = _tar(tmp_path / "pkg-1.0.tar", SDIST, "")
    path.write_bytes(path.read_bytes() + b"import os; os.system('evil')\n")
    items = _items(path)
    assert items[:2] == SDIST_MEMBERS
    [problem] = items[2:]
    assert isinstance(problem, ArchiveProblem)
    assert problem.kind is K.CORRUPT
    assert problem.detail.startswith("29 bytes of data after the end of the tar archive")


def test_zip_with_a_broken_member_keeps_the_others(tmp_path: Path) -> None:
    path = _zip(
        tmp_path / "x.whl", [("pkg/a.py", b"a" * 100), ("pkg/b.py", b"b")], zipfile.ZIP_STORED
    )
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"a" * 100, b"a" * 99 + b"!", 1))
    assert _items(path) == [
        ArchiveProblem("pkg/a.py", K.CORRUPT, "Bad CRC-32 for file 'pkg/a.py'", 0),
        ArchiveMember("pkg/b.py", b"b"),
    ]


def test_zip_magic_without_a_directory_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "x.whl"
    path.write_bytes(b"PK\x03\x04" + bytes(100))
    assert _items(path) == [
        ArchiveProblem("", K.CORRUPT, "cannot read the zip directory: File is not a zip file")
    ]


def test_wheel_that_is_a_tarball_is_a_mismatch_and_read_as_tar(tmp_path: Path) -> None:
    path = _tar(tmp_path / "pkg-1.0-py3-none-any.whl", SDIST)
    items = _items(path)
    assert items[0] == ArchiveProblem(
        "",
        K.FORMAT_MISMATCH,
        "pkg-1.0-py3-none-any.whl is named like a zip file but is a tar.gz archive",
    )
    assert items[1:] == SDIST_MEMBERS


def test_tarball_that_is_also_a_zip_is_read_as_pip_would(tmp_path: Path) -> None:
    tar = _tar(tmp_path / "t.tar.gz", SDIST)
    zipped = _zip(tmp_path / "z.zip", [("pkg-1.0/evil.py", b"evil()\n")])
    path = tmp_path / "pkg-1.0.tar.gz"
    path.write_bytes(tar.read_bytes() + zipped.read_bytes())
    assert _items(path) == [
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
    assert detect_format(_tar(tmp_path / "a.whl", SDIST, "bz2")) is ArchiveFormat.TAR_BZ2
    assert detect_format(_tar(tmp_path / "b", SDIST, "xz")) is ArchiveFormat.TAR_XZ
    assert detect_format(_tar(tmp_path / "c", SDIST, "")) is ArchiveFormat.TAR
    assert detect_format(_tar(tmp_path / "d", SDIST, "gz")) is ArchiveFormat.TAR_GZ
    assert detect_format(_zip(tmp_path / "e.tar.gz", [("a", b"")])) is ArchiveFormat.ZIP
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


def test_every_problem_kind_has_a_rationale() -> None:
    for kind in ArchiveProblemKind:
        assert len(kind.rationale) > 40, kind
    assert "CVE-2007-4559" in K.ABSOLUTE_PATH.rationale
    assert "Zip Slip" in K.PARENT_TRAVERSAL.rationale
    assert "Fifield" in K.COMPRESSION_RATIO.rationale
