"""Small trees written for a package-mode scan, and the danger it finds: shared by the
tests of install scripts (_installer_imports, _installer_network, _shell_scripts)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree

#: A setup.py that imports something first (``{importer}``).
SETUP = """\
from setuptools import setup
{importer}
setup(name="colour", version="1.0", packages=["colour"])
"""


def write_tree(root: Path, files: dict[str, str], *, dedent: bool = False) -> Path:
    """``files`` (relative path: text) written under ``root``; returns ``root``."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if dedent else text, encoding="utf-8")
    return root


def package_danger(target: Path) -> set[tuple[str, str]]:
    """(rule, file) of every DANGER finding of ``target`` scanned in package mode."""
    report = scan_tree(target, mode=ScanMode.PACKAGE)
    return {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER}
