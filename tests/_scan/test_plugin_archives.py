"""steer22: code in an archive a plugin ships is code nobody read.

The scanner reads archives only as the target of a package scan (an sdist, a wheel); in a
plugin's tree an archive was a data file, and the auditor model was shown it as "binary,
content not shown" (an info finding). A plugin shipping ``payload.tar`` with ``evil.py``
(``import ctypes``) extracted it at run time into its private /tmp, put that on
``sys.path`` and imported it: the scanner saw only a supply-chain warning for ``import
evil``, the gate passed it, and the jailed worker ran ctypes, which the gate refuses in
``plugin.py``. In plugin mode an archive is now code the scanner could not read: danger,
as a file too large to scan is (CPL-SCAN-001).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._findings import Severity
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from tests.conftest import PluginFactory

EVIL = b"import ctypes\nX = ctypes.sizeof(ctypes.c_int)\n"

LOADER = """\
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        with tarfile.open(HERE / "payload.tar") as archive:
            archive.extractall("/tmp/x", filter="data")
        sys.path.insert(0, "/tmp/x")
        import evil

        return evil.X

    return {"main": {"run": run}}
"""


def _tar(compression: str = "") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("evil.py")
        info.size = len(EVIL)
        archive.addfile(info, io.BytesIO(EVIL))
    data = buffer.getvalue()
    if compression == "gz":
        return gzip.compress(data)
    if compression == "xz":
        return lzma.compress(data)
    return data


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("evil.py", EVIL)
    return buffer.getvalue()


#: A PNG's signature and a zip appended: zipfile finds a zip by its end record.
_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64

ARCHIVES: dict[str, Callable[[], bytes]] = {
    "payload.tar": _tar,
    "payload.tar.gz": lambda: _tar("gz"),
    "payload.tar.xz": lambda: _tar("xz"),
    "payload.zip": _zip,
    "notes.dat": _zip,  # the name says nothing: the bytes decide
    "evil.py.gz": lambda: gzip.compress(EVIL),
    "evil.py.bz2": lambda: bz2.compress(EVIL),
    "evil.py.xz": lambda: lzma.compress(EVIL),
    "logo.png": lambda: _PNG + _zip(),
}


@pytest.fixture(scope="module")
def launcher() -> Iterator[SandboxLauncher]:
    sandbox = SandboxLauncher(strict=True)
    yield sandbox
    sandbox.close()


@pytest.mark.security
def test_code_extracted_from_an_archive_never_passes_the_gate(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    directory = make_plugin("unpacks", source=LOADER)
    (directory / "payload.tar").write_bytes(_tar())
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher) as host:
        outcome = host.enable("unpacks", consent=True)
        # On main: enabled, and host.call("unpacks", "main.run") ran ctypes (4).
        ran = host.call("unpacks", "main.run") if outcome else None
        assert not outcome, f"code in an archive passed the gate and ran: {ran}"
        assert "CPL-SCAN-006" in outcome.reason
        assert "payload.tar" in outcome.reason


@pytest.mark.parametrize("name", sorted(ARCHIVES))
def test_an_archive_in_a_plugin_is_code_not_scanned(make_plugin: PluginFactory, name: str) -> None:
    directory = make_plugin("unpacks", source=LOADER)
    (directory / name).write_bytes(ARCHIVES[name]())
    report = scan_tree(directory, (), mode=ScanMode.PLUGIN)
    [found] = [f for f in report.findings if f.rule_id == "CPL-SCAN-006"]
    assert (found.severity, found.file) == (Severity.DANGER, name)
    assert "an archive the scanner does not read" in found.message
    assert "ship its files unpacked" in found.message


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("logo.png", _PNG),
        ("words.txt", b"alpha\nbeta\n"),
        ("table.bin", bytes(range(256)) * 4),
    ],
)
def test_data_files_that_are_no_archive_are_not_flagged(
    make_plugin: PluginFactory, name: str, data: bytes
) -> None:
    """Near miss: an image, text and other bytes are data, as before."""
    directory = make_plugin("unpacks", source="def create_functions(config):\n    return {}\n")
    (directory / name).write_bytes(data)
    report = scan_tree(directory, (), mode=ScanMode.PLUGIN)
    assert not [f for f in report.findings if f.rule_id == "CPL-SCAN-006"]


def test_an_archive_inside_a_package_is_not_this_rule(make_plugin: PluginFactory) -> None:
    """Near miss: package mode (a project's test fixtures, wheels' data) is unchanged."""
    directory = make_plugin("unpacks", source=LOADER)
    (directory / "payload.tar").write_bytes(_tar())
    report = scan_tree(directory, (), mode=ScanMode.PACKAGE)
    assert not [f for f in report.findings if f.rule_id == "CPL-SCAN-006"]
