"""Python kept in a data file the package ships and its own code runs (blind19).

A stage need not be a string of the code that runs it: b19-ls-notebook-cells-exec ships
``examples/quickstart.ipynb`` and its ``__init__`` loads the notebook's JSON and execs the
source of every code cell. The Python rules saw ``exec`` of a value read from a file (the
package's own ``version.py`` read and run is routine) and nothing read the notebook.

So in package mode a data file (a notebook, JSON, text, YAML, INI, ...) is read when a
Python source of the package both runs code (``exec``/``eval``/``compile``/``run_path``
called, or ``logging.config.fileConfig``, which evaluates an INI's ``class``, ``args`` and
``kwargs``: attack26) and names the file in a literal (its file name); the code it holds
(a notebook's cells, each string of a JSON document, a text file whole, the values an INI's
handlers give fileConfig to evaluate) is scanned as Python, and a
threat inside is CPL-THR-016 at the data file. As for started scripts
(:mod:`caplet._scan._shell_scripts`), only code pip runs or installs counts (an install
script or a module of an importable package), and the decision waits for the end of the
scan, since an archive's members come in any order.
"""

from __future__ import annotations

import json
import posixpath
import re
import warnings
from collections.abc import Callable, Iterator

from caplet._findings import Finding, Severity
from caplet._marks import LongMarkRunError, parse
from caplet._scan._config_factories import dict_config_source, file_config_source
from caplet._scan._filescan import FileScan
from caplet._scan._grants import NO_GRANTS
from caplet._scan._model import ScanMode
from caplet._scan._rules import RuleKind, rule

__all__ = ["DataCode", "data_file"]

#: Files that hold data, not code, by lowered suffix: read only when code that runs code
#: names them.
_DATA_SUFFIXES = (
    ".ipynb",
    ".json",
    ".txt",
    ".dat",
    ".cfg",
    ".ini",
    ".conf",
    ".yaml",
    ".yml",
    ".toml",
    ".csv",
    ".xml",
)
#: A data file larger than this is not read (a stage is small; a data set is not one).
MAX_DATA_BYTES = 256 * 1024
#: How many strings of one JSON document are tried as code.
_MAX_STRINGS = 256
#: A call that runs code it is given (the word alone, in a docstring, runs nothing);
#: ``fileConfig`` evaluates the Python of the INI it reads (attack26).
_RUNS_WORDS = (
    "exec",
    "eval",
    "compile",
    "run_path",
    "runsource",
    "fileConfig",
    "dictConfig",
    "DictConfigurator",
)
_RUNS_CODE = re.compile(r"\b(?:" + "|".join(_RUNS_WORDS) + r")\s*\(")
#: Data files ``fileConfig`` may read: the Python its handlers' values hold is read too.
_INI_SUFFIXES = (".ini", ".cfg", ".conf")
#: The end of a literal naming a data file (the name is read back from the quote before
#: it: a pattern matching the whole literal retried each quote of a file 200 times).
_NAMED_END = re.compile(
    "(?:" + "|".join(re.escape(s) for s in _DATA_SUFFIXES) + r""")(?=['"])""", re.IGNORECASE
)
#: Text that may be Python worth a scan (an import, a call of the kinds the rules read).
_CODE_HINT = re.compile(
    rb"\bimport\s|\bexec\s*\(|\beval\s*\(|\bsystem\s*\(|\bPopen\s*\(|__import__|urlopen"
    rb"""|["'](?:\(\)|class)["']\s*:"""
)

#: Scans one text as Python: (text, the data file's name) -> findings.
Scan = Callable[[str, str], list[Finding]]


def data_file(relative: str) -> bool:
    """Whether a file may be data whose code the package runs, by its name (kept in case
    it is: :meth:`DataCode.findings` decides)."""
    return relative.lower().endswith(_DATA_SUFFIXES)


class DataCode:
    """The data files of a package scan that hold code, the sources that run code and
    name them; :meth:`findings` pairs them once every file has been seen."""

    def __init__(self) -> None:
        #: By data file: its path in a folder, or an archive member's bytes.
        self._files: dict[str, str | bytes] = {}
        #: By Python source: the data file names it runs code near, and whether it is an
        #: install script (the others count only inside a package).
        self._named: dict[str, tuple[frozenset[str], bool]] = {}
        self._packages: set[str] = set()

    def note_code(self, relative: str, text: str, *, installer: bool) -> None:
        """A Python source of the package: the data files it names, when it runs code."""
        if relative.rpartition("/")[2] == "__init__.py":
            self._packages.add(posixpath.dirname(relative))
        # every match holds one of the words: substring tests first (the search, a word
        # boundary before an alternation, read every file of a package at 30 MB/s; two
        # files in three hold none of the words, speed33)
        if not any(word in text for word in _RUNS_WORDS):
            return
        names: set[str] = set()
        for match in _NAMED_END.finditer(text):
            window = text[max(0, match.start() - 200) : match.start()]
            quote = max(window.rfind("'"), window.rfind('"'), window.rfind("\n"))
            literal = window[quote + 1 :] + match.group()
            names.add(posixpath.basename(literal.replace("\\", "/")).lower())
            if len(names) >= 64:
                break
        # the names first: the word-bounded search of a call is the slow test (30 MB/s, a
        # third of the files hold one of its words: `re.compile(` is everywhere) and one
        # of those files in four names a data file; both tests are pure, so asking the
        # cheap one first keeps the same files (speed35)
        if names and _RUNS_CODE.search(text) is not None:
            self._named[relative] = (frozenset(names), installer)

    def note_file(self, relative: str, path: str) -> None:
        """A data file of a folder, read at the end only if a running source names it."""
        self._files[relative] = path

    def note_member(self, relative: str, data: bytes) -> None:
        """A data file of an archive, kept in memory only when it may hold code."""
        if len(data) <= MAX_DATA_BYTES and _CODE_HINT.search(data) is not None:
            self._files[relative] = data

    def findings(self, scan: Scan, read: Callable[[str], bytes | None]) -> list[Finding]:
        """CPL-THR-016 for each data file a running source names whose code holds a
        threat (``scan`` reads one text as Python in package mode, ``read`` a file's bytes
        up to :data:`MAX_DATA_BYTES`, ``None`` when it cannot or it is larger)."""
        named: set[str] = set()
        for source, (names, installer) in self._named.items():
            if installer or posixpath.dirname(source) in self._packages:
                named |= names
        found: list[Finding] = []
        for relative, held in self._files.items():
            if posixpath.basename(relative).lower() not in named:
                continue
            data = read(held) if isinstance(held, str) else held
            texts = _code_texts(relative, data) if data is not None else []
            inside = sorted(
                {
                    f.rule_id
                    for t in texts
                    for f in scan(t, relative)
                    if rule(f.rule_id).kind is RuleKind.THREAT or _unchecked(f)
                }
            )
            if inside:
                file_scan = FileScan(relative, "", NO_GRANTS, (), ScanMode.PACKAGE)
                api = f"the package's code running {relative} ({', '.join(inside[:4])} inside)"
                file_scan.emit("CPL-THR-016", api, 1, None)
                found.extend(file_scan.findings)
        return found


def _unchecked(finding: Finding) -> bool:
    """Whether ``finding`` says code that runs could not be checked and may hide a threat
    (CPL-SCAN-002 as danger: a long run of marks, too deep to survey, beside threat
    tokens); a stage made unreadable on purpose is a stage too (attack23)."""
    return finding.rule_id == "CPL-SCAN-002" and finding.severity is Severity.DANGER


def _code_texts(relative: str, data: bytes) -> list[str]:
    """The texts of a data file that look like Python: a notebook's or JSON document's
    strings, another file whole."""
    if _CODE_HINT.search(data) is None:
        return []
    text = data.decode("utf-8", "replace")
    texts = [text]
    evaluated = file_config_source(text) if relative.lower().endswith(_INI_SUFFIXES) else None
    if evaluated is not None:  # the class, args and kwargs fileConfig evaluates (attack26)
        texts.append(evaluated)
    if relative.lower().endswith((".ipynb", ".json")):
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            texts = list(_json_texts(document))
            configured = dict_config_source(document)
            if configured is not None:  # the calls dictConfig makes of it (scan27's leftover)
                texts.append(configured)
    return [t for t in texts if _parses(t)]


def _json_texts(document: object) -> Iterator[str]:
    """The strings of a JSON document, and each list of strings joined (a notebook cell's
    ``source`` is a list of its lines), at most :data:`_MAX_STRINGS`."""
    stack = [document]
    given = 0
    while stack and given < _MAX_STRINGS:
        item = stack.pop()
        if isinstance(item, str):
            given += 1
            yield item
        elif isinstance(item, list):
            if item and all(isinstance(i, str) for i in item):
                given += 1
                yield "".join(item)
            else:
                stack.extend(reversed(item[:_MAX_STRINGS]))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())[:_MAX_STRINGS]))


def _parses(text: str) -> bool:
    """Whether ``text`` is Python worth a scan: a hint of code in it, and it parses."""
    if len(text) < 12 or _CODE_HINT.search(text.encode("utf-8", "surrogatepass")) is None:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in data are not our warnings
            parse(text)
    except LongMarkRunError:
        return True  # not parsed here: the file pass judges it too complex (attack23)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True
