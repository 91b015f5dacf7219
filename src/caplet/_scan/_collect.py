"""Collection: which files a scan reads, how, and what their names and bytes alone say.

A directory is walked without following symlinks (:func:`walk`); an sdist or
a wheel is read member by member in memory (:mod:`caplet._scan._archive`).
Either way every file goes to a :class:`Collector`, which

* applies the rules about a file's *name* (``setup.py``, ``.pth``, native
  libraries, bytecode) and its raw bytes (a native executable named
  ``.py``), and tells the tree's install script (a ``setup.py`` at the
  root of what is scanned) from one under ``examples/`` or ``tests/``;
* reads sources safely (``O_NOFOLLOW``, ``O_NONBLOCK``, ``fstat``), decodes
  them as an import would (PEP 263), and hands the text to
  :func:`caplet._scan._filepass.scan_text`;
* in package mode also scans files over the size limit (up to a hard cap),
  visiting only the statements around the prefilter's hits, so padding a
  file past the limit does not hide its payload;
* reports what it could not read, and builds the :class:`ScanReport`.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import errno
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from caplet._capabilities._model import Capability
from caplet._findings import Finding
from caplet._marks import parse
from caplet._scan._archive import ArchiveMember, ArchiveProblem, ArchiveProblemKind
from caplet._scan._build_requirements import build_requirement_findings, pyproject_pip_reads
from caplet._scan._collect_names import (
    installers,
    local_modules,
    python_script,
    script_name,
    setup_name,
    wanted,
)
from caplet._scan._collect_read import decode_source, decode_text, read_head, read_source
from caplet._scan._data_code import MAX_DATA_BYTES, DataCode, data_file
from caplet._scan._filepass import scan_text, unread_findings
from caplet._scan._filescan import FileScan
from caplet._scan._grants import NO_GRANTS, Grants
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._package_registries import SinkRegistries
from caplet._scan._pickled_data import MAX_PICKLE_BYTES, PICKLE_SUFFIXES, pickled_call, read_prefix
from caplet._scan._plugin_archives import is_archive
from caplet._scan._prose import prose_findings
from caplet._scan._rules import FILE_NAME_RULES, FILE_SUFFIX_RULES, RuleFamily, RuleKind, rule
from caplet._scan._shell_scripts import MAX_SCRIPT_BYTES, InstalledCommands, shell_script, started
from caplet._scan._shipped_bytecode import ShippedBytecode
from caplet._scan._verdict import file_finding, finish, unused_capabilities

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_NODES",
    "HARD_MAX_FILE_BYTES",
    "Collector",
    "Entry",
    "EntryKind",
    "Limits",
    "decode_source",
    "file_name_findings",
    "installers",
    "local_modules",
    "python_script",
    "read_source",
    "script_name",
    "setup_name",
    "walk",
    "wanted",
]

#: Package mode reads files over the size limit up to this many bytes (larger: not scanned).
HARD_MAX_FILE_BYTES = 16 * 1024 * 1024
#: ... and the text of larger ones up to this many, for their threat tokens alone
#: (an archive's member cap, the largest an sdist or wheel may hold).
TEXT_MAX_FILE_BYTES = 64 * 1024 * 1024
#: Directories never descended into: byte-code caches and VCS metadata.
_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".bzr"})
#: Magic numbers of native executables and libraries (ELF, PE, Mach-O, fat Mach-O).
_NATIVE_MAGIC = (
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
)
#: File endings of native libraries (CPL-NAT-002) ...
_NATIVE_LIBRARIES = (".so", ".pyd", ".dll", ".dylib")
#: ... and of the sources or build files a tree that builds them has.
_NATIVE_SOURCES = (
    ".c",
    ".cc",
    ".cpp",
    ".cxx",
    ".h",
    ".hpp",
    ".pyx",
    ".pxd",
    ".rs",
    ".go",
    ".f",
    ".f90",
    ".cu",
    ".m",
    ".mm",
    ".zig",
    "CMakeLists.txt",
    "meson.build",
    "Cargo.toml",
    "Makefile",
    "build.zig",
)
#: Every ending :data:`FILE_SUFFIX_RULES` names a rule for.
_NAMED_SUFFIXES = tuple(FILE_SUFFIX_RULES)
#: Rules whose findings on a .pth import line make it a threat (CPL-THR-013).
_PTH_PAYLOAD_FAMILIES = frozenset(
    {RuleFamily.PROCESS, RuleFamily.NETWORK, RuleFamily.NATIVE, RuleFamily.OBFUSCATION}
)
#: exec of a literal is not among them: coverage's .pth execs its own start-up line;
#: exec of anything decoded or capable is a threat (CPL-THR-001, CPL-THR-016) anyway.
_PTH_PAYLOAD_RULES = frozenset({"CPL-DYN-003", "CPL-DYN-004"})


class EntryKind(enum.Enum):
    """What the walk found at a path."""

    FILE = "file"
    #: A symlink, FIFO, socket or device: reported, never opened.
    OTHER = "other"
    UNREADABLE_DIR = "unreadable-dir"


@dataclass(frozen=True, slots=True)
class Entry:
    """One directory entry found by the walk (``relative`` is POSIX, from the root)."""

    path: str
    relative: str
    kind: EntryKind
    detail: str = ""


#: The scanner's default limits (scan_tree's keyword defaults; the self-check replays
#: its canaries with them).
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_DEPTH = 200
DEFAULT_MAX_NODES = 500_000


@dataclass(frozen=True, slots=True)
class Limits:
    max_file_bytes: int
    max_depth: int
    max_nodes: int


def walk(root: Path) -> Iterator[Entry]:
    """Every non-directory entry under ``root``, sorted, without following symlinks.

    Iterative (an explicit stack), so a deep directory tree cannot exhaust
    the Python stack.
    """
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if not prefix:
                raise  # the root itself: scan_tree turns this into a ScanError
            yield Entry(directory, prefix.rstrip("/"), EntryKind.UNREADABLE_DIR, exc.strerror or "")
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            relative = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIPPED_DIRS:
                    subdirs.append((entry.path, relative + "/"))
            elif entry.is_file(follow_symlinks=False):
                yield Entry(entry.path, relative, EntryKind.FILE)
            else:
                yield Entry(entry.path, relative, EntryKind.OTHER)
        stack.extend(reversed(subdirs))


def file_name_findings(relative: str, mode: ScanMode = ScanMode.PLUGIN) -> list[Finding]:
    """Rules about a file's name alone: install hooks, native code, bytecode.

    None of them can be covered by a capability, so no grants are needed.
    """
    name = relative.rsplit("/", 1)[-1]
    if name not in FILE_NAME_RULES and not name.endswith(_NAMED_SUFFIXES):
        return []  # almost every file: one lookup and one C-level suffix test
    if (
        mode is ScanMode.PACKAGE
        and FILE_NAME_RULES.get(name) == "CPL-HOOK-003"
        and relative.count("/") > (1 if relative.startswith("src/") else 0)
    ):
        # Only a sitecustomize at an import root runs at start-up; one in a
        # subfolder of a package (a test fixture) is inert.
        return []
    rule_ids = [FILE_NAME_RULES.get(name)]
    rule_ids.extend(r for suffix, r in FILE_SUFFIX_RULES.items() if name.endswith(suffix))
    return [f for r in rule_ids if r is not None for f in file_finding(relative, r, relative, mode)]


class Collector:
    """Findings and counters of one scan, whatever the files come from.

    ``install_scripts`` are the relative paths of the tree's install scripts
    (``None``: decided per file, a ``setup.py`` at most one folder down);
    ``install_entries`` those of them pip runs itself (setup.py, an in-tree build
    backend): the installer's chains are theirs (none given: a ``setup.py``).
    """

    def __init__(
        self,
        capabilities: Sequence[Capability],
        mode: ScanMode,
        limits: Limits,
        local: frozenset[str],
        install_scripts: frozenset[str] | None = None,
        *,
        install_entries: frozenset[str] = frozenset(),
    ) -> None:
        self.capabilities = tuple(capabilities)
        self.grants = Grants.of(capabilities)
        self.mode = mode
        self.limits = limits
        self.local_modules = local
        self.install_scripts = install_scripts
        self.install_entries = install_entries
        self.findings: list[Finding] = []
        self.files_scanned = 0
        self.files_parsed = 0
        self.bytes_scanned = 0
        self._native_libraries: list[str] = []
        self._native_sources = False
        self._wheel = False
        #: shell scripts that pipe a download into a shell, kept if installed (recall10)
        self._commands = InstalledCommands()
        #: containers of sinks filled in one module and called in another (recall14)
        self._registries = SinkRegistries()
        #: data files whose code the package's code runs (blind19)
        self._data_code = DataCode()
        #: .pyc files Python may import in place of their source (scandos37)
        self._bytecode = ShippedBytecode()

    def special_file(self, relative: str) -> None:
        """A link or special file of a tree, not read (CPL-SCAN-005)."""
        self.note_name(relative)
        self._bytecode.not_a_file(relative)
        self.file_problem(relative, "CPL-SCAN-005", relative)

    def file_problem(self, relative: str, rule_id: str, api: str) -> None:
        self.findings.extend(file_finding(relative, rule_id, api, self.mode))

    def note_name(self, relative: str) -> None:
        """Any file of the tree: what its name says about native code (and the name rules)."""
        self.findings.extend(file_name_findings(relative, self.mode))
        self._bytecode.note(relative)
        name = relative.rsplit("/", 1)[-1]
        if name.endswith(_NATIVE_LIBRARIES):
            self._native_libraries.append(relative)
        elif name.endswith(_NATIVE_SOURCES):
            self._native_sources = True
        elif name == "WHEEL" and relative.rsplit("/", 2)[-2].endswith(".dist-info"):
            self._wheel = True

    def note_other(self, relative: str, path: str) -> None:
        """A file the scanner does not read as source: its name and, in plugin mode,
        whether its first bytes are a native executable's (CPL-NAT-002).

        A plugin approved for ``proc.exec:true`` ran ``id`` shipped as
        ``helper.dat`` through the program's dynamic loader (red team, round 4):
        the name rules saw no library and nothing read the file. Only plugin
        mode looks (a plugin tree is small; a package is judged by its names).
        """
        if pyproject_pip_reads(relative):  # build requirements from a URL (recall17)
            toml = read_source(path, self.limits.max_file_bytes)
            if isinstance(toml, bytes):
                self.findings.extend(build_requirement_findings(relative, toml, self.mode))
        if relative.lower().endswith(PICKLE_SUFFIXES):
            self._pickled(relative, read_prefix(path))
        if relative.endswith(".pyc"):
            head = read_head(path)
            self._bytecode.note(relative, head if isinstance(head, bytes) else None)
        shell = False
        if self.mode is ScanMode.PACKAGE and (script_name(relative) or relative.endswith(".sh")):
            head = read_head(path)
            if isinstance(head, bytes) and python_script(head):
                self.add_path(relative, path)
                return
            shell = isinstance(head, bytes) and shell_script(relative, head)
            if shell:
                script = read_source(path, MAX_SCRIPT_BYTES)
                if isinstance(script, bytes):
                    self._commands.note_script(relative, script)
        # a JavaScript file under scripts/ is no installed command but may be a lifecycle
        # script npm runs (``node scripts/postinstall.js``, recall18)
        if self.mode is ScanMode.PACKAGE and data_file(relative):
            self._data_code.note_file(relative, path)  # read only if code runs it (blind19)
        if not shell and self.mode is ScanMode.PACKAGE and started(relative, 0):
            # a script the package's code may start (blind13): kept only if it is
            script = read_source(path, MAX_SCRIPT_BYTES)
            if isinstance(script, bytes) and started(relative, len(script)):
                self._commands.note_script(relative, script)
        self.note_name(relative)
        if self.mode is not ScanMode.PLUGIN or relative.endswith(_NATIVE_LIBRARIES):
            return
        head = read_head(path)
        if isinstance(head, OSError) and head.errno in {0, errno.ELOOP}:
            self.file_problem(relative, "CPL-SCAN-005", relative)  # swapped since the walk
        elif isinstance(head, OSError):
            self.file_problem(relative, "CPL-SCAN-004", head.strerror or type(head).__name__)
        elif isinstance(head, bytes) and (
            head.startswith(_NATIVE_MAGIC) or (head.startswith(b"MZ") and b"\0" in head[:64])
        ):
            self.file_problem(relative, "CPL-NAT-002", f"{relative} (an executable by its content)")
        elif is_archive(path):
            # Code in it is code nobody read: the gate fails closed (steer22).
            self.file_problem(relative, "CPL-SCAN-006", relative)
        else:  # text the auditor model reads (attack20)
            data = read_source(path, self.limits.max_file_bytes)
            if isinstance(data, bytes):
                self.findings.extend(
                    prose_findings(relative, data, self.grants, self.local_modules)
                )

    def add(self, relative: str, data: bytes | int | OSError, *, oversized: bool = False) -> None:
        """Scan one file's content (or record why it could not be read)."""
        self.note_name(relative)
        if isinstance(data, OSError):
            if data.errno in {0, errno.ELOOP}:  # swapped for a link or FIFO since the walk
                self._bytecode.not_a_file(relative)
                self.file_problem(relative, "CPL-SCAN-005", relative)
            else:
                self.file_problem(relative, "CPL-SCAN-004", data.strerror or type(data).__name__)
            return
        if isinstance(data, int):
            self.file_problem(
                relative, "CPL-SCAN-001", f"{data} bytes, limit {self.limits.max_file_bytes}"
            )
            return
        self.files_scanned += 1
        self.bytes_scanned += len(data)
        if relative.endswith(".pth"):
            self.findings.extend(_pth_findings(relative, data, self.mode))
            return
        if data.startswith(_NATIVE_MAGIC) or (data.startswith(b"MZ") and b"\0" in data[:64]):
            self.findings.extend(file_finding(relative, "CPL-THR-021", relative, self.mode))
            return
        text, problem, line = decode_text(data)
        if (
            problem is None
            and self.mode is ScanMode.PACKAGE
            and setup_name(relative.rsplit("/", 1)[-1])
        ):
            self._commands.note_setup(relative, text)  # the scripts it installs (recall10)
        if problem is None and self.mode is ScanMode.PACKAGE:
            # the scripts it may start (blind13)
            self._commands.note_code(relative, text, installer=self._installer(relative))
            self._data_code.note_code(relative, text, installer=self._installer(relative))
        if problem is None:
            self._registries.note(relative, text)
            findings, parsed = scan_text(
                text,
                relative,
                grants=self.grants,
                local_modules=self.local_modules,
                max_depth=self.limits.max_depth,
                max_nodes=self.limits.max_nodes,
                mode=self.mode,
                installer=self._installer(relative),
                install_entry=relative in self.install_entries or None,
                oversized=oversized,
            )
            self.files_parsed += parsed
            self.findings.extend(findings)
            return
        # Undecodable: no AST, but the text rules still look at what there is.
        scan = FileScan(relative, text, self.grants, self.local_modules, self.mode)
        scan.emit("CPL-SCAN-003", problem, line, None)
        scan.long_lines()
        scan.bidi()
        scan.blob_runs()
        scan.text_indicators()
        scan.correlate()
        scan.auditor_text()
        self.findings.extend(scan.findings)

    def add_member(self, member: ArchiveMember) -> None:
        """An sdist or wheel member, read in memory by the archive reader."""
        script = self.mode is ScanMode.PACKAGE and script_name(member.relative)
        if pyproject_pip_reads(member.relative) and len(member.data) <= self.limits.max_file_bytes:
            self.findings.extend(
                build_requirement_findings(member.relative, member.data, self.mode)
            )
        if not wanted(member.relative) and not (script and python_script(member.data[:64])):
            self.note_name(member.relative)
            self._bytecode.note(member.relative, member.data[:16])
            if member.relative.lower().endswith(PICKLE_SUFFIXES):
                self._pickled(member.relative, member.data[:MAX_PICKLE_BYTES])
            if self.mode is ScanMode.PACKAGE and (
                shell_script(member.relative, member.data[:64])
                or started(member.relative, len(member.data))
            ):
                self._commands.note_script(member.relative, member.data)
            if self.mode is ScanMode.PACKAGE and data_file(member.relative):
                self._data_code.note_member(member.relative, member.data)
        elif len(member.data) <= self.limits.max_file_bytes:
            self.add(member.relative, member.data)
        elif self.mode is ScanMode.PACKAGE and len(member.data) <= HARD_MAX_FILE_BYTES:
            self.add(member.relative, member.data, oversized=True)
        elif self.mode is ScanMode.PACKAGE:
            self._unread(member.relative, member.data)
        else:
            self.add(member.relative, len(member.data))

    def _pickled(self, relative: str, data: bytes | None) -> None:
        """A data file whose pickle calls a process, shell or code runner when it is
        loaded (a model file's payload, blind17)."""
        call = None if data is None else pickled_call(data)
        if call is not None:
            api = f"{relative} (a pickle that calls {call} when it is loaded)"
            self.file_problem(relative, "CPL-THR-001", api)

    def add_path(self, relative: str, path: str) -> None:
        """A file of a directory tree, read from disk (package mode: past the limit too)."""
        data = read_source(path, self.limits.max_file_bytes)
        if isinstance(data, int) and self.mode is ScanMode.PACKAGE:
            larger = read_source(path, HARD_MAX_FILE_BYTES)
            if isinstance(larger, bytes):
                self.add(relative, larger, oversized=True)
                return
            text = read_source(path, TEXT_MAX_FILE_BYTES)
            if isinstance(text, bytes):
                self._unread(relative, text)
                return
        self.add(relative, data)

    def _unread(self, relative: str, data: bytes) -> None:
        """A package's source past the hard cap: only its text is read, for the threat
        tokens that make it danger (:func:`~caplet._scan._filepass.unread_findings`)."""
        self.note_name(relative)
        detail = f"{len(data)} bytes, limit {HARD_MAX_FILE_BYTES}; not read as code"
        text = data.decode("utf-8", "replace")
        self.findings.extend(unread_findings(text, relative, detail, self.mode))

    def _installer(self, relative: str) -> bool:
        if self.install_scripts is not None and relative in self.install_scripts:
            return True  # a setup.py, or a module it imports (_installer_imports)
        if not setup_name(relative.rsplit("/", 1)[-1]):
            return False
        return self.install_scripts is None and relative.count("/") <= 1

    def _scan_data(self, text: str, relative: str) -> list[Finding]:
        """Code found in a data file, scanned as a string of Python source is (blind19)."""
        findings, _ = scan_text(
            text,
            relative,
            grants=NO_GRANTS,
            local_modules=self.local_modules,
            max_depth=self.limits.max_depth,
            max_nodes=self.limits.max_nodes,
            mode=ScanMode.PACKAGE,
            depth=1,
        )
        return findings

    def archive_problem(self, item: ArchiveProblem, where: str) -> None:
        api = f"{where} ({item.kind.rationale}{': ' + item.detail if item.detail else ''})"
        self.file_problem(item.relative, ARCHIVE_RULES[item.kind], api)

    def report(self, root: str) -> ScanReport:
        if self.mode is ScanMode.PLUGIN:
            self.findings.extend(unused_capabilities(self.capabilities, self.findings))
        if self.mode is ScanMode.PACKAGE and not self._wheel and not self._native_sources:
            # A source tree shipping a compiled library without anything that
            # builds it: nobody can tell what the library does.
            for relative in self._native_libraries:
                self.file_problem(relative, "CPL-THR-022", relative)
        if self.mode is ScanMode.PACKAGE:
            self.findings.extend(self._commands.findings())
            self.findings.extend(self._data_code.findings(self._scan_data, _read_data))
            for relative, why in self._bytecode.imported():
                self.file_problem(relative, "CPL-THR-030", f"{relative} ({why})")
        self.findings.extend(self._registries.findings(self.mode))
        return ScanReport(
            root=root,
            findings=tuple(finish(self.findings)),
            files_scanned=self.files_scanned,
            bytes_scanned=self.bytes_scanned,
            mode=self.mode,
            files_parsed=self.files_parsed,
        )


#: Archive problems -> the rule that reports them.
ARCHIVE_RULES: dict[ArchiveProblemKind, str] = {
    ArchiveProblemKind.ABSOLUTE_PATH: "CPL-ARC-001",
    ArchiveProblemKind.PARENT_TRAVERSAL: "CPL-ARC-001",
    ArchiveProblemKind.TOTAL_TOO_LARGE: "CPL-ARC-002",
    ArchiveProblemKind.TOO_MANY_MEMBERS: "CPL-ARC-002",
    ArchiveProblemKind.COMPRESSION_RATIO: "CPL-ARC-002",
    ArchiveProblemKind.UNSAFE_NAME: "CPL-ARC-003",
    ArchiveProblemKind.LINK: "CPL-ARC-003",
    ArchiveProblemKind.SPECIAL_FILE: "CPL-ARC-003",
    ArchiveProblemKind.DUPLICATE: "CPL-ARC-003",
    ArchiveProblemKind.FORMAT_MISMATCH: "CPL-ARC-003",
    ArchiveProblemKind.MEMBER_TOO_LARGE: "CPL-ARC-004",
    ArchiveProblemKind.NESTED_ARCHIVE: "CPL-ARC-004",
    ArchiveProblemKind.UNREADABLE: "CPL-ARC-004",
    ArchiveProblemKind.CORRUPT: "CPL-ARC-004",
}


def _pth_findings(relative: str, data: bytes, mode: ScanMode) -> list[Finding]:
    """A .pth file's ``import`` lines run at every interpreter start (site(7)).

    Each such line is scanned as the Python it is; one that executes code,
    starts processes, reaches the network or carries obfuscation or a threat
    makes the file a threat. Plain path lines are data.
    """
    text = data.decode("utf-8", "replace")
    findings: list[Finding] = []
    # Lines as site reads them (a text file: universal newlines, "\n", "\r" and "\r\n"),
    # not str.splitlines: that also splits at "\f", "\x1c", "\x85", "\u2028", ..., which
    # Python reads inside one line, so `import os;x="\u2028";os.system(...)` hid its
    # payload on a "line" that did not start with "import" (scanfuzz).
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.startswith(("import ", "import\t")):
            continue
        hits, _ = scan_text(
            line, relative, grants=NO_GRANTS, local_modules=(), max_depth=50, max_nodes=5000
        )
        if _runs_read_code(line) or any(
            rule(f.rule_id).kind is RuleKind.THREAT
            or rule(f.rule_id).family in _PTH_PAYLOAD_FAMILIES
            or f.rule_id in _PTH_PAYLOAD_RULES
            for f in hits
        ):
            scan = FileScan(relative, text, NO_GRANTS, (), mode)
            scan.emit("CPL-THR-013", f"{relative} line {number}", number, 0)
            findings.extend(scan.findings)
            findings.extend(
                dataclasses.replace(f, line=number)
                for f in hits
                if rule(f.rule_id).kind is RuleKind.THREAT
            )
            break
    return findings


#: What runs the text it is given.
_CODE_RUNNERS = frozenset({"exec", "eval", "compile"})


def _runs_read_code(line: str) -> bool:
    """Whether a .pth import line runs code read from a file: ``exec(open(p).read())``
    (blind16: b16-ot-pth-exec-file, a stage shipped as a data file the scan does not read
    as a module). exec of the line's own literal is coverage's start-up line, not this."""
    try:
        tree = parse(line)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _CODE_RUNNERS
        and node.args
        and any(
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr in {"read", "read_text", "read_bytes"}
            for inner in ast.walk(node.args[0])
        )
        for node in ast.walk(tree)
    )


def _read_data(path: str) -> bytes | None:
    """A data file's bytes, or ``None`` when it is larger than a stage or unreadable."""
    data = read_source(path, MAX_DATA_BYTES)
    return data if isinstance(data, bytes) else None
