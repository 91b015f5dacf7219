"""Member names that escape, confuse tools or repeat are refused, in both formats."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from caplet._scan._archive import ArchiveMember, ArchiveProblem, ArchiveProblemKind
from caplet._scan._archive_names import DUPLICATE_DETAIL
from tests._scan.archivekit import SDIST, SDIST_MEMBERS, K, make_tar, make_zip, read_items, tar_file


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
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [*SDIST, tar_file(name, b"payload")])
    items = read_items(path)
    assert items[:2] == SDIST_MEMBERS
    problem, *read = items[2:]
    assert isinstance(problem, ArchiveProblem)
    shown = name if name.isprintable() else repr(name)[1:-1]
    assert (problem.kind, problem.relative) == (kind, shown)
    assert detail in problem.detail
    # a name an installer extracts as it is (a control or bidi character) is read too,
    # under a name that shows it (attack8); one outside the tree is not
    readable = {"pkg-1.0/a\x01.py": "a?.py", "pkg-1.0/evil\u202eyp.py": "evil?yp.py"}
    expected = [ArchiveMember(readable[name], b"payload")] if name in readable else []
    assert read == expected


def test_second_member_of_a_name_is_reported_and_read_too(tmp_path: Path) -> None:
    # it was "not read": the installer keeps the last copy, so the one never scanned
    # was the one installed (scanfuzz)
    path = make_tar(
        tmp_path / "pkg-1.0.tar.gz", [*SDIST, tar_file("pkg-1.0/setup.py", b"evil()\n")]
    )
    items = read_items(path)
    assert items[:2] == SDIST_MEMBERS
    assert items[2:] == [
        ArchiveProblem("setup.py", K.DUPLICATE, DUPLICATE_DETAIL, 10240),
        ArchiveMember("setup.py", b"evil()\n"),
    ]


def test_names_equal_after_unicode_normalisation_are_duplicates(tmp_path: Path) -> None:
    nfc = unicodedata.normalize("NFC", "pkg-1.0/caf\u00e9.py")
    nfd = unicodedata.normalize("NFD", nfc)
    path = make_tar(tmp_path / "pkg-1.0.tar.gz", [tar_file(nfc, b"a"), tar_file(nfd, b"b")])
    items = read_items(path)
    assert items[0] == ArchiveMember("caf\u00e9.py", b"a")
    assert [(p.kind, p.relative) for p in items[1:] if isinstance(p, ArchiveProblem)] == [
        (K.DUPLICATE, nfd[8:])
    ]


def test_unsafe_zip_names_are_refused(tmp_path: Path) -> None:
    path = make_zip(
        tmp_path / "x.whl",
        [("../evil.py", b"a"), ("/abs.py", b"b"), ("pkg/ok.py", b"c"), ("pkg\\win.py", b"d")],
    )
    assert read_items(path) == [
        ArchiveProblem("../evil.py", K.PARENT_TRAVERSAL, "'..' component in the path"),
        ArchiveProblem("/abs.py", K.ABSOLUTE_PATH, "absolute path"),
        ArchiveMember("pkg/ok.py", b"c"),
        ArchiveProblem(
            "pkg\\win.py", K.UNSAFE_NAME, "backslash in the name, a path separator on Windows", 1
        ),
        # where Windows extracts it, read too (attack8)
        ArchiveMember("pkg/win.py", b"d"),
    ]


def test_nul_in_a_zip_name_is_refused_not_truncated(tmp_path: Path) -> None:
    # zipfile cuts names at NUL ("a.py\0.txt" reads as "a.py"); the raw name is checked.
    path = make_zip(tmp_path / "x.whl", [("pkg/a.pyX.txt", b"evil()\n")])
    path.write_bytes(path.read_bytes().replace(b"pkg/a.pyX.txt", b"pkg/a.py\x00.txt"))
    assert read_items(path) == [
        ArchiveProblem("pkg/a.py\\x00.txt", K.UNSAFE_NAME, "control character U+0000 in the name"),
        # what pip writes (zipfile's name, cut at the NUL): read too (attack8)
        ArchiveMember("pkg/a.py", b"evil()\n"),
    ]


def test_duplicate_zip_names_are_reported_and_both_read(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name: 'pkg/a.py'"):
        path = make_zip(tmp_path / "x.whl", [("pkg/a.py", b"good"), ("pkg/a.py", b"evil")])
    assert read_items(path) == [
        ArchiveMember("pkg/a.py", b"good"),
        ArchiveProblem("pkg/a.py", K.DUPLICATE, DUPLICATE_DETAIL, 4),
        ArchiveMember("pkg/a.py", b"evil"),
    ]
