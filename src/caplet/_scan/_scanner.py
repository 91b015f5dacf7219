"""The static scanner: AST rules over a plugin tree, without running any of it.

Each ``*.py`` file is decoded, parsed with :func:`ast.parse` and visited
once; nothing is imported or executed (design.md section 4, layer 2). The
rules themselves are data in :mod:`caplet._scan._rules`; this module only
knows how to *find* the spellings listed there:

* one iterative walk measures nesting depth and node count (so that a
  pathological file becomes a finding, never a ``RecursionError``), lists
  the nodes and collects what every name may refer to (imports, simple
  assignments);
* an :class:`ast.NodeVisitor` then visits that node list (no second walk,
  no recursion), resolving every name, attribute and call target to fully
  qualified dotted names (``sp.Popen`` -> ``subprocess.Popen``,
  ``getattr(os, "sys" + "tem")`` -> ``os.system``) and looking them up in
  the rule tables;
* text rules (very long lines, and encoded blobs when the file does not
  parse) run on the decoded text.

Severity is capability-aware: a finding whose behaviour a declared (and
already substituted) capability covers is lowered to the rule's covered
severity and marked ``covered``.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import enum
import errno
import io
import math
import os
import stat
import sys
import tokenize
import urllib.parse
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, assert_never

import re2

from caplet._capabilities._model import (
    AppCapability,
    Capability,
    CapabilityKind,
    EnvReadCapability,
    FsCapability,
    HostCallCapability,
    NetHttpCapability,
    ProcExecCapability,
)
from caplet._errors import ScanError
from caplet._findings import Finding, Severity
from caplet._scan._archive import (
    ArchiveMember,
    ArchiveProblem,
    ArchiveProblemKind,
    detect_format,
    iter_archive,
)
from caplet._scan._correlate import TAG_APIS, Tag, correlate
from caplet._scan._indicators import BIDI_CONTROLS, IndicatorKind, indicator_set
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._prefilter import Need, prefilter
from caplet._scan._rules import (
    API_RULES,
    BLOB_MIN_DISTINCT,
    BLOB_MIN_LENGTH,
    CHR_FUNCTIONS,
    DYNAMIC_IMPORTERS,
    ENV_FUNCTIONS,
    ENV_METHODS,
    ENVIRON_MAPPINGS,
    FILE_NAME_RULES,
    FILE_SUFFIX_RULES,
    FS_READ_METHODS,
    FS_WRITE_METHODS,
    IMPORT_STATE,
    INTROSPECTION_ATTRIBUTES,
    INTROSPECTION_NAMES,
    LONG_LINE,
    MODULE_RULES,
    MUTATING_METHODS,
    OPEN_FUNCTIONS,
    OS_OPEN_WRITE_FLAGS,
    PROGRAM_ARGUMENTS,
    SENSITIVE_PATH_MARKERS,
    SENSITIVE_PATH_PREFIXES,
    ArgumentSpec,
    RuleFamily,
    RuleKind,
    rule,
)
from caplet._scan._selfcheck import self_check

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_NODES",
    "scan_source",
    "scan_tree",
]

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_DEPTH = 200
DEFAULT_MAX_NODES = 500_000

#: Directories never descended into: byte-code caches and VCS metadata.
_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".bzr"})

#: Bounds on the resolver's own recursion (alias chains, attribute chains,
#: constant folding). Real code never comes near them; crafted code that
#: does simply stops resolving, it cannot exhaust the stack.
_MAX_RESOLVE_DEPTH = 48
#: Distinct meanings kept per name. A name rebound to more modules than this
#: is itself absurd; its import statements are still checked one by one.
_MAX_CANDIDATES = 64

_EXCERPT_LENGTH = 120

#: Containers whose items are interpreter-wide state (imports, builtins).
_MUTABLE_STATE = IMPORT_STATE | {"builtins.__dict__"}

_STDLIB = frozenset(sys.stdlib_module_names)

#: Calls whose result is decoded, decompressed or decrypted data: such data
#: reaching exec/eval/compile is a dropper (CPL-THR-001).
_DECODERS = frozenset(
    {
        *(
            f"base64.{n}"
            for n in (
                "b64decode",
                "b32decode",
                "b16decode",
                "a85decode",
                "b85decode",
                "decodebytes",
                "decodestring",
                "standard_b64decode",
                "urlsafe_b64decode",
            )
        ),
        "binascii.a2b_base64",
        "binascii.a2b_hex",
        "binascii.unhexlify",
        "zlib.decompress",
        "gzip.decompress",
        "bz2.decompress",
        "lzma.decompress",
        "marshal.loads",
        "codecs.decode",
        "builtins.bytes.fromhex",
        "builtins.bytearray.fromhex",
    }
)
#: Method names that decode whatever their receiver is (Fernet, bytes, codecs).
_DECODER_METHODS = frozenset(
    {
        "b64decode",
        "b32decode",
        "a85decode",
        "b85decode",
        "decodebytes",
        "unhexlify",
        "a2b_base64",
        "fromhex",
        "decompress",
        "decrypt",
    }
)
#: Codecs that turn text back into code (``s.decode("rot13")`` style).
_DECODING_CODECS = frozenset({"rot13", "rot_13", "base64", "hex", "zlib", "bz2", "uu", "punycode"})
#: exec-like callables whose first argument is checked for decoded/downloaded data.
#: Names a bare reference can be reported for, and the first components of
#: flagged modules: anything else is skipped without splitting it.
_MITIGATION_APIS = {
    "os.path.realpath": "CPL-MIT-001",
    "os.path.islink": "CPL-MIT-001",
    "os.O_NOFOLLOW": "CPL-MIT-001",
    "os.path.commonpath": "CPL-MIT-002",
    "os.path.commonprefix": "CPL-MIT-002",
    "os.path.getsize": "CPL-MIT-003",
}
_REFERENCE_NAMES = (
    frozenset(API_RULES)
    | ENVIRON_MAPPINGS
    | ENV_FUNCTIONS
    | frozenset(OPEN_FUNCTIONS)
    | frozenset(TAG_APIS)
    | frozenset(_MITIGATION_APIS)
    | _DECODERS
)
_EXECUTORS = frozenset({"builtins.exec", "builtins.eval", "builtins.compile", "types.FunctionType"})
#: Network modules: a call into one of them inside exec's argument is downloaded code.
_NETWORK_MODULES = tuple(sorted(m + "." for m, r in MODULE_RULES.items() if r == "CPL-NET-001"))
#: Nodes looked at inside one exec argument (and the values its names are bound to).
_PAYLOAD_BUDGET = 400
#: Rule ids whose findings record a correlation tag.
_RULE_TAGS = {
    "CPL-NET-001": Tag.EGRESS,
    "CPL-NET-002": Tag.EGRESS,
    "CPL-FS-002": Tag.READ,
    "CPL-PROC-001": Tag.PROCESS,
    "CPL-FS-001": Tag.WRITE,
    "CPL-FS-003": Tag.WRITE,
}
#: Program names that are shells (a socket wired to one is a reverse shell).
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "cmd", "cmd.exe", "powershell"})
#: Serialisers: the whole environment passed to one is being packed up.
_SERIALISERS = frozenset(
    {
        "json.dumps",
        "json.dump",
        "pickle.dumps",
        "marshal.dumps",
        "builtins.str",
        "builtins.repr",
        "builtins.bytes",
        "base64.b64encode",
        "urllib.parse.urlencode",
    }
)
#: Method names that send or write data on whatever object they are called.
_SENDING_METHODS = frozenset(
    {"post", "put", "send", "sendall", "sendto", "urlopen", "request", "write", "dumps"}
)
#: Base classes of setuptools/distutils commands (a subclass in setup.py runs at install).
#: build_ext and build_py subclasses compile and copy: routine; install,
#: develop and egg_info subclasses run on the user's machine at install.
_INSTALL_COMMANDS = tuple(
    f"{root}.command.{name}"
    for root in ("setuptools", "distutils")
    for name in ("install", "develop", "egg_info", "bdist_egg")
)
#: Programs that have no business running at install time (CPL-THR-011).
_INSTALL_TIME_PROGRAMS = frozenset(
    {
        "curl",
        "wget",
        "pwsh",
        "powershell.exe",
        "mshta",
        "wscript",
        "cscript",
        "certutil",
        "bitsadmin",
        "nohup",
        "nc",
        "ncat",
        "rundll32",
        "regsvr32",
    }
)
#: Environment variable names that hold secrets (a read feeds CPL-THR-006).
_SECRET_NAME = re2.compile(r"(?i)token|secret|passw|api_?key|access_?key|credential|session")
#: An absolute path literal under a real top-level directory (``/srv/data/in.csv``),
#: for CPL-FS-005. Anchoring on the roots keeps URL paths (``"/v1/items"``) out;
#: /tmp is left out because every worker has a private one.
_ABSOLUTE_PATH = re2.compile(
    r"/(?:etc|var|usr|home|root|srv|opt|mnt|media|data|proc|sys|dev|run|boot|lib|lib64|bin"
    r"|sbin|Users|Library|Volumes|private|Applications)(?:/[A-Za-z0-9._+@-]+)*/?"
)
#: ``os.environ`` methods that walk the whole environment.
#: (``copy()`` is left out: it is how code hands the environment to a subprocess.)
_ENV_ITERATORS = frozenset({"items", "values", "keys"})
#: Calls whose constant arguments are path pieces (joined for the indicators).
_PATH_BUILDERS = frozenset(
    {
        "os.path.join",
        "posixpath.join",
        "ntpath.join",
        "pathlib.Path",
        "pathlib.PurePath",
        "pathlib.PureWindowsPath",
        "pathlib.PurePosixPath",
    }
)
#: Builtins whose lookup by a computed name is a threat (CPL-THR-003).
_BUILTIN_OWNERS = frozenset({"builtins", "builtins.__dict__"})
#: Mitigations (plugin mode): fully qualified names and bare attribute names.
_MITIGATION_ATTRIBUTES = {
    "is_symlink": "CPL-MIT-001",
    "resolve": "CPL-MIT-001",
    "realpath": "CPL-MIT-001",
    "O_NOFOLLOW": "CPL-MIT-001",
    "is_relative_to": "CPL-MIT-002",
    "commonpath": "CPL-MIT-002",
    "st_size": "CPL-MIT-003",
    "getsize": "CPL-MIT-003",
}
_INDICATOR_RULES = {
    IndicatorKind.CREDENTIAL_STORE: "CPL-THR-005",
    IndicatorKind.MINER: "CPL-THR-010",
    IndicatorKind.REVERSE_SHELL: "CPL-THR-008",
}
_INDICATOR_TAGS = {
    IndicatorKind.EXFIL_ENDPOINT: Tag.EXFIL_ENDPOINT,
    IndicatorKind.CREDENTIAL_FILE: Tag.CREDENTIAL_FILE,
    IndicatorKind.PERSISTENCE: Tag.PERSISTENCE,
    IndicatorKind.DOWNLOAD_EXEC: Tag.DOWNLOAD_EXEC,
    IndicatorKind.CLIPBOARD: Tag.CLIPBOARD,
    IndicatorKind.WALLET_PATTERN: Tag.WALLET_PATTERN,
}
#: Strings this long or longer get an entropy check (CPL-OBF-004) ...
_ENTROPY_MIN_LENGTH = 64
#: ... and are flagged above this many bits per character (English prose is
#: about 4.2, hex 4.0 at most, random base64 about 6).
_ENTROPY_BITS = 5.3
_URL_PREFIXES = ("http://", "https://")
_MODULE_ROOTS = frozenset(m.split(".", 1)[0] for m in MODULE_RULES)
_BASE64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
_HEX_ALPHABET = frozenset("0123456789abcdefABCDEF")
#: ``bytes.translate`` table turning every non-base64 byte into a space, for
#: the text fallback on unparsable files (linear, no regex backtracking).
_NOT_BASE64 = bytes(c if chr(c) in _BASE64_ALPHABET else 0x20 for c in range(256))


# -- capabilities ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Grants:
    """What the declared capabilities cover, reduced to what the rules ask.

    A templated capability (``fs.read:${config.root}``) covers its *kind*
    (the plugin did declare that it reads files) but no literal path or
    program, because its value is only known once configured; the sandbox
    enforces the substituted value.
    """

    fs_read: tuple[str, ...]
    fs_write: tuple[str, ...]
    env_names: frozenset[str]
    programs: tuple[str, ...]
    templated_kinds: frozenset[CapabilityKind] = frozenset()
    net: tuple[NetHttpCapability, ...] = ()

    @property
    def writes_files(self) -> bool:
        return bool(self.fs_write) or CapabilityKind.FS_WRITE in self.templated_kinds

    @property
    def reads_files(self) -> bool:
        return (
            self.writes_files
            or bool(self.fs_read)
            or CapabilityKind.FS_READ in self.templated_kinds
        )

    @property
    def runs_programs(self) -> bool:
        return bool(self.programs) or CapabilityKind.PROC_EXEC in self.templated_kinds

    @classmethod
    def of(cls, capabilities: Sequence[Capability]) -> _Grants:
        fs_read: list[str] = []
        fs_write: list[str] = []
        env_names: set[str] = set()
        programs: list[str] = []
        templated: set[CapabilityKind] = set()
        net: list[NetHttpCapability] = []
        for cap in capabilities:
            if cap.templated:
                templated.add(cap.kind)
                continue
            if isinstance(cap, FsCapability):
                target = fs_write if cap.kind is CapabilityKind.FS_WRITE else fs_read
                target.append(cap.root)
            elif isinstance(cap, EnvReadCapability):
                env_names.add(cap.name)
            elif isinstance(cap, ProcExecCapability):
                programs.append(cap.program)
            elif isinstance(cap, NetHttpCapability):
                net.append(cap)
            elif isinstance(cap, HostCallCapability | AppCapability):
                pass  # brokered by the host: no scanner rule is about them
            else:
                assert_never(cap)
        return cls(
            tuple(fs_read),
            tuple(fs_write),
            frozenset(env_names),
            tuple(programs),
            frozenset(templated),
            tuple(net),
        )

    def covers_program(self, program: str | None) -> bool:
        """A literal program must be granted by name; an unknown one by any grant."""
        if program is None:
            return self.runs_programs
        name = PurePosixPath(program).name
        return any(
            granted in (program, name) or PurePosixPath(granted).name == program
            for granted in self.programs
        )

    def covers_host(self, host: str) -> bool:
        """True when a net.http capability names ``host`` (exactly, or by ``*.suffix``)."""
        host = host.lower().rstrip(".")
        for cap in self.net:
            if cap.wildcard:
                if host.endswith("." + cap.host):
                    return True
            elif host == cap.host:
                return True
        return any(CapabilityKind.NET_HTTP is k for k in self.templated_kinds)

    def covers_path(self, literal: str) -> bool:
        """True when some fs capability's path is a prefix of ``literal``."""
        for prefix in (*self.fs_read, *self.fs_write):
            base = prefix.rstrip("/")
            if literal == prefix or literal.startswith(base + "/"):
                return True
        return False


_NO_GRANTS = _Grants((), (), frozenset(), ())


# -- the first pass: limits and bindings --------------------------------------------------


@dataclass(slots=True)
class _Bindings:
    """What each name of a file may refer to, collected before rules run.

    Scopes are deliberately flattened: a name imported in one function and
    used in another still resolves, which errs towards reporting.
    """

    imports: dict[str, list[str]]
    assigned: dict[str, list[ast.expr]]
    defined: set[str]
    star_modules: list[str]


@dataclass(frozen=True, slots=True)
class _Survey:
    """The first pass's result: bindings, and every node parents first."""

    bindings: _Bindings
    nodes: list[ast.AST]


@dataclass(frozen=True, slots=True)
class _TooComplex:
    """Why the first pass gave up, and where."""

    reason: str
    line: int


#: Fields never worth a visit: expression contexts and operators are
#: singletons with no position, read directly by the rules that need them.
_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops"})
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}
_BINDING_NODES = (
    ast.Import,
    ast.ImportFrom,
    ast.Assign,
    ast.AnnAssign,
    ast.NamedExpr,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


def _survey(
    tree: ast.AST,
    max_depth: int,
    max_nodes: int,
    roots: Sequence[ast.AST] | None = None,
    bindings: _Bindings | None = None,
) -> _Survey | _TooComplex:
    """Measure depth and size, collect bindings and list the nodes, in one walk.

    Iterative and level by level (breadth first), so that no nesting can
    exhaust the Python stack and the depth is simply the level count; the
    node list has every parent before its children, which the rule visitor
    relies on. The child loop is ``ast.iter_child_nodes`` inlined with
    per-class field lists: this walk is the scanner's hot path.
    """
    if bindings is None:
        bindings = _Bindings({}, {}, set(), [])
    nodes: list[ast.AST] = []
    level: list[ast.AST] = [tree] if roots is None else list(roots)
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return _TooComplex(f"nesting deeper than {max_depth} levels", _first_line(level))
        if len(nodes) + len(level) > max_nodes:
            return _TooComplex(f"more than {max_nodes} syntax nodes", _first_line(level))
        nodes.extend(level)
        below: list[ast.AST] = []
        for node in level:
            kind = type(node)
            if kind in _BINDING_NODES:
                _bind(node, bindings)
            fields = _CHILD_FIELDS.get(kind)
            if fields is None:
                fields = tuple(f for f in kind._fields if f not in _SKIPPED_FIELDS)
                _CHILD_FIELDS[kind] = fields
            for name in fields:
                value = getattr(node, name, None)
                if isinstance(value, list):
                    below.extend(item for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    below.append(value)
        level = below
    return _Survey(bindings, nodes)


def _first_line(level: list[ast.AST]) -> int:
    """A line number to point at: the first node of ``level`` that has one."""
    return next((n.lineno for n in level if isinstance(n, ast.stmt | ast.expr)), 0)


def _bind(node: ast.AST, b: _Bindings) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                b.imports.setdefault(alias.asname, []).append(alias.name)
            else:
                top = alias.name.split(".", 1)[0]
                b.imports.setdefault(top, []).append(top)
    elif isinstance(node, ast.ImportFrom):
        # A relative import names a module of the plugin itself: the leading
        # dot keeps it from ever matching a rule table entry.
        module = ("." * node.level) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                if node.level == 0 and node.module:
                    b.star_modules.append(node.module)
                continue
            b.imports.setdefault(alias.asname or alias.name, []).append(f"{module}.{alias.name}")
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            _bind_target(target, node.value, b)
    elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
        _bind_target(node.target, node.value, b)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        b.defined.add(node.name)


def _bind_target(target: ast.expr, value: ast.expr, b: _Bindings) -> None:
    if isinstance(target, ast.Name):
        b.assigned.setdefault(target.id, []).append(value)
    elif (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(target.elts) == len(value.elts)
    ):
        for t, v in zip(target.elts, value.elts, strict=True):
            if isinstance(t, ast.Name):
                b.assigned.setdefault(t.id, []).append(v)


# -- helpers on nodes ---------------------------------------------------------------------


def _fold_str(node: ast.AST | None, depth: int = 0) -> str | None:
    """The value of a constant string expression, or ``None``.

    Folds what obfuscation uses to hide a name from a plain text search:
    ``"sys" + "tem"``, f-strings without fields, ``"".join(["sy", "stem"])``.
    Bytes are read as Latin-1 so ``os.environb[b"X"]`` folds to ``"X"``.
    """
    if node is None or depth > _MAX_RESOLVE_DEPTH:
        return None
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("latin-1")
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _fold_str(node.left, depth + 1)
        right = _fold_str(node.right, depth + 1) if left is not None else None
        return None if right is None or left is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_fold_str(v, depth + 1) for v in node.values]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.List | ast.Tuple)
    ):
        sep = _fold_str(node.func.value, depth + 1)
        items = [_fold_str(e, depth + 1) for e in node.args[0].elts]
        if sep is None or any(i is None for i in items):
            return None
        return sep.join(i or "" for i in items)
    return None


def _argument(call: ast.Call, spec: ArgumentSpec) -> ast.expr | None:
    if spec.index < len(call.args) and not any(
        isinstance(a, ast.Starred) for a in call.args[: spec.index + 1]
    ):
        return call.args[spec.index]
    if spec.keyword is not None:
        for kw in call.keywords:
            if kw.arg == spec.keyword:
                return kw.value
    return None


def _program(arg: ast.expr | None) -> str | None:
    """The program a process call runs: a list's first item or a command's first word."""
    if isinstance(arg, ast.List | ast.Tuple):
        arg = arg.elts[0] if arg.elts else None
    text = _fold_str(arg)
    if text is None:
        return None
    words = text.split()
    return words[0] if words else None


def _is_blob(text: str) -> bool:
    """Long base64 or hex text (line breaks and indentation allowed)."""
    if len(text) < BLOB_MIN_LENGTH:
        return False
    joined = "".join(line.strip() for line in text.splitlines())
    if len(joined) < BLOB_MIN_LENGTH:
        return False
    chars = set(joined)
    return len(chars) >= BLOB_MIN_DISTINCT and (chars <= _HEX_ALPHABET or chars <= _BASE64_ALPHABET)


def _sensitive_path(text: str) -> bool:
    if len(text) > 4096:  # a path literal is short; prose and data are not paths
        return False
    if "/" not in text and ".netrc" not in text:  # fast exit: every pattern has one
        return False
    for prefix in SENSITIVE_PATH_PREFIXES:
        if text.startswith(prefix) or (prefix.endswith("/") and text == prefix[:-1]):
            return True
    return any(marker in text for marker in SENSITIVE_PATH_MARKERS)


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    if len(set(text)) < 2**_ENTROPY_BITS:
        # Entropy never exceeds log2(distinct characters): exact, and cheap
        # for the long repetitive literals that are common and slow to count.
        return 0.0
    length = len(text)
    counts = collections.Counter(text).values()
    return -sum(c / length * math.log2(c / length) for c in counts)


def _url_host(url: str) -> str | None:
    """The host of an absolute http(s) URL literal, lower-case (``None`` if unclear)."""
    try:
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname
    except ValueError:
        return None
    if not host or "{" in host or "%" in host:
        return None  # a template, not a host
    return host.rstrip(".")


def _literal_prefix(node: ast.AST) -> str | None:
    """The literal start of a string expression: ``"https://x/" + data`` -> ``"https://x/"``."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _literal_prefix(node.left)
    if isinstance(node, ast.JoinedStr) and node.values:
        return _literal_prefix(node.values[0])
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return _literal_prefix(node.func.value)
    return None


def _launches_payload(program: str) -> bool:
    """A program that is a dropped payload: a Windows executable or something in /tmp."""
    lowered = program.lower()
    return lowered.endswith((".exe", ".scr", ".bat", ".ps1", ".vbs", ".msi")) or lowered.startswith(
        ("/tmp/", "/dev/shm/", "/var/tmp/")  # noqa: S108 -- patterns matched, not paths used
    )


def _hides_name(name: str) -> bool:
    """True when ``name`` (a module or attribute built from pieces) is worth hiding."""
    root = name.split(".", 1)[0]
    return (
        name in MODULE_RULES
        or root in MODULE_RULES
        or root in {"os", "builtins", "sys", "marshal", "base64", "zlib", "codecs"}
    )


def _shorten(text: str, limit: int = 60) -> str:
    """A literal, quoted and cut, for a message."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# -- per-file state -------------------------------------------------------------------


class _FileScan:
    """Findings of one file, with the context every rule needs."""

    def __init__(
        self,
        file: str,
        text: str,
        grants: _Grants,
        local_modules: Collection[str],
        mode: ScanMode = ScanMode.PLUGIN,
    ) -> None:
        self.file = file
        self.text = text
        self.ascii = text.isascii()
        # Python ends lines at \n, \r\n and \r only; str.splitlines() also
        # splits on \f, \x1c, \u2028 ... and would shift every line number.
        self.lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.grants = grants
        self.local_modules = local_modules
        self.mode = mode
        self.findings: list[Finding] = []
        #: Correlation tags: first line and spelling of each (see _correlate).
        self.tags: dict[Tag, tuple[int, str]] = {}
        self.setup_py = file.rsplit("/", 1)[-1] == "setup.py"
        # Which indicator kinds occur anywhere in the text: string constants
        # are only matched one by one when the file has any at all.
        self.indicator_kinds = indicator_set().kinds(text) if text else frozenset()
        self._mitigations: set[str] = set()
        self.credential_kinds: set[str] = set()
        #: String constants seen by the AST pass: (text, line, column offset).
        self.strings: list[tuple[str, int, int]] = []
        self.secret_names: set[str] = set()

    def tag(self, tag: Tag, line: int, api: str) -> None:
        """Record ``tag`` for correlation (the first occurrence is the one shown)."""
        if tag not in self.tags:
            self.tags[tag] = (line, api)

    def mitigation(self, rule_id: str, api: str, node: ast.AST) -> None:
        """A mitigation finding, once per rule and file, in plugin reports only."""
        if self.mode is ScanMode.PLUGIN and rule_id not in self._mitigations:
            self._mitigations.add(rule_id)
            self.emit_at(rule_id, api, node)

    def string_indicators(self) -> None:
        """Indicator rules over the file's string constants, gated by one RE2 match.

        All strings joined by newlines go through a multi-line variant of the
        set once; only when it matches is each string matched on its own. The
        gate over-approximates (a pattern may match across two strings), so
        it never hides a string's own match.
        """
        if not self.strings:
            return
        joined = "\n".join(text for text, _, _ in self.strings)
        if not indicator_set().gate(joined):
            return
        for text, line, col in self.strings:
            self.indicators(text, line, col)

    def correlate(self) -> None:
        """Emit the chains this file's tags complete (after every other rule ran)."""
        self.string_indicators()
        chains = correlate(
            self.tags,
            setup_py=self.setup_py,
            credential_kinds=len(self.credential_kinds),
            secret_names=len(self.secret_names),
        )
        for chain in chains:
            self.emit(chain.rule_id, chain.api, chain.line, None)

    def indicators(self, text: str, line: int, col_offset: int | None) -> None:
        """Indicator rules and tags for one string (or one line of unparsable text)."""
        for indicator in indicator_set().matches(text):
            rule_id = _INDICATOR_RULES.get(indicator.kind)
            if rule_id is not None:
                self.emit(rule_id, f"{indicator.label} {_shorten(text)}", line, col_offset)
                continue
            tag = _INDICATOR_TAGS.get(indicator.kind)
            if tag is not None:
                self.tag(tag, line, f"{indicator.label} {_shorten(text)}")
                if tag is Tag.EXFIL_ENDPOINT:
                    self.tag(Tag.EGRESS, line, indicator.label)
                elif tag is Tag.CREDENTIAL_FILE:
                    self.credential_kinds.add(indicator.label)

    def text_indicators(self) -> None:
        """Indicators line by line, for files without an AST (comments count here)."""
        if self.indicator_kinds:
            for number, line in enumerate(self.lines, start=1):
                self.indicators(line, number, 0)

    def bidi(self) -> None:
        """Trojan Source: bidirectional controls anywhere (comments and strings too)."""
        if self.ascii or not any(c in self.text for c in BIDI_CONTROLS):
            return
        for number, line in enumerate(self.lines, start=1):
            if not line.isascii():
                found = BIDI_CONTROLS.intersection(line)
                if found:
                    names = ", ".join(f"U+{ord(c):04X}" for c in sorted(found))
                    self.emit("CPL-THR-012", names, number, 0)

    def emit(
        self,
        rule_id: str,
        api: str,
        line: int,
        col_offset: int | None,
        *,
        covered: bool = False,
        capability: str | None = None,
    ) -> None:
        """Record one finding; ``col_offset`` is ast's (UTF-8 bytes, 0-based).

        In package mode a capability finding is an observed capability (info,
        no "declare ..." hint: there is no manifest to declare it in), and
        findings that only make sense against a manifest are dropped.
        """
        r = rule(rule_id)
        tag = _RULE_TAGS.get(rule_id)
        if tag is not None:
            self.tag(tag, line, api)
        if r.covered_by is not None and capability is None:
            capability = r.covered_by.value
        text = r.message.format(api=api)
        if self.mode is ScanMode.PACKAGE and r.kind is RuleKind.CAPABILITY:
            if r.family is RuleFamily.SUPPLY_CHAIN:
                return  # a package's own dependencies are not a finding
            severity = Severity.INFO
            message = f"observed capability: {text}"
            covered = False
        elif covered and r.covered_severity is not None:
            severity = r.covered_severity
            message = f"{text} (covered by {capability})"
        else:
            covered = False
            severity = r.severity
            message = f"{text}; {r.hint}" if r.hint else text
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        column = 0 if col_offset is None else _column(source_line, col_offset)
        excerpt = source_line.strip()
        if len(excerpt) > _EXCERPT_LENGTH:
            excerpt = excerpt[: _EXCERPT_LENGTH - 1] + "…"
        self.findings.append(
            Finding(
                rule_id=rule_id,
                severity=severity,
                message=message,
                file=self.file,
                line=line,
                column=column,
                excerpt=excerpt,
                capability=capability,
                covered=covered,
            )
        )

    def emit_at(
        self,
        rule_id: str,
        api: str,
        node: ast.AST,
        *,
        covered: bool = False,
        capability: str | None = None,
    ) -> None:
        """Record one finding at ``node``'s position."""
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", None)
        self.emit(rule_id, api, line, col, covered=covered, capability=capability)

    # -- text rules --------------------------------------------------------------------

    def long_lines(self) -> None:
        # max() over the lengths runs in C; the loop only when one is too long.
        if not self.lines or max(map(len, self.lines)) <= LONG_LINE:
            return
        for number, line in enumerate(self.lines, start=1):
            if len(line) > LONG_LINE:
                self.emit("CPL-OBF-003", f"line {number} ({len(line)} characters)", number, 0)

    def blob_runs(self) -> None:
        """Encoded blobs in the raw text, for files whose strings ast cannot give us."""
        for number, line in enumerate(self.lines, start=1):
            if len(line) < BLOB_MIN_LENGTH:
                continue
            # Non-ASCII characters become "?" (not base64), then one C-level
            # translate turns every non-alphabet byte into a separator.
            ascii_line = line.encode("ascii", "replace").translate(_NOT_BASE64)
            for raw in ascii_line.split():
                run = raw.decode("ascii")
                if _is_blob(run):
                    self.emit("CPL-OBF-001", f"text of {len(run)} characters", number, 0)
                    break

    # -- module rules ------------------------------------------------------------------

    def check_module(self, name: str, node: ast.AST, flagged: set[str]) -> None:
        """Rules about importing ``name`` (an import or a literal dynamic import)."""
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            rule_id = MODULE_RULES.get(prefix)
            if rule_id is not None:
                flagged.add(prefix)
                self._emit_module(rule_id, prefix, node)
        top = parts[0]
        if top and top not in _STDLIB and top != "caplet" and top not in self.local_modules:
            self.emit_at("CPL-SUP-001", top, node)

    def _emit_module(self, rule_id: str, module: str, node: ast.AST) -> None:
        covered = rule_id == "CPL-PROC-002" and self.grants.runs_programs
        self.emit_at(rule_id, module, node, covered=covered)


def _column(line: str, col_offset: int) -> int:
    """1-based character column from ast's UTF-8 byte offset."""
    if line.isascii():
        return col_offset + 1
    return len(line.encode("utf-8")[:col_offset].decode("utf-8", "replace")) + 1


# -- the second pass: rules -------------------------------------------------------------


class _RuleVisitor(ast.NodeVisitor):
    """Applies the code rules to one parsed file.

    It is an :class:`ast.NodeVisitor` (``visit_<Class>`` methods) that does
    not recurse: :meth:`run` feeds it the first pass's node list, parents
    before children, and ``generic_visit`` does nothing. So the Python stack
    stays flat whatever the nesting and the tree is walked once. Nodes a
    parent has already reported with more context (``subprocess.run`` inside
    a call whose program is known) are recorded in ``_handled`` and skipped.
    """

    def __init__(self, scan: _FileScan, bindings: _Bindings) -> None:
        self._scan = scan
        self._b = bindings
        self._handled: set[int] = set()
        self._memo: dict[int, tuple[str, ...]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._resolving: set[str] = set()
        self._flagged_modules: set[str] = set()

    def run(self, nodes: list[ast.AST]) -> None:
        # NodeVisitor.visit looks the method up by name for every node; a
        # per-class cache skips the string building, and classes without a
        # visit_ method are skipped outright.
        methods: dict[type[ast.AST], Callable[[Any], None] | None] = {}
        for node in nodes:
            kind = type(node)
            try:
                method = methods[kind]
            except KeyError:
                method = getattr(self, f"visit_{kind.__name__}", None)
                methods[kind] = method
            if method is not None:
                method(node)

    def generic_visit(self, node: ast.AST) -> None:
        """Nothing: :meth:`run` already visits every node."""

    # -- resolution -------------------------------------------------------------------

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        """Fully qualified dotted names ``node`` may denote (empty when unknown)."""
        key = id(node)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if depth > _MAX_RESOLVE_DEPTH:
            return ()
        result = self._resolve(node, depth)
        self._memo[key] = result
        return result

    def _resolve(self, node: ast.AST, depth: int) -> tuple[str, ...]:
        if isinstance(node, ast.Name):
            return self._resolve_name(node.id, depth)
        if isinstance(node, ast.Attribute):
            return tuple(f"{base}.{node.attr}" for base in self.resolve(node.value, depth + 1))
        if isinstance(node, ast.Subscript):
            return self._resolve_subscript(node, depth)
        if isinstance(node, ast.Call):
            return self._resolve_call(node, depth)
        return ()

    def _resolve_name(self, name: str, depth: int) -> tuple[str, ...]:
        cached = self._names.get(name)
        if cached is not None:
            return cached
        if name in self._resolving:  # a = b; b = a
            return ()
        self._resolving.add(name)
        found: list[str] = list(self._b.imports.get(name, ()))
        for value in self._b.assigned.get(name, ())[:_MAX_CANDIDATES]:
            found.extend(self.resolve(value, depth + 1))
        if name in INTROSPECTION_NAMES:
            found.append("builtins")
        elif name not in self._b.imports and name not in self._b.defined:
            # Unbound by import or def: it is the builtin (or a star import).
            found.append(f"builtins.{name}")
            found.extend(f"{m}.{name}" for m in self._b.star_modules)
        self._resolving.discard(name)
        result = tuple(dict.fromkeys(found))[:_MAX_CANDIDATES]
        self._names[name] = result
        return result

    def _resolve_subscript(self, node: ast.Subscript, depth: int) -> tuple[str, ...]:
        key = _fold_str(node.slice)
        if key is None:
            return ()
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            # builtins.__dict__["eval"] is builtins.eval
            return tuple(f"{b}.{key}" for b in self.resolve(value.value, depth + 1))
        if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            # vars(builtins)["eval"] likewise
            if "builtins.vars" in self.resolve(value.func, depth + 1):
                return tuple(f"{b}.{key}" for b in self.resolve(value.args[0], depth + 1))
            return ()
        if "sys.modules" in self.resolve(value, depth + 1):
            return (key,)
        return ()

    def _resolve_call(self, node: ast.Call, depth: int) -> tuple[str, ...]:
        funcs = self.resolve(node.func, depth + 1)
        if not funcs or not node.args:
            return ()
        if not DYNAMIC_IMPORTERS.isdisjoint(funcs):
            # __import__("os") evaluates to the module os (for a dotted name
            # __import__ returns the top package, import_module the leaf).
            name = _fold_str(node.args[0])
            if name is None:
                return ()
            if "builtins.__import__" in funcs and "fromlist" not in {k.arg for k in node.keywords}:
                return tuple(dict.fromkeys((name, name.split(".", 1)[0])))
            return (name,)
        if "builtins.getattr" in funcs and len(node.args) >= 2:
            attr = _fold_str(node.args[1])
            if attr is None:
                return ()
            return tuple(f"{b}.{attr}" for b in self.resolve(node.args[0], depth + 1))
        return ()

    # -- reporting helpers ------------------------------------------------------------------

    def _report_reference(self, node: ast.AST, candidates: tuple[str, ...]) -> None:
        """API rules for a reference that no enclosing call has reported."""
        for name in candidates:
            if name not in _REFERENCE_NAMES and name.split(".", 1)[0] not in _MODULE_ROOTS:
                continue
            tag = TAG_APIS.get(name)
            if tag is not None:
                self._scan.tag(tag, getattr(node, "lineno", 0), name)
            mitigation = _MITIGATION_APIS.get(name)
            if mitigation is not None:
                self._scan.mitigation(mitigation, name, node)
            if name in _DECODERS:
                self._scan.tag(Tag.DECODE, getattr(node, "lineno", 0), name)
            rule_id = API_RULES.get(name)
            if (
                (name in _EXECUTORS or name in _DECODERS)
                and isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Call)
                and not DYNAMIC_IMPORTERS.isdisjoint(self.resolve(node.value.func))
            ):
                # __import__("builtins").exec: no reason to spell it so but to hide it
                self._scan.emit_at(
                    "CPL-THR-003", f"{name.removeprefix('builtins.')} through __import__", node
                )
            if rule_id is not None:
                self._emit_api(rule_id, name, node)
                continue
            # `import urllib; urllib.request.urlopen(...)` imports nothing
            # flagged: report the module at its first use instead.
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                module_rule = MODULE_RULES.get(prefix)
                if module_rule is not None and prefix not in self._flagged_modules:
                    self._flagged_modules.add(prefix)
                    self._scan._emit_module(module_rule, prefix, node)
            if name in ENVIRON_MAPPINGS or name in ENV_FUNCTIONS:
                self._emit_env(node, name, None)
            elif name in OPEN_FUNCTIONS:
                # `reader = open` hides the mode from the call rule: assume a write.
                api = f"{name.removeprefix('builtins.')} (not called directly: mode unknown)"
                self._scan.emit_at("CPL-FS-001", api, node, covered=self._scan.grants.writes_files)

    def _emit_api(self, rule_id: str, name: str, node: ast.AST, program: str | None = None) -> None:
        grants = self._scan.grants
        api = name.removeprefix("builtins.")
        if rule_id == "CPL-PROC-001":
            line = getattr(node, "lineno", 0)
            if program is not None and PurePosixPath(program).name in _SHELLS:
                self._scan.tag(Tag.SHELL, line, program)
            if program is not None and _launches_payload(program):
                self._scan.tag(Tag.LAUNCH, line, program)
            if isinstance(node, ast.Call):
                marker = self._persistence_marker(node)
                if marker is not None:
                    self._scan.tag(Tag.PERSISTENCE_WRITE, line, marker)
            capability = f"proc.exec:{program}" if program else None
            self._scan.emit_at(
                rule_id,
                api,
                node,
                covered=grants.covers_program(program),
                capability=capability,
            )
        elif rule_id == "CPL-FS-003":
            self._scan.emit_at(rule_id, api, node, covered=grants.writes_files)
        else:
            self._scan.emit_at(rule_id, api, node)

    def _emit_env(self, node: ast.AST, api: str, key: str | None) -> None:
        """``api`` is how the access reads, with ``{}`` where the name goes."""
        names = self._scan.grants.env_names
        if key is not None and _SECRET_NAME.search(key):
            self._scan.tag(Tag.SECRET_ENV, getattr(node, "lineno", 0), key)
            self._scan.secret_names.add(key)
        if key is not None:
            self._scan.emit_at(
                "CPL-ENV-001",
                api.format(repr(key)),
                node,
                covered=key in names,
                capability=f"env.read:{key}",
            )
        else:
            self._scan.emit_at("CPL-ENV-002", api.format("..."), node, covered=bool(names))

    def _emit_open(self, node: ast.Call, name: str, spec: ArgumentSpec) -> None:
        grants = self._scan.grants
        api = name.removeprefix("builtins.")
        arg = _argument(node, spec)
        if name == "os.open":
            flags = (
                {n.attr for n in ast.walk(arg) if isinstance(n, ast.Attribute)}
                | {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
                if arg is not None
                else set()
            )
            writes = not OS_OPEN_WRITE_FLAGS.isdisjoint(flags)
        elif arg is None:
            writes = False  # the default mode is "r"
        else:
            mode = _fold_str(arg)
            if mode is None:
                api = f"{api} (mode is not a literal)"
            writes = mode is None or any(c in mode for c in "wax+")
        if writes:
            self._scan.emit_at("CPL-FS-001", api, node, covered=grants.writes_files)
            path = _argument(node, ArgumentSpec(0, "file"))
            marker = self._persistence_marker(path) if path is not None else None
            if marker is not None:
                self._scan.tag(Tag.PERSISTENCE_WRITE, getattr(node, "lineno", 0), marker)
        else:
            read_ok = grants.reads_files
            self._scan.emit_at("CPL-FS-002", api, node, covered=read_ok)

    def _persistence_marker(self, node: ast.AST) -> str | None:
        """An autostart location named by the strings inside ``node`` (names followed once).

        Pieces count joined too: ``os.path.join(appdata, "Start Menu",
        "Programs", "Startup")`` names the Startup folder without any one
        literal doing so.
        """
        stack: list[ast.AST] = [node]
        seen: set[str] = set()
        pieces: list[str] = []
        budget = _PAYLOAD_BUDGET
        while stack and budget > 0:
            item = stack.pop()
            budget -= 1
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                pieces.append(item.value)
            elif isinstance(item, ast.Call):
                joined = [
                    a.value
                    for a in item.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
                if len(joined) >= 2:
                    pieces.append("/".join(joined))
            elif isinstance(item, ast.Name) and item.id not in seen:
                seen.add(item.id)
                stack.extend(self._b.assigned.get(item.id, ())[:8])
            stack.extend(ast.iter_child_nodes(item))
        for text in pieces:
            if any(i.kind is IndicatorKind.PERSISTENCE for i in indicator_set().matches(text)):
                return _shorten(text)
        return None

    def _check_store(self, target: ast.AST, api_node: ast.AST) -> None:
        """Global-mutation rule for an assignment or deletion target."""
        if isinstance(target, ast.Attribute):
            owner = self._mutable_owner(target.value, target.attr)
            if owner is not None:
                self._scan.emit_at("CPL-GLOB-001", f"{owner}.{target.attr} = ...", api_node)
        elif isinstance(target, ast.Subscript):
            for base in self.resolve(target.value):
                if base in _MUTABLE_STATE:
                    self._scan.emit_at("CPL-GLOB-001", f"{base}[...] = ...", api_node)
                    return
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_store(element, element)
        elif isinstance(target, ast.Starred):
            self._check_store(target.value, api_node)

    def _mutable_owner(self, node: ast.AST, attr: str | None) -> str | None:
        """The module ``node`` denotes when setting its ``attr`` patches it.

        Builtins, any ``sys.modules[...]`` entry and top-level standard
        library modules (``os.system = f``) count. ``sys`` only for its import
        state: ``sys.argv``/``sys.stdout`` assignments are routine and only
        affect the plugin's own worker. Submodules and classes (``os.path``,
        ``bdb.Breakpoint``) cannot be told apart without importing them, so
        they are left to the later scanner. ``attr`` is ``None`` when unknown.
        """
        if isinstance(node, ast.Subscript) and "sys.modules" in self.resolve(node.value):
            return "sys.modules[...]"
        for base in self.resolve(node):
            if base == "sys":
                if attr is None or f"sys.{attr}" in IMPORT_STATE:
                    return base
            elif base == "builtins" or ("." not in base and base in _STDLIB):
                return base
        return None

    # -- visitors -------------------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # setup.py's custom install/develop command: code that runs at install
        if self._scan.setup_py:
            for base in node.bases:
                if any(b.startswith(_INSTALL_COMMANDS) for b in self.resolve(base)):
                    self._scan.tag(Tag.CUSTOM_INSTALL, node.lineno, f"class {node.name}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._scan.check_module(alias.name, alias, self._flagged_modules)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._scan.check_module(node.module, node, self._flagged_modules)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                for i in range(len(node.module.split(".")) + 1, len(full.split(".")) + 1):
                    prefix = ".".join(full.split(".")[:i])
                    module_rule = MODULE_RULES.get(prefix)
                    if module_rule is not None and prefix not in self._flagged_modules:
                        self._flagged_modules.add(prefix)
                        self._scan._emit_module(module_rule, prefix, alias)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in INTROSPECTION_NAMES:
            self._scan.emit_at("CPL-INTRO-001", node.id, node)
        elif isinstance(node.ctx, ast.Load) and id(node) not in self._handled:
            # Straight to the per-name cache: Names are the commonest node.
            self._report_reference(node, self._resolve_name(node.id, 0))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTROSPECTION_ATTRIBUTES:
            self._scan.emit_at("CPL-INTRO-001", node.attr, node)
        mitigation = _MITIGATION_ATTRIBUTES.get(node.attr)
        if mitigation is not None:
            self._scan.mitigation(mitigation, f".{node.attr}", node)
        if isinstance(node.ctx, ast.Load) and id(node) not in self._handled:
            self._report_reference(node, self.resolve(node))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if id(node) not in self._handled:
            for base in self.resolve(node.value):
                if base in ENVIRON_MAPPINGS:
                    self._handled.add(id(node.value))
                    self._emit_env(node, base + "[{}]", _fold_str(node.slice))
                    break
            else:
                if isinstance(node.ctx, ast.Load):
                    self._report_reference(node, self.resolve(node))

    def visit_Compare(self, node: ast.Compare) -> None:
        # "TOKEN" in os.environ
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            container = node.comparators[0]
            for base in self.resolve(container):
                if base in ENVIRON_MAPPINGS:
                    self._handled.add(id(container))
                    self._emit_env(node, "{} in " + base, _fold_str(node.left))
                    break

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_store(target, target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store(node.target, node.target)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_store(target, target)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        text: str | None = None
        if isinstance(value, str):
            text = value
        elif isinstance(value, bytes):
            text = value.decode("latin-1")
        if text is not None:
            scan = self._scan
            # Every string, not only in files whose text matched: implicitly
            # concatenated literals and escapes hide a marker from the text.
            if len(text) >= 5:
                scan.strings.append((text, getattr(node, "lineno", 0), node.col_offset))
            if (
                len(text) >= _ENTROPY_MIN_LENGTH
                and not _is_blob(text)
                and _entropy(text) > _ENTROPY_BITS
            ):
                scan.emit_at("CPL-OBF-004", f"string of {len(text)} characters", node)
            if scan.mode is ScanMode.PLUGIN and text[:8].lower().startswith(_URL_PREFIXES):
                host = _url_host(text)
                if host:
                    scan.emit_at(
                        "CPL-NET-003",
                        _shorten(text),
                        node,
                        covered=scan.grants.covers_host(host),
                        capability=f"net.http:{text.split(':', 1)[0].lower()}://{host}",
                    )
            if _is_blob(text):
                self._scan.emit_at("CPL-OBF-001", f"string of {len(text)} characters", node)
            if _sensitive_path(text):
                self._scan.emit_at(
                    "CPL-FS-004",
                    _shorten(text),
                    node,
                    covered=self._scan.grants.covers_path(text),
                )
            elif scan.mode is ScanMode.PLUGIN and _ABSOLUTE_PATH.fullmatch(text):
                self._scan.emit_at(
                    "CPL-FS-005",
                    _shorten(text),
                    node,
                    covered=self._scan.grants.covers_path(text),
                )

    def _payload(self, arg: ast.AST) -> tuple[str, str] | None:
        """Whether ``arg`` (exec's argument) carries decoded or downloaded data.

        Returns ``("decoded" | "downloaded", spelling)`` or ``None``. Looks
        through the expression and, one assignment at a time, through the
        values the names in it were bound to (``code = b64decode(x);
        exec(code)``), within a node budget so crafted code cannot make it
        slow.
        """
        stack: list[ast.AST] = [arg]
        seen_names: set[str] = set()
        budget = _PAYLOAD_BUDGET
        while stack and budget > 0:
            node = stack.pop()
            budget -= 1
            if isinstance(node, ast.Call):
                found = self._payload_call(node)
                if found is not None:
                    return found
            elif isinstance(node, ast.Name) and node.id not in seen_names:
                seen_names.add(node.id)
                stack.extend(self._b.assigned.get(node.id, ())[:8])
            stack.extend(ast.iter_child_nodes(node))
        return None

    def _payload_call(self, node: ast.Call) -> tuple[str, str] | None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "join" and node.args:
            # "".join(chr(c) for c in ...) / "".join(map(chr, ...)): text
            # rebuilt from code points is decoded data, a lone chr() is not.
            arg = node.args[0]
            if (
                isinstance(arg, ast.GeneratorExp | ast.ListComp)
                and isinstance(arg.elt, ast.Call)
                and not CHR_FUNCTIONS.isdisjoint(self.resolve(arg.elt.func))
            ):
                return ("decoded", "join(chr(...))")
            if (
                isinstance(arg, ast.Call)
                and arg.args
                and "builtins.map" in self.resolve(arg.func)
                and not CHR_FUNCTIONS.isdisjoint(self.resolve(arg.args[0]))
            ):
                return ("decoded", "join(map(chr, ...))")
        if isinstance(func, ast.Attribute):
            if func.attr in _DECODER_METHODS:
                return ("decoded", f".{func.attr}()")
            if func.attr in {"decode", "encode"} and node.args:
                codec = _fold_str(node.args[-1])
                if codec is not None and codec.lower() in _DECODING_CODECS:
                    return ("decoded", f".{func.attr}({codec!r})")
        for name in self.resolve(func):
            if name in _DECODERS:
                return ("decoded", name.removeprefix("builtins."))
            if name.startswith(_NETWORK_MODULES):
                return ("downloaded", name)
        return None

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        elt = node.elt
        if isinstance(elt, ast.Call) and not CHR_FUNCTIONS.isdisjoint(self.resolve(elt.func)):
            self._scan.emit_at("CPL-OBF-002", "chr() in a comprehension", node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._visit_comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._visit_comprehension(node)

    def visit_Call(self, node: ast.Call) -> None:
        funcs = self.resolve(node.func)
        self._call_rules(node, funcs)
        if id(node) not in self._handled:
            # getattr(os, "system") and __import__("socket") are references too.
            self._report_reference(node, self.resolve(node))

    def _process_threats(self, node: ast.Call, api: str, command: ast.expr) -> None:
        """A process call running a decoded or downloaded command, or a dropped program."""
        scan = self._scan
        payload = self._payload(command)
        if payload is not None:
            how, spelling = payload
            rule_id = "CPL-THR-001" if how == "decoded" else "CPL-THR-002"
            scan.emit_at(rule_id, f"{api}({spelling} ...)", node)
        line = getattr(node, "lineno", 0)
        first: ast.AST = command
        if isinstance(command, ast.List | ast.Tuple) and command.elts:
            first = command.elts[0]
        if "sys.executable" in self.resolve(first):
            scan.tag(Tag.PYTHON_RUN, line, "sys.executable")
        for value in self._values(first):
            text = _fold_str(value)
            words = text.split() if text else []
            if not text or not words:
                continue
            word = PurePosixPath(words[0]).name.lower()
            if _launches_payload(words[0]):
                scan.tag(Tag.LAUNCH, line, words[0])
            if word.startswith("python"):
                scan.tag(Tag.PYTHON_RUN, line, word)
            if word in _SHELLS or word in _INSTALL_TIME_PROGRAMS:
                scan.tag(Tag.SHELL, line, word)

    def _values(self, node: ast.AST) -> list[ast.AST]:
        """``node`` and, for a name, the values it was bound to (one hop)."""
        if isinstance(node, ast.Name):
            return [node, *self._b.assigned.get(node.id, ())[:8]]
        return [node]

    def _fixed_endpoint(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """A network call whose URL is written into the code (a fixed endpoint)."""
        if not any(f.startswith(_NETWORK_MODULES) for f in funcs):
            return
        arg = node.args[0] if node.args else None
        for kw in node.keywords:
            if kw.arg == "url":
                arg = kw.value
        if arg is None:
            return
        for value in self._values(arg):
            prefix = _literal_prefix(value)
            if prefix is not None and prefix.startswith(_URL_PREFIXES):
                host = _url_host(prefix) or ""
                if host and host not in {"localhost", "127.0.0.1", "::1"}:
                    self._scan.tag(Tag.FIXED_ENDPOINT, getattr(node, "lineno", 0), prefix[:80])
                    return

    def _joined_path(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """``os.path.join(home, ".aws", "credentials")``: indicators see the joined path."""
        if _PATH_BUILDERS.isdisjoint(funcs):
            return
        parts = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if len(parts) >= 2:
            self._scan.indicators("/".join(parts), getattr(node, "lineno", 0), node.col_offset)

    def _environ_dump(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """Tag the whole environment passed to a serialiser or a sender."""
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else ""
        if not (
            method in _SENDING_METHODS
            or not _SERIALISERS.isdisjoint(funcs)
            or any(f.startswith(_NETWORK_MODULES) for f in funcs)
        ):
            return
        for arg in (*node.args, *(k.value for k in node.keywords)):
            whole = self._whole_environ(arg)
            if whole is not None:
                self._scan.tag(Tag.ENV_DUMP, getattr(node, "lineno", 0), whole)
                return

    def _whole_environ(self, arg: ast.AST) -> str | None:
        """``os.environ`` itself somewhere in ``arg`` (not one key of it)."""
        stack = [arg]
        budget = _PAYLOAD_BUDGET
        while stack and budget > 0:
            node = stack.pop()
            budget -= 1
            if isinstance(node, ast.Subscript):
                stack.append(node.slice)  # os.environ["HOME"] is one key
                continue
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ENV_METHODS
            ):
                stack.extend(node.args)  # os.environ.get("HOME") too
                continue
            if isinstance(node, ast.Name | ast.Attribute):
                for name in self.resolve(node):
                    if name in ENVIRON_MAPPINGS:
                        return name
            stack.extend(ast.iter_child_nodes(node))
        return None

    def _call_rules(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        scan = self._scan
        func_id = id(node.func)
        if node.args or node.keywords:
            self._environ_dump(node, funcs)
            self._fixed_endpoint(node, funcs)
            self._joined_path(node, funcs)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _ENV_ITERATORS
            and not ENVIRON_MAPPINGS.isdisjoint(self.resolve(func.value))
        ):
            self._scan.tag(Tag.ENV_ITER, getattr(node, "lineno", 0), f"os.environ.{func.attr}()")
        if node.args and not _EXECUTORS.isdisjoint(funcs):
            payload = self._payload(node.args[0])
            if payload is not None:
                how, api = payload
                executor = next(f for f in funcs if f in _EXECUTORS).removeprefix("builtins.")
                rule_id = "CPL-THR-001" if how == "decoded" else "CPL-THR-002"
                scan.emit_at(rule_id, f"{executor}({api} ...)", node)
        for name in funcs:
            if API_RULES.get(name) == "CPL-PROC-001":
                spec = PROGRAM_ARGUMENTS.get(name)
                command = _argument(node, spec) if spec is not None else None
                program = _program(command)
                self._handled.add(func_id)
                self._emit_api("CPL-PROC-001", name, node, program)
                if command is not None:
                    self._process_threats(node, name, command)
            elif name in OPEN_FUNCTIONS:
                self._handled.add(func_id)
                self._emit_open(node, name, OPEN_FUNCTIONS[name])
            elif name in ENV_FUNCTIONS:
                self._handled.add(func_id)
                key = _argument(node, ArgumentSpec(0, "key"))
                self._emit_env(node, name + "({})", _fold_str(key))
            elif name in DYNAMIC_IMPORTERS and node.args:
                module = _fold_str(node.args[0])
                if module is not None:
                    scan.check_module(module, node, self._flagged_modules)
                    if not isinstance(node.args[0], ast.Constant) and _hides_name(module):
                        api = f"{name.removeprefix('builtins.')}({module!r} built from pieces)"
                        scan.emit_at("CPL-THR-003", api, node)
            elif name in {"builtins.getattr", "builtins.setattr", "builtins.delattr"}:
                self._attribute_call(node, name)
            elif (
                name == "builtins.map"
                and node.args
                and not CHR_FUNCTIONS.isdisjoint(self.resolve(node.args[0]))
            ):
                scan.emit_at("CPL-OBF-002", "map(chr, ...)", node)
        func = node.func
        if not isinstance(func, ast.Attribute) or func_id in self._handled:
            return
        # Methods on receivers the scanner cannot type.
        owners = self.resolve(func.value)
        if func.attr in ENV_METHODS and not ENVIRON_MAPPINGS.isdisjoint(owners):
            self._handled.add(id(func.value))
            key = node.args[0] if node.args else None
            mapping = next(o for o in owners if o in ENVIRON_MAPPINGS)
            self._emit_env(node, f"{mapping}.{func.attr}({{}})", _fold_str(key))
        elif func.attr in MUTATING_METHODS and not _MUTABLE_STATE.isdisjoint(owners):
            state = next(o for o in owners if o in _MUTABLE_STATE)
            scan.emit_at("CPL-GLOB-001", f"{state}.{func.attr}", node)
        elif any(f"{o}.{func.attr}" in API_RULES for o in owners):
            return  # a known API (os.mkdir): the reference rule reports it
        elif func.attr in FS_WRITE_METHODS:
            scan.emit_at("CPL-FS-003", f".{func.attr}()", node, covered=scan.grants.writes_files)
        elif func.attr in FS_READ_METHODS:
            covered = scan.grants.reads_files
            scan.emit_at("CPL-FS-002", f".{func.attr}()", node, covered=covered)
        elif func.attr == "open" and not any(o in OPEN_FUNCTIONS for o in self.resolve(func)):
            # Path(...).open("w"): pathlib takes the mode first. Only a literal
            # write mode counts; reads are everywhere and not worth a finding.
            mode = _fold_str(_argument(node, ArgumentSpec(0, "mode")))
            if mode is not None and any(c in mode for c in "wax+"):
                scan.emit_at("CPL-FS-001", ".open(...)", node, covered=scan.grants.writes_files)

    def _attribute_call(self, node: ast.Call, name: str) -> None:
        """getattr/setattr/delattr with a constant attribute name."""
        if len(node.args) < 2:
            return
        attr = _fold_str(node.args[1])
        if attr is not None and attr in INTROSPECTION_ATTRIBUTES:
            self._scan.emit_at("CPL-INTRO-001", attr, node)
        if name == "builtins.getattr":
            owners = self.resolve(node.args[0])
            target = node.args[0]
            builtin_owner = not _BUILTIN_OWNERS.isdisjoint(owners) or (
                isinstance(target, ast.Name | ast.Attribute)
                and (target.id if isinstance(target, ast.Name) else target.attr) == "__builtins__"
            )
            verb = "getattr"
            # getattr(builtins, name) with a variable is what pydoc, inspect
            # and subprocess do; a name decoded from literal data inline is
            # what droppers do.
            if attr is None and builtin_owner and self._payload(node.args[1]) is not None:
                self._scan.emit_at("CPL-THR-003", f"{verb}(builtins, <decoded name>)", node)
            elif (
                attr is not None
                and not isinstance(node.args[1], ast.Constant)
                and (builtin_owner or any(f"{o}.{attr}" in API_RULES for o in owners))
            ):
                self._scan.emit_at("CPL-THR-003", f"{verb}(..., {attr!r} built from pieces)", node)
        if name != "builtins.getattr":
            owner = self._mutable_owner(node.args[0], attr)
            if owner is not None:
                verb = name.removeprefix("builtins.")
                self._scan.emit_at("CPL-GLOB-001", f"{verb}({owner}, {attr!r})", node)


# -- single files -------------------------------------------------------------------------


#: Files always parsed, even in package mode: they run at install or start-up.
_ALWAYS_PARSED = frozenset({"setup.py", "sitecustomize.py", "usercustomize.py", "conftest.py"})


def _scan_text(
    text: str,
    file: str,
    *,
    grants: _Grants,
    local_modules: Collection[str],
    max_depth: int,
    max_nodes: int,
    mode: ScanMode = ScanMode.PLUGIN,
) -> tuple[list[Finding], bool]:
    """Findings of one decoded file, and whether the AST pass ran."""
    focus: frozenset[int] | None = None
    if mode is ScanMode.PACKAGE and file.rsplit("/", 1)[-1] not in _ALWAYS_PARSED:
        need = prefilter().check(text)
        if need is Need.NOTHING:
            # The common case on real packages: only the two text rules
            # apply, and both have a C-speed exit before any per-line work.
            if _no_text_findings(text):
                return [], False
            scan = _FileScan(file, text, grants, local_modules, mode)
            scan.long_lines()
            scan.bidi()
            return scan.findings, False
        if not isinstance(need, Need):
            focus = need
    scan = _FileScan(file, text, grants, local_modules, mode)
    scan.long_lines()
    scan.bidi()
    tree: ast.AST | None = None
    try:
        with warnings.catch_warnings():
            # Invalid escapes ("\d") warn while parsing; the scanned file's
            # style is not our concern, and warnings must not escape into the
            # host (tests run with filterwarnings=error).
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=file)
    except SyntaxError as exc:
        line = exc.lineno or _nul_line(text)
        scan.emit("CPL-SCAN-003", f"SyntaxError: {exc.msg}", line, None)
    except UnicodeEncodeError as exc:  # lone surrogates in an in-memory str
        line = text.count("\n", 0, exc.start) + 1
        scan.emit("CPL-SCAN-003", f"UnicodeEncodeError: {exc.reason}", line, None)
    except ValueError as exc:  # NUL bytes on some Python versions
        scan.emit("CPL-SCAN-003", f"ValueError: {exc}", _nul_line(text), None)
    except (RecursionError, MemoryError) as exc:
        scan.emit("CPL-SCAN-002", f"{type(exc).__name__} while parsing", 1, None)
    if tree is None:
        scan.blob_runs()
        scan.text_indicators()
        scan.correlate()
        return scan.findings, True
    if focus is None:
        survey = _survey(tree, max_depth, max_nodes)
    else:
        roots, bindings = _focus(tree, focus)
        survey = _survey(tree, max_depth, max_nodes, roots, bindings)
    if isinstance(survey, _TooComplex):
        scan.emit("CPL-SCAN-002", survey.reason, survey.line, None)
        scan.blob_runs()
        scan.text_indicators()
        scan.correlate()
        return scan.findings, True
    _RuleVisitor(scan, survey.bindings).run(survey.nodes)
    scan.correlate()
    return scan.findings, True


def _no_text_findings(text: str) -> bool:
    """True when neither a long line nor a bidi control can be in ``text``."""
    if not text.isascii() and any(c in text for c in BIDI_CONTROLS):
        return False
    return len(text) <= LONG_LINE or max(map(len, text.split("\n"))) <= LONG_LINE


def _focus(tree: ast.AST, lines: frozenset[int]) -> tuple[list[ast.AST], _Bindings]:
    """The statements of ``tree`` to visit when only ``lines`` can hold a threat.

    Every module-level binding (imports, assignments, definitions) is
    collected so names resolve; imports are visited (their findings feed
    the chains); other statements only when their span holds one of
    ``lines``, descending one level into classes so one method with an
    ``exec`` does not cost the whole class.
    """
    bindings = _Bindings({}, {}, set(), [])
    roots: list[ast.AST] = []
    body = getattr(tree, "body", [])
    for stmt in body:
        if isinstance(stmt, _BINDING_NODES):
            _bind(stmt, bindings)
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            roots.append(stmt)
            continue
        if not _spans(stmt, lines):
            continue
        if isinstance(stmt, ast.ClassDef):
            roots.extend(stmt.decorator_list)
            roots.extend(stmt.bases)
            for member in stmt.body:
                if isinstance(member, _BINDING_NODES):
                    _bind(member, bindings)
                if _spans(member, lines):
                    roots.append(member)
        else:
            roots.append(stmt)
    return roots, bindings


def _spans(stmt: ast.stmt, lines: frozenset[int]) -> bool:
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
    last = stmt.end_lineno or stmt.lineno
    return any(first <= line <= last for line in lines)


def _nul_line(text: str) -> int:
    index = text.find("\0")
    return text.count("\n", 0, index) + 1 if index >= 0 else 0


def _finish(findings: list[Finding]) -> list[Finding]:
    """Deduplicate on (rule, file, line, column), keeping the most severe; sort."""
    best: dict[tuple[str, str, int, int], Finding] = {}
    for f in findings:
        key = (f.rule_id, f.file, f.line, f.column)
        kept = best.get(key)
        if kept is None or f.severity.rank < kept.severity.rank:
            best[key] = f
    return sorted(best.values(), key=Finding.sort_key)


def _check_limits(**limits: int) -> None:
    for name, value in limits.items():
        if value < 1:
            raise ScanError(f"scanner limit {name} must be a positive integer, got {value}")


def scan_source(
    source: str,
    filename: str,
    capabilities: Sequence[Capability] = (),
    *,
    local_modules: Collection[str] = (),
    mode: ScanMode = ScanMode.PLUGIN,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[Finding]:
    """Findings for one in-memory Python file, sorted by :meth:`Finding.sort_key`.

    ``filename`` is used as the findings' ``file``; ``local_modules`` are the
    plugin's own top-level module names (not third-party imports).
    """
    self_check()  # refuse to scan with a rule engine that misses its canaries
    _check_limits(max_depth=max_depth, max_nodes=max_nodes)
    grants = _Grants.of(capabilities)
    findings, _ = _scan_text(
        source,
        filename,
        grants=grants,
        local_modules=local_modules,
        max_depth=max_depth,
        max_nodes=max_nodes,
        mode=mode,
    )
    return _finish(findings)


# -- trees --------------------------------------------------------------------------------


class _EntryKind(enum.Enum):
    """What the walk found at a path."""

    FILE = "file"
    #: A symlink, FIFO, socket or device: reported, never opened.
    OTHER = "other"
    UNREADABLE_DIR = "unreadable-dir"


@dataclass(frozen=True, slots=True)
class _Entry:
    """One directory entry found by the walk (``relative`` is POSIX, from the root)."""

    path: str
    relative: str
    kind: _EntryKind
    detail: str = ""


def _walk(root: Path) -> Iterator[_Entry]:
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
            yield _Entry(
                directory, prefix.rstrip("/"), _EntryKind.UNREADABLE_DIR, exc.strerror or ""
            )
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            relative = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIPPED_DIRS:
                    subdirs.append((entry.path, relative + "/"))
            elif entry.is_file(follow_symlinks=False):
                yield _Entry(entry.path, relative, _EntryKind.FILE)
            else:
                yield _Entry(entry.path, relative, _EntryKind.OTHER)
        stack.extend(reversed(subdirs))


def _read_source(path: str, max_bytes: int) -> bytes | int | OSError:
    """The file's bytes, its size when over ``max_bytes``, or the error.

    Opened with O_NOFOLLOW and O_NONBLOCK and checked with fstat, so a file
    swapped for a symlink or a FIFO after the walk is neither followed nor
    waited on (open(2)).
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return exc
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return OSError(0, "not a regular file")
            if info.st_size > max_bytes:
                return info.st_size
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            return exc
    return len(data) if len(data) > max_bytes else data


def _decode(data: bytes) -> tuple[str, str | None, int]:
    """Decoded text (lossy on error), the decoding problem if any, and its line.

    The encoding comes from the PEP 263 cookie or BOM, as for an import.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return data.decode("utf-8", "replace"), f"SyntaxError: {exc}", 1
    try:
        return data.decode(encoding), None, 0
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        reason = f"UnicodeDecodeError: byte {data[exc.start]:#04x} is not valid {encoding}"
        return data.decode(encoding, "replace"), reason, line
    except LookupError as exc:  # a cookie naming no codec detect_encoding knows of
        return data.decode("utf-8", "replace"), f"LookupError: {exc}", 1


def _file_name_findings(relative: str, mode: ScanMode = ScanMode.PLUGIN) -> list[Finding]:
    """Rules about a file's name alone: install hooks, native code, bytecode.

    None of them can be covered by a capability, so no grants are needed.
    """
    name = relative.rsplit("/", 1)[-1]
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
    return [
        f for r in rule_ids if r is not None for f in _file_finding(relative, r, relative, mode)
    ]


def scan_tree(
    root: Path,
    capabilities: Sequence[Capability] = (),
    *,
    mode: ScanMode = ScanMode.PLUGIN,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
    progress: Callable[[int, int], None] | None = None,
) -> ScanReport:
    """Scan every ``*.py`` file under ``root`` (a directory, or one file).

    All file names are checked for native libraries, bytecode and install
    hooks; ``__pycache__`` and VCS folders are skipped; symlinks and special
    files are reported, never followed. Limits turn pathological files into
    WARNING findings instead of hangs or crashes. ``mode`` decides what is
    danger (:class:`ScanMode`); ``capabilities`` are the plugin's declared
    ones (plugin mode). ``progress(done, total)`` is called after each entry.
    Raises :class:`ScanError` only when ``root`` itself cannot be scanned,
    or when the scanner's self-check fails.
    """
    self_check()  # refuse to scan with a rule engine that misses its canaries
    _check_limits(max_file_bytes=max_file_bytes, max_depth=max_depth, max_nodes=max_nodes)
    try:
        root_is_dir = root.is_dir()
        root_is_file = not root_is_dir and root.is_file()
    except OSError as exc:
        raise ScanError(f"cannot scan {root}: {exc.strerror}; check the path") from exc
    if root_is_dir:
        try:
            entries = list(_walk(root))
        except OSError as exc:
            raise ScanError(
                f"cannot scan {root}: {exc.strerror}; make the directory readable"
            ) from exc
    elif root_is_file:
        if detect_format(root) is not None:
            return _scan_archive(
                root, capabilities, mode, _Limits(max_file_bytes, max_depth, max_nodes), progress
            )
        entries = [_Entry(os.fspath(root), root.name, _EntryKind.FILE)]
    else:
        raise ScanError(
            f"cannot scan {root}: no such file or directory; "
            "pass a plugin directory, a Python file, an sdist or a wheel"
        )
    collector = _Collector(
        capabilities,
        mode,
        _Limits(max_file_bytes, max_depth, max_nodes),
        _local_modules(e.relative for e in entries),
    )
    total = len(entries)
    for done, entry in enumerate(entries, start=1):
        kind = entry.kind
        if kind is _EntryKind.UNREADABLE_DIR:
            collector.file_problem(entry.relative, "CPL-SCAN-004", f"directory: {entry.detail}")
        elif kind is _EntryKind.OTHER:
            collector.findings.extend(_file_name_findings(entry.relative, mode))
            collector.file_problem(entry.relative, "CPL-SCAN-005", entry.relative)
        elif kind is _EntryKind.FILE:
            if _wanted(entry.relative):
                collector.add(entry.relative, _read_source(entry.path, max_file_bytes))
            else:
                collector.findings.extend(_file_name_findings(entry.relative, mode))
        else:
            assert_never(kind)
        if progress is not None:
            progress(done, total)
    return collector.report(root.as_posix())


#: Archive problems -> the rule that reports them.
_ARCHIVE_RULES: dict[ArchiveProblemKind, str] = {
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


def _scan_archive(
    root: Path,
    capabilities: Sequence[Capability],
    mode: ScanMode,
    limits: _Limits,
    progress: Callable[[int, int], None] | None,
) -> ScanReport:
    """Scan an sdist or wheel member by member, in memory (nothing is extracted).

    In package mode members stream through one at a time (the local-module
    list only matters for the supply-chain rule, which package mode does not
    report); a plugin shipped as an archive is listed first so its own
    modules are known.
    """
    items: Iterable[ArchiveMember | ArchiveProblem] = iter_archive(root)
    local: frozenset[str] = frozenset()
    total = 0
    if mode is ScanMode.PLUGIN:
        listed = list(items)
        items, total = listed, len(listed)
        local = _local_modules(i.relative for i in listed if isinstance(i, ArchiveMember))
    collector = _Collector(capabilities, mode, limits, local)
    for done, item in enumerate(items, start=1):
        if isinstance(item, ArchiveMember):
            if not _wanted(item.relative):
                collector.findings.extend(_file_name_findings(item.relative, mode))
            elif len(item.data) > limits.max_file_bytes:
                collector.add(item.relative, len(item.data))
            else:
                collector.add(item.relative, item.data)
        else:
            where = item.relative or root.name
            api = f"{where} ({item.kind.rationale}{': ' + item.detail if item.detail else ''})"
            collector.file_problem(item.relative, _ARCHIVE_RULES[item.kind], api)
        if progress is not None:
            progress(done, max(total, done))
    return collector.report(root.as_posix())


def _local_modules(relatives: Iterable[str]) -> frozenset[str]:
    """Top-level module names of the scanned tree itself (not third-party imports)."""
    return frozenset(
        r.split("/", 1)[0].removesuffix(".py") for r in relatives if "/" in r or r.endswith(".py")
    )


def _wanted(relative: str) -> bool:
    """Files whose *content* is scanned: Python sources and .pth files."""
    return relative.endswith((".py", ".pth"))


@dataclass(frozen=True, slots=True)
class _Limits:
    max_file_bytes: int
    max_depth: int
    max_nodes: int


class _Collector:
    """Findings and counters of one scan, whatever the files come from."""

    def __init__(
        self,
        capabilities: Sequence[Capability],
        mode: ScanMode,
        limits: _Limits,
        local_modules: frozenset[str],
    ) -> None:
        self.capabilities = tuple(capabilities)
        self.grants = _Grants.of(capabilities)
        self.mode = mode
        self.limits = limits
        self.local_modules = local_modules
        self.findings: list[Finding] = []
        self.files_scanned = 0
        self.files_parsed = 0
        self.bytes_scanned = 0

    def file_problem(self, relative: str, rule_id: str, api: str) -> None:
        self.findings.extend(_file_finding(relative, rule_id, api, self.mode))

    def add(self, relative: str, data: bytes | int | OSError) -> None:
        """Scan one file's content (or record why it could not be read)."""
        self.findings.extend(_file_name_findings(relative, self.mode))
        if isinstance(data, OSError):
            if data.errno in {0, errno.ELOOP}:  # swapped for a link or FIFO since the walk
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
        text, problem, line = _decode(data)
        if problem is None:
            findings, parsed = _scan_text(
                text,
                relative,
                grants=self.grants,
                local_modules=self.local_modules,
                max_depth=self.limits.max_depth,
                max_nodes=self.limits.max_nodes,
                mode=self.mode,
            )
            self.files_parsed += parsed
            self.findings.extend(findings)
            return
        # Undecodable: no AST, but the text rules still look at what there is.
        scan = _FileScan(relative, text, self.grants, self.local_modules, self.mode)
        scan.emit("CPL-SCAN-003", problem, line, None)
        scan.long_lines()
        scan.bidi()
        scan.blob_runs()
        scan.text_indicators()
        scan.correlate()
        self.findings.extend(scan.findings)

    def report(self, root: str) -> ScanReport:
        if self.mode is ScanMode.PLUGIN:
            self.findings.extend(_unused_capabilities(self.capabilities, self.findings))
        return ScanReport(
            root=root,
            findings=tuple(_finish(self.findings)),
            files_scanned=self.files_scanned,
            bytes_scanned=self.bytes_scanned,
            mode=self.mode,
            files_parsed=self.files_parsed,
        )


def _file_finding(
    relative: str, rule_id: str, api: str, mode: ScanMode = ScanMode.PLUGIN
) -> list[Finding]:
    """A finding about a whole file (no line): unreadable, too large, not regular."""
    scan = _FileScan(relative, "", _NO_GRANTS, (), mode)
    scan.emit(rule_id, api, 0, None)
    return scan.findings


#: Rules whose findings on a .pth import line make it a threat (CPL-THR-013).
_PTH_PAYLOAD_FAMILIES = frozenset(
    {RuleFamily.PROCESS, RuleFamily.NETWORK, RuleFamily.NATIVE, RuleFamily.OBFUSCATION}
)
_PTH_PAYLOAD_RULES = frozenset({"CPL-DYN-001", "CPL-DYN-003", "CPL-DYN-004"})


def _pth_findings(relative: str, data: bytes, mode: ScanMode) -> list[Finding]:
    """A .pth file's ``import`` lines run at every interpreter start (site(7)).

    Each such line is scanned as the Python it is; one that executes code,
    starts processes, reaches the network or carries obfuscation or a threat
    makes the file a threat. Plain path lines are data.
    """
    text = data.decode("utf-8", "replace")
    findings: list[Finding] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(("import ", "import\t")):
            continue
        hits, _ = _scan_text(
            line, relative, grants=_NO_GRANTS, local_modules=(), max_depth=50, max_nodes=5000
        )
        if any(
            rule(f.rule_id).kind is RuleKind.THREAT
            or rule(f.rule_id).family in _PTH_PAYLOAD_FAMILIES
            or f.rule_id in _PTH_PAYLOAD_RULES
            for f in hits
        ):
            scan = _FileScan(relative, text, _NO_GRANTS, (), mode)
            scan.emit("CPL-THR-013", f"{relative} line {number}", number, 0)
            findings.extend(scan.findings)
            findings.extend(
                dataclasses.replace(f, line=number)
                for f in hits
                if rule(f.rule_id).kind is RuleKind.THREAT
            )
            break
    return findings


def _unused_capabilities(
    capabilities: Sequence[Capability], findings: Sequence[Finding]
) -> list[Finding]:
    """Declared capabilities no finding shows in use (over-broad manifest), as info.

    Evidence of use is a covered finding naming the capability or its kind;
    capabilities the scanner cannot see used (net.http, host.call and app go
    through ``ctx`` with values from anywhere; templated values) are never
    reported.
    """
    used_kinds = {f.capability.split(":", 1)[0] for f in findings if f.covered and f.capability}
    used_exact = {f.capability for f in findings if f.covered and f.capability}
    unused: list[Finding] = []
    for cap in capabilities:
        if cap.templated or isinstance(cap, HostCallCapability | AppCapability):
            continue
        if isinstance(cap, EnvReadCapability | ProcExecCapability):
            seen = str(cap) in used_exact or (
                isinstance(cap, ProcExecCapability) and cap.kind.value in used_kinds
            )
        elif isinstance(cap, FsCapability):
            seen = bool(used_kinds & {"fs.read", "fs.write"})
        elif isinstance(cap, NetHttpCapability):
            # ctx.http.fetch(url) takes URLs from anywhere (config, arguments):
            # a URL literal naming the host is evidence, its absence is not
            seen = True
        else:
            assert_never(cap)
        if not seen:
            unused.extend(_file_finding("", "CPL-MAN-001", str(cap)))
    return unused
