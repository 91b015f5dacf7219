"""Which files of a tree are what by their names and first bytes: Python sources, install
scripts, commands a package installs (split out of :mod:`caplet._scan._collect`)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "installers",
    "local_modules",
    "python_script",
    "script_name",
    "setup_name",
    "wanted",
]


def local_modules(relatives: Iterable[str]) -> frozenset[str]:
    """Top-level module names of the scanned tree itself (not third-party imports)."""
    return frozenset(
        r.split("/", 1)[0].removesuffix(".py") for r in relatives if "/" in r or r.endswith(".py")
    )


def wanted(relative: str) -> bool:
    """Files whose *content* is scanned: Python sources and .pth files.

    As Windows imports them too: ``.pyw`` is a source suffix there
    (importlib.machinery.SOURCE_SUFFIXES), names are matched without regard to
    case and trailing dots and spaces are dropped (``evil.PY``, ``evil.py.``);
    such a file beside ``import evil`` came out clean, unread (scanfuzz).
    """
    if relative.endswith((".py", ".pth")):
        return True
    return relative.rstrip(". ").lower().endswith((".py", ".pyw"))


def script_name(relative: str) -> bool:
    """Whether a file that is not named as a source may still be a Python script a
    package installs as a command: a name without a suffix, or a file of a ``bin`` or
    ``scripts`` folder (a wheel's ``*.data/scripts/``, setup.py's ``scripts=``)."""
    folder, _, name = relative.rpartition("/")
    return "." not in name or folder.rpartition("/")[2] in {"bin", "scripts"}


def python_script(head: bytes) -> bool:
    """Whether a file's first bytes are a shebang that runs Python (``#!python``, which
    pip rewrites to the environment's interpreter, ``#!/usr/bin/env python3``).

    Such a file is installed as a command and is the package's code as much as its
    modules: ``bin/tool`` named in ``scripts=`` with a payload in it was never read
    (attack8). Read in package mode only (a plugin's scripts run only under a granted
    ``proc.exec``, where their name is what the host sees).
    """
    return head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]


def setup_name(name: str) -> bool:
    """Whether a file name is ``setup.py`` as a case-insensitive file system (macOS,
    Windows) finds it for pip: any case, trailing dots and spaces dropped (attack8)."""
    return name == "setup.py" or name.rstrip(". ").lower() == "setup.py"


def installers(relatives: Iterable[str]) -> frozenset[str]:
    """The tree's install scripts: the shallowest ``setup.py``, at its root or one level down.

    An sdist keeps its ``setup.py`` in its top folder (``name-1.0/setup.py``);
    one under ``examples/``, ``tests/`` or ``docs/`` is not what pip runs.
    """
    scripts = [r for r in relatives if setup_name(r.rsplit("/", 1)[-1]) and r.count("/") <= 1]
    if not scripts:
        return frozenset()
    shallowest = min(r.count("/") for r in scripts)
    return frozenset(r for r in scripts if r.count("/") == shallowest)
