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

Branch blind13: a script the package's own code *starts* counts too. setup.py running
``bash scripts/postinstall.sh``, an ``__init__`` starting ``node static/loader.js``:
the download-and-run is in the script, outside the Python rules, and the Python only
starts a file it ships. A script is so started when a Python source of the package that
can start a process names it in a literal (its file name: ``os.path.join(here,
"scripts", "postinstall.sh")``); besides shell scripts, PowerShell, batch and VBScript
files are read with the same download-and-run indicators, and a JavaScript file for
``child_process`` running what it fetches.
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

__all__ = ["MAX_SCRIPT_BYTES", "InstalledCommands", "shell_script", "started"]

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
#: Scripts of other languages a package's code may start (blind13): read only when named.
_STARTED_SUFFIXES = (".sh", ".bash", ".ps1", ".bat", ".cmd", ".vbs", ".js")
#: Such a script larger than this is not read: a loader is small, a web front end's
#: bundle is not one.
_MAX_STARTED_BYTES = 256 * 1024
#: A literal naming such a script, in a Python source.
_STARTED_LITERAL = re.compile(
    r"""['"]([^'"\n]{0,200}\.(?:sh|bash|ps1|bat|cmd|vbs|js))['"]""", re.IGNORECASE
)
#: What starts a process or a file in Python source (its words, as code spells them).
_STARTS = re.compile(
    r"\b(?:subprocess|Popen|system|popen|spawn\w*|startfile|exec[lv]p?e?|check_call|"
    r"check_output|getoutput|create_subprocess_\w+)\b"
)
#: JavaScript that runs a program and fetches from the network: a loader's whole job.
_JS_RUNS = re.compile(r"""\bchild_process\b""")
_JS_RUN_CALL = re.compile(r"\b(?:execSync|exec|execFile|execFileSync|spawn|spawnSync|fork)\s*\(")
_JS_FETCH = re.compile(
    r"\b(?:https?\s*\.\s*(?:get|request)|fetch|axios(?:\s*\.\s*get)?|XMLHttpRequest)\s*\(|"
    r"""require\(\s*['"](?:request|node-fetch|axios|got)['"]\s*\)"""
)


def started(relative: str, size: int) -> bool:
    """Whether a file of ``size`` bytes may be a script of another language the package's
    code starts (read in case it is: :meth:`InstalledCommands.note_code` decides)."""
    return size <= _MAX_STARTED_BYTES and relative.lower().endswith(_STARTED_SUFFIXES)


def shell_script(relative: str, head: bytes) -> bool:
    """Whether a file that is not a Python source may be a shell script: a shell's
    shebang on its first line, or a name ending in ``.sh``."""
    return relative.endswith(".sh") or _SHELL_SHEBANG.match(head.split(b"\n", 1)[0]) is not None


class InstalledCommands:
    """The scripts read during a package scan that download and run a program, the names
    its setup.py files install as commands, and the scripts its Python code starts;
    :meth:`findings` pairs them once every file has been seen."""

    def __init__(self) -> None:
        self._candidates: dict[str, tuple[int, str]] = {}
        self._installed: set[str] = set()
        #: By Python source: the script names it may start, and whether it is an install
        #: script (the others count only inside a package: a folder with ``__init__.py``).
        self._started: dict[str, tuple[frozenset[str], bool]] = {}
        self._packages: set[str] = set()

    def note_setup(self, relative: str, text: str) -> None:
        """The scripts a ``setup.py`` at ``relative`` installs (relative to its folder)."""
        folder = posixpath.dirname(relative)
        for listed in _SCRIPTS.findall(text):
            for written in _names(listed):
                name = posixpath.normpath(posixpath.join(folder, written))
                self._installed.add(name)

    def note_code(self, relative: str, text: str, *, installer: bool) -> None:
        """A Python source of the package: the scripts it may start (blind13), by file name.

        Kept only for code pip runs or installs: an install script, or a module of an
        importable package; a CI or developer script of the sdist (meson's
        ``ci/ciimage/build.py`` running each image's ``install.sh``) is neither."""
        if relative.rpartition("/")[2] == "__init__.py":
            self._packages.add(posixpath.dirname(relative))
        lowered = text[-(1 << 22) :].lower() if len(text) > 1 << 22 else text.lower()
        if not any(f"{suffix}{q}" in lowered for suffix in _STARTED_SUFFIXES for q in "'\""):
            return
        if _STARTS.search(text) is None:
            return
        names: set[str] = set()
        for literal in _STARTED_LITERAL.findall(text):
            # "powershell -f setup.ps1": a command's last word is the script
            path = literal.split()[-1] if literal.split() else literal
            names.add(posixpath.basename(path.replace("\\", "/")).lower())
        self._started[relative] = (frozenset(names), installer)

    def note_script(self, relative: str, data: bytes) -> None:
        """A script's bytes: the line that downloads and runs a program, kept for
        :meth:`findings` (a shell script, or one :func:`started` takes)."""
        text = data[:MAX_SCRIPT_BYTES].decode("utf-8", "replace")
        if relative.lower().endswith(".js"):
            found = _js_loader(text)
            if found is not None:
                self._candidates[relative] = found
            return
        if IndicatorKind.DOWNLOAD_EXEC not in indicator_set().kinds(text):
            return
        for number, line in enumerate(text.split("\n"), start=1):
            if IndicatorKind.DOWNLOAD_EXEC in indicator_set().kinds(line):
                self._candidates[relative] = (number, line.strip()[:120])
                return
        # split over lines (a continuation): reported at the first line
        self._candidates[relative] = (1, "a download piped to a shell")

    def findings(self) -> list[Finding]:
        """The kept findings of the scripts installed as commands or started by the code."""
        found: list[Finding] = []
        started: set[str] = set()
        for source, (names, installer) in self._started.items():
            if installer or posixpath.dirname(source) in self._packages:
                started |= names
        for relative, (number, line) in self._candidates.items():
            if relative in self._installed or _wheel_script(relative):
                why = "a shell script the package installs as a command"
            elif posixpath.basename(relative).lower() in started:
                why = "a script the package's code starts"
            else:
                continue
            scan = FileScan(relative, "", NO_GRANTS, (), ScanMode.PACKAGE)
            scan.emit("CPL-THR-015", f"{line} ({why})", number, None)
            found.extend(scan.findings)
        return found


def _js_loader(text: str) -> tuple[int, str] | None:
    """JavaScript that fetches from the network and runs a program (``child_process``):
    the line of its first run call."""
    if _JS_RUNS.search(text) is None or _JS_FETCH.search(text) is None:
        return None
    for number, line in enumerate(text.split("\n"), start=1):
        if _JS_RUN_CALL.search(line) is not None and "require" not in line:
            return number, line.strip()[:120]
    return None


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
