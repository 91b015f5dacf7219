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

Branch blind14: a script's payload is also a download written to a file that a later
command of the script starts (``curl -o "%APPDATA%\\svc.exe" URL`` then ``start "" /b
"%APPDATA%\\svc.exe"``, a batch file setup.py runs), a VBScript that fetches with
``XMLHTTP`` and runs with ``WScript.Shell``, and a minified JavaScript loader on one line;
:func:`script_payload` is asked of scripts shipped as files and of script text a Python
source writes to a file and then starts (:mod:`caplet._scan._sink_stages`).
"""

from __future__ import annotations

import ast
import posixpath
import re
import warnings

from caplet._findings import Finding
from caplet._scan._filescan import FileScan
from caplet._scan._foreign_scripts import (
    FOREIGN_SUFFIXES,
    PERSISTENCE_SUFFIXES,
    foreign_payload,
)
from caplet._scan._grants import NO_GRANTS
from caplet._scan._indicators import IndicatorKind, indicator_set
from caplet._scan._model import ScanMode
from caplet._scan._msbuild_projects import MSBUILD_SUFFIXES, msbuild_payload
from caplet._scan._npm_lifecycle import (
    LIFECYCLE_FILE,
    js_sends_environment,
    lifecycle_scripts,
    runs_npm_install,
)

__all__ = ["MAX_SCRIPT_BYTES", "InstalledCommands", "script_payload", "shell_script", "started"]

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
_STARTED_SUFFIXES = (
    ".sh",
    ".bash",
    ".ps1",
    ".bat",
    ".cmd",
    ".vbs",
    ".js",
    *MSBUILD_SUFFIXES,
    *FOREIGN_SUFFIXES,
)
#: Build scripts a build backend runs while pip builds the sdist (blind16), by lowered name.
_BUILD_SCRIPTS = frozenset({"meson.build", "cmakelists.txt", "build.rs"})
#: Such a script larger than this is not read: a loader is small, a web front end's
#: bundle is not one.
_MAX_STARTED_BYTES = 256 * 1024
#: A suffix of such a script closing a literal, in lowered text. Every file of a package
#: is asked: one search of the alternation costs a tenth of searching for each of its 14
#: spellings in turn (a pass over the text each when, as almost always, none is there:
#: 0.08 s of the stdlib's 3 s of CPU, issue 16).
_NAMED_SCRIPT = re.compile(
    "|".join(re.escape(f"{suffix}{q}") for suffix in _STARTED_SUFFIXES for q in "'\"")
)
#: A literal naming such a script, in a Python source.
_STARTED_LITERAL = re.compile(
    r"""['"]([^'"\n]{0,200}\.(?:sh|bash|ps1|bat|cmd|vbs|js|csproj|proj|targets|go|reg|rb|pl|php))['"]""",
    re.IGNORECASE,
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
#: A raw connection: a socket piped to a spawned shell is a reverse shell (blind37), told
#: as one (CPL-THR-008) when the script fetches nothing.
_JS_CONNECTS = re.compile(
    r"\b(?:net|tls)\s*\.\s*(?:Socket|connect|createConnection)\b|\bnew\s+WebSocket\s*\("
)


#: A download written to a file: the file's path (quoted or not) is the group. The line must
#: name a URL, so a copy of a local file (``curl -o out file://...`` aside) is not one.
_DOWNLOAD_TO = re.compile(
    r"(?i)(?:\bcurl(?:\.exe)?\b[^\n]*?\s(?:-o|--output)\s+|\bwget(?:\.exe)?\b[^\n]*?\s"
    r"(?:-O\s*|--output-document[= ])|\b(?:Invoke-WebRequest|iwr|Start-BitsTransfer)\b[^\n]*?\s"
    r"-(?:OutFile|Destination)\s+|\.DownloadFile\(\s*[^,\n]+,\s*)"
    r"(\"[^\"\n]+\"|'[^'\n]+'|[^\s;&|)'\"]+)"
)
#: Where a command starts, and the words that start the program after them (``start "" /b``,
#: ``call``, ``&``, ``Start-Process -FilePath``, ``nohup``, ``sh``), before a path.
_RUN_AT = (
    r"(?im)(?:^|&&|\|\||[;&|(])\s*(?:(?:@?start(?:\s+\"[^\"\n]*\")?(?:\s+/\w+)*|call|"
    r"cmd(?:\.exe)?\s+/[ck]|Start-Process(?:\s+-FilePath)?|&|nohup|exec|sudo|(?:ba|z|da)?sh|\.|"
    # CMake's execute_process(COMMAND <program>) (blind16)
    r"COMMAND)\s+)*"
)
#: VBScript (or JScript run by a script host) that fetches and then runs a program.
_VBS_FETCH = re.compile(
    r"(?i)\b(?:MSXML2\.(?:Server)?XMLHTTP|Microsoft\.XMLHTTP|WinHttp\.WinHttpRequest)\b"
)
_VBS_RUN = re.compile(r"(?i)WScript\.Shell\b|\bShellExecute\b")


def script_payload(text: str, suffix: str) -> tuple[int, str] | None:
    """The line of a script of another language (by ``suffix``, its file's, ``.js`` or
    not) that downloads and runs a program: a download piped to a shell or another
    download-and-run idiom, a download to a file a later command starts, a VBScript
    fetching with ``XMLHTTP`` and running with ``WScript.Shell``, a JavaScript loader."""
    if suffix == ".js":
        return _js_loader(text)
    if suffix in MSBUILD_SUFFIXES:
        return msbuild_payload(text)  # an inline task MSBuild compiles and runs (blind18)
    if suffix in FOREIGN_SUFFIXES:
        found = foreign_payload(text, suffix)  # Go run from source, a registry file (blind32)
        if found is not None or suffix in {".go", ".reg"}:
            return found
        # a Ruby, Perl or PHP script without a connection of its own: a download piped
        # to a shell in its text is still one (blind35)
    if IndicatorKind.DOWNLOAD_EXEC in indicator_set().kinds(text):
        for number, line in enumerate(text.split("\n"), start=1):
            if IndicatorKind.DOWNLOAD_EXEC in indicator_set().kinds(line):
                return number, line.strip()[:120]
        # split over lines (a continuation): reported at the first line
        return 1, "a download piped to a shell"
    found = _download_then_run(text)
    if found is not None:
        return found
    if _VBS_FETCH.search(text) is not None and _VBS_RUN.search(text) is not None:
        return _line_of(text, _VBS_RUN.search(text))
    return None


def _download_then_run(text: str) -> tuple[int, str] | None:
    """A download written to a file, and the same path started by a later command.

    Each path is followed once, from its first download (a later search would find a
    subset of what that one found: nothing), only when it is written again after it,
    and at most :data:`_MAX_FOLLOWED` paths are: each search reads the rest of the text,
    and 8,000 downloads to as many paths (310 KB) took 89 s, 1 MiB about a quarter of
    an hour (attack25). Past that many the script is judged as one that runs what it
    downloads: the safe answer, and no real script downloads so many files it names
    again."""
    followed: set[str] = set()
    # the run's pattern ignores case; for ASCII text (where its case folding is lower())
    # a path absent from the lowered rest of the text is not run there
    lowered = text.lower() if text.isascii() else None
    for match in _DOWNLOAD_TO.finditer(text[:MAX_SCRIPT_BYTES]):
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        if "://" not in text[start : len(text) if end < 0 else end]:
            continue
        path = match.group(1).strip("\"'")
        if len(path) < 2 or path in followed:
            continue
        followed.add(path)
        if lowered is not None and lowered.find(path.lower(), match.end()) < 0:
            continue
        if len(followed) > _MAX_FOLLOWED:
            number = text.count("\n", 0, match.start()) + 1
            return (
                number,
                f"more than {_MAX_FOLLOWED} downloads to files named again: not each followed",
            )
        run = re.compile(_RUN_AT + r"[\"']?" + re.escape(path) + r"[\"']?(?=[\s;&|)]|$)")
        found = run.search(text, match.end())
        if found is not None:
            return _line_of(text, found)
    return None


#: Downloaded paths :func:`_download_then_run` follows to a later run, at most.
_MAX_FOLLOWED = 64


def _line_of(text: str, match: re.Match[str] | None) -> tuple[int, str]:
    at = match.start() if match is not None else 0
    while at < len(text) and text[at] in "\n;&|( \t":
        at += 1  # the separator the match began with belongs to the line before
    number = text.count("\n", 0, at) + 1
    return number, text.split("\n")[number - 1].strip()[:120]


def started(relative: str, size: int) -> bool:
    """Whether a file of ``size`` bytes may be a script of another language the package's
    code starts (read in case it is: :meth:`InstalledCommands.note_code` decides)."""
    lowered = relative.lower()
    return size <= _MAX_STARTED_BYTES and (
        lowered.endswith(_STARTED_SUFFIXES)
        or _build_script(lowered)
        or posixpath.basename(lowered) == LIFECYCLE_FILE
    )


def _build_script(relative: str) -> bool:
    return posixpath.basename(relative.lower()) in _BUILD_SCRIPTS


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
        #: Python sources that run npm's installer (and whether each is an install
        #: script), and the files the package.json lifecycles run (blind17).
        self._npm: dict[str, bool] = {}
        self._lifecycle: set[str] = set()
        #: A candidate's rule when it is not a download that runs (CPL-THR-015).
        self._rules: dict[str, str] = {}

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
        # npm's (yarn's, pnpm's) installer named: plain substring searches (a literal's
        # quote in the script pattern tripled that pass's cost on the stdlib; blind17)
        npm = "npm" in lowered or "yarn" in lowered or "jlpm" in lowered  # pnpm too
        if _NAMED_SCRIPT.search(lowered) is None and not npm:
            return
        if _STARTS.search(text) is None:
            return
        if npm and runs_npm_install(text):
            self._npm[relative] = installer  # npm runs the lifecycle scripts (blind17)
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
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            # regedit exports UTF-16 with a byte-order mark (blind32)
            text = data[:MAX_SCRIPT_BYTES].decode("utf-16", "replace")
        if posixpath.basename(relative.lower()) == LIFECYCLE_FILE:
            names, commands = lifecycle_scripts(text)
            folder = posixpath.dirname(relative)
            self._lifecycle |= {posixpath.normpath(posixpath.join(folder, n)) for n in names}
            found = next((f for c in commands if (f := script_payload(c, ".sh"))), None)
            if found is not None:
                self._candidates[relative] = (1, found[1])
            return
        suffix = posixpath.splitext(relative.lower())[1]
        found = script_payload(text, suffix)
        if found is not None and suffix in PERSISTENCE_SUFFIXES:
            self._rules[relative] = "CPL-THR-009"  # an autostart key imported (blind32)
        if found is not None and suffix == ".js" and _JS_FETCH.search(text) is None:
            self._rules[relative] = "CPL-THR-008"  # a shell wired to a raw connection
        if found is None and suffix == ".js":
            # a script that sends the whole environment (an npm postinstall, blind17)
            found = js_sends_environment(text)
            if found is not None:
                self._rules[relative] = "CPL-THR-006"
        if found is not None:
            self._candidates[relative] = found

    def findings(self) -> list[Finding]:
        """The kept findings of the scripts installed as commands or started by the code."""
        found: list[Finding] = []
        started: set[str] = set()
        for source, (names, installer) in self._started.items():
            if installer or posixpath.dirname(source) in self._packages:
                started |= names
        npm = any(i or posixpath.dirname(s) in self._packages for s, i in self._npm.items())
        for relative, (number, line) in self._candidates.items():
            if relative in self._installed or _wheel_script(relative):
                why = "a shell script the package installs as a command"
            elif _build_script(relative):
                why = "a build script pip runs while it builds the package"
            elif posixpath.basename(relative).lower() in started:
                why = "a script the package's code starts"
            elif npm and (relative in self._lifecycle or relative.endswith(LIFECYCLE_FILE)):
                why = "a script npm runs when the package's code installs its JavaScript"
            else:
                continue
            scan = FileScan(relative, "", NO_GRANTS, (), ScanMode.PACKAGE)
            rule_id = self._rules.get(relative, "CPL-THR-015")
            scan.emit(rule_id, f"{line} ({why})", number, None)
            found.extend(scan.findings)
        return found


def _js_loader(text: str) -> tuple[int, str] | None:
    """JavaScript that fetches from the network (or connects to a peer) and runs a program
    (``child_process``): the line of its first run call."""
    if _JS_RUNS.search(text) is None:
        return None
    if _JS_FETCH.search(text) is None and _JS_CONNECTS.search(text) is None:
        return None
    for number, line in enumerate(text.split("\n"), start=1):
        if _JS_RUN_CALL.search(line) is not None and "require" not in line:
            return number, line.strip()[:120]
    # minified: the require and the run call on one line (blind14)
    for number, line in enumerate(text.split("\n"), start=1):
        if _JS_RUN_CALL.search(line) is not None:
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
