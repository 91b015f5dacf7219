"""Shell scripts a package installs as commands (recall10, issue 16).

Package mode reads a script the package installs as a command when its shebang names
Python (:func:`caplet._scan._collect_names.python_script`, attack8); a *shell* script
installed so (``setup(scripts=["bin/x.sh"])``, a wheel's ``*.data/scripts/``) was never
read, so one that pipes a download into a shell (``curl -s https://... | sh``) passed.
The user runs it by its name once the package is installed: its download piped to a
shell is the command's payload (CPL-THR-015), as it is in setup.py or in a command a
process call runs.

Only scripts the package *installs* count: a ``scripts/`` folder of an sdist holds the
project's own developer scripts (a CI script installing a toolchain with ``curl | sh``),
which pip never installs. So a shell script is read when its first bytes are a shell's
shebang or its name ends in ``.sh``, and its finding is kept only if a ``setup.py`` of
the package names it in ``scripts=`` (a literal list, read from the text) or it is under
a wheel's ``*.data/scripts/``; the decision waits for the end of the scan
(:class:`InstalledCommands`), since an archive's members come in any order.
"""

from __future__ import annotations

import ast
import posixpath
import re
import warnings

from caplet._findings import Finding
from caplet._scan._filescan import FileScan
from caplet._scan._grants import NO_GRANTS
from caplet._scan._indicators import IndicatorKind, indicator_set
from caplet._scan._model import ScanMode

__all__ = ["MAX_SCRIPT_BYTES", "InstalledCommands", "shell_script"]

#: A shell script larger than this is not read (a command's wrapper is small).
MAX_SCRIPT_BYTES = 1 << 20
#: A shebang naming a shell (``#!/bin/sh``, ``#!/usr/bin/env bash``), as any word of the
#: line (``#!/usr/bin/env -S bash -e``, ``#!/bin/busybox sh``: attack11).
_SHELL_SHEBANG = re.compile(rb"#![^\n]*?(?:[/ \t]|(?<=#!))(?:ba|z|da|k|c|tc|fi|a)?sh\b")
#: ``scripts=[...]`` or ``scripts=(...)`` in a setup.py, and the literals inside it. No
#: bracket inside: with ``[`` and ``(`` allowed, ``scripts=[`` written 16,000 times and never
#: closed took 10 s of CPU (each match ran to the end of the file; attack11).
_SCRIPTS = re.compile(r"\bscripts\s*=\s*[\[(]([^\[\]()]*)[\])]")
_LITERAL = re.compile(r"""[rRuU]?(?:'([^'\\\n]*)'|"([^"\\\n]*)")""")


def shell_script(relative: str, head: bytes) -> bool:
    """Whether a file that is not a Python source may be a shell script: a shell's
    shebang on its first line, or a name ending in ``.sh``."""
    return relative.endswith(".sh") or _SHELL_SHEBANG.match(head.split(b"\n", 1)[0]) is not None


class InstalledCommands:
    """The shell scripts read during a package scan that pipe a download into a shell,
    and the names its setup.py files install as commands; :meth:`findings` pairs them
    once every file has been seen."""

    def __init__(self) -> None:
        self._candidates: dict[str, list[Finding]] = {}
        self._installed: set[str] = set()

    def note_setup(self, relative: str, text: str) -> None:
        """The scripts a ``setup.py`` at ``relative`` installs (relative to its folder)."""
        folder = posixpath.dirname(relative)
        for listed in _SCRIPTS.findall(text):
            for written in _names(listed):
                name = posixpath.normpath(posixpath.join(folder, written))
                self._installed.add(name)

    def note_script(self, relative: str, data: bytes) -> None:
        """A shell script's bytes: its CPL-THR-015 kept for :meth:`findings` if it pipes
        a download into a shell."""
        text = data[:MAX_SCRIPT_BYTES].decode("utf-8", "replace")
        if IndicatorKind.DOWNLOAD_EXEC not in indicator_set().kinds(text):
            return
        scan = FileScan(relative, text, NO_GRANTS, (), ScanMode.PACKAGE)
        for number, line in enumerate(text.split("\n"), start=1):
            if IndicatorKind.DOWNLOAD_EXEC in indicator_set().kinds(line):
                api = f"{line.strip()[:120]} (a shell script the package installs as a command)"
                scan.emit("CPL-THR-015", api, number, None)
                break
        else:  # split over lines (a continuation): reported at the first line
            scan.emit("CPL-THR-015", "a download piped to a shell (installed command)", 1, None)
        self._candidates[relative] = scan.findings

    def findings(self) -> list[Finding]:
        """The kept findings of the scripts that are installed as commands."""
        found: list[Finding] = []
        for relative, findings in self._candidates.items():
            if relative in self._installed or _wheel_script(relative):
                found.extend(findings)
        return found


def _names(listed: str) -> list[str]:
    """The names a ``scripts=`` list writes: read as Python when it is a list of literals
    (``'bin/' 'x.sh'``, two literals the parser joins: attack11), else its literals one by
    one (a list with a variable in it)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "1if" warns, as _filepass parses
            value = ast.literal_eval(f"[{listed}]")
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return [single or double for single, double in _LITERAL.findall(listed)]
    return [name for name in value if isinstance(name, str)]


def _wheel_script(relative: str) -> bool:
    """Whether ``relative`` is under a wheel's ``<name>.data/scripts/``."""
    parts = relative.split("/")
    return any(
        parts[i].endswith(".data") and parts[i + 1] == "scripts" for i in range(len(parts) - 2)
    )
