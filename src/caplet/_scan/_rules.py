"""The static scanner's rule table: what each rule means, how bad it is, what covers it.

Rules are data, not code paths (design.md section 6): a :class:`Rule` says
which family a finding belongs to, its severity with and without a covering
capability, and the message and fix shown to the approver. The lookup tables
below map the *spellings* the scanner recognises (fully qualified names such
as ``subprocess.run``, module names, attribute names, file names) to rule ids,
so that growing the scanner later means adding rows here, not branches in
:mod:`caplet._scan._scanner`.

Builtins are spelled ``builtins.<name>``: the scanner resolves a bare ``eval``
that no import shadows to ``builtins.eval``, so ``import builtins;
builtins.eval`` and ``builtins.__dict__["eval"]`` hit the same row.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from caplet._capabilities._model import CapabilityKind
from caplet._findings import Severity

__all__ = [
    "API_RULES",
    "BLOB_MIN_DISTINCT",
    "BLOB_MIN_LENGTH",
    "CHR_FUNCTIONS",
    "DYNAMIC_IMPORTERS",
    "ENVIRON_MAPPINGS",
    "ENV_FUNCTIONS",
    "ENV_METHODS",
    "FILE_NAME_RULES",
    "FILE_SUFFIX_RULES",
    "FS_READ_METHODS",
    "FS_WRITE_METHODS",
    "IMPORT_STATE",
    "INTROSPECTION_ATTRIBUTES",
    "INTROSPECTION_NAMES",
    "LONG_LINE",
    "MODULE_RULES",
    "MUTATING_METHODS",
    "OPEN_FUNCTIONS",
    "OS_OPEN_WRITE_FLAGS",
    "PROGRAM_ARGUMENTS",
    "RULES",
    "SENSITIVE_PATH_MARKERS",
    "SENSITIVE_PATH_PREFIXES",
    "ArgumentSpec",
    "Rule",
    "RuleFamily",
    "rule",
]


class RuleFamily(enum.Enum):
    """What kind of behaviour a rule detects (design.md section 6)."""

    PROCESS = "process"
    DYNAMIC_CODE = "dynamic-code"
    NATIVE = "native"
    INTROSPECTION = "introspection"
    GLOBAL_MUTATION = "global-mutation"
    NETWORK = "network"
    FILESYSTEM = "filesystem"
    ENVIRONMENT = "environment"
    OBFUSCATION = "obfuscation"
    INSTALL_HOOK = "install-hook"
    SUPPLY_CHAIN = "supply-chain"
    #: Findings about the scan itself: a file too large, too deep, unparsable.
    SCANNER = "scanner"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of the static scanner.

    ``message`` is a template with one ``{api}`` placeholder (the spelling
    found, e.g. ``subprocess.run``); ``hint`` is the fix, appended when the
    finding is not covered. ``covered_by`` is the capability kind that can
    cover the behaviour, and ``covered_severity`` the severity it then has;
    both are ``None`` when nothing can cover it (raw sockets: all network
    goes through the broker, so no capability makes a socket acceptable).
    """

    rule_id: str
    family: RuleFamily
    severity: Severity
    covered_severity: Severity | None
    covered_by: CapabilityKind | None
    message: str
    hint: str


@dataclass(frozen=True, slots=True)
class ArgumentSpec:
    """Where a call takes the value the scanner wants (program, mode, key).

    ``index`` is the positional index, ``keyword`` the keyword name (``None``
    when the parameter is positional-only).
    """

    index: int
    keyword: str | None


_D, _W, _I = Severity.DANGER, Severity.WARNING, Severity.INFO
_K = CapabilityKind


def _rules(*rules: Rule) -> Mapping[str, Rule]:
    return MappingProxyType({r.rule_id: r for r in rules})


#: Every rule, by id.
RULES: Final[Mapping[str, Rule]] = _rules(
    # -- process execution ---------------------------------------------------
    Rule(
        "CPL-PROC-001",
        RuleFamily.PROCESS,
        _D,
        _W,
        _K.PROC_EXEC,
        "{api} executes a program",
        "declare proc.exec:<program> for the one program it runs, or remove the call",
    ),
    Rule(
        "CPL-PROC-002",
        RuleFamily.PROCESS,
        _W,
        _I,
        _K.PROC_EXEC,
        "import of {api}, a process execution module",
        "declare proc.exec:<program> if the plugin runs a program, or remove the import",
    ),
    # -- dynamic code ----------------------------------------------------------
    Rule(
        "CPL-DYN-001",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} runs code built at run time",
        "no capability allows this: call the code directly instead",
    ),
    Rule(
        "CPL-DYN-002",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} imports or runs a module chosen at run time",
        "no capability allows this: use a plain import statement",
    ),
    Rule(
        "CPL-DYN-003",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} deserialises data that can run code",
        "no capability allows this: use json (or msgpack) for data",
    ),
    Rule(
        "CPL-DYN-004",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} builds code or function objects by hand",
        "no capability allows this: write the function in source",
    ),
    # -- native code -------------------------------------------------------------
    Rule(
        "CPL-NAT-001",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "import of {api}, a foreign function interface (native code)",
        "no capability allows native code: remove the import",
    ),
    Rule(
        "CPL-NAT-002",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "native library {api} in the plugin tree",
        "no capability allows native code: remove the file",
    ),
    Rule(
        "CPL-NAT-003",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "compiled bytecode {api} in the plugin tree (its code cannot be scanned)",
        "ship the .py source instead and remove the file",
    ),
    # -- introspection escapes -----------------------------------------------------
    Rule(
        "CPL-INTRO-001",
        RuleFamily.INTROSPECTION,
        _D,
        None,
        None,
        "attribute {api} reaches interpreter internals (sandbox escape pattern)",
        "no capability allows this: remove the attribute access",
    ),
    Rule(
        "CPL-INTRO-002",
        RuleFamily.INTROSPECTION,
        _D,
        None,
        None,
        "{api} walks frames or live objects (sandbox escape pattern)",
        "no capability allows this: remove the call",
    ),
    # -- global mutation -----------------------------------------------------------
    Rule(
        "CPL-GLOB-001",
        RuleFamily.GLOBAL_MUTATION,
        _D,
        None,
        None,
        "{api} modifies builtins, another module or the import system",
        "no capability allows this: keep changes local to the plugin's own objects",
    ),
    # -- network -----------------------------------------------------------------------
    Rule(
        "CPL-NET-001",
        RuleFamily.NETWORK,
        _D,
        None,
        None,
        "import of {api}, direct network access",
        "use ctx.http (brokered) instead and declare net.http:<origin>",
    ),
    Rule(
        "CPL-NET-002",
        RuleFamily.NETWORK,
        _D,
        None,
        None,
        "{api} opens a raw network stream",
        "use ctx.http (brokered) instead and declare net.http:<origin>",
    ),
    # -- filesystem ----------------------------------------------------------------------
    Rule(
        "CPL-FS-001",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_WRITE,
        "{api} opens a file for writing",
        "declare fs.write:<directory> for the place it writes",
    ),
    Rule(
        "CPL-FS-002",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_READ,
        "{api} reads a file",
        "declare fs.read:<directory> for the place it reads",
    ),
    Rule(
        "CPL-FS-003",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_WRITE,
        "{api} creates, changes or deletes files",
        "declare fs.write:<directory> for the place it changes",
    ),
    Rule(
        "CPL-FS-004",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_READ,
        "sensitive path {api} outside the declared file capabilities",
        "declare an fs.read or fs.write capability whose path contains it, or remove it",
    ),
    # -- environment ----------------------------------------------------------------------
    Rule(
        "CPL-ENV-001",
        RuleFamily.ENVIRONMENT,
        _D,
        _I,
        _K.ENV_READ,
        "{api} reads an environment variable",
        "declare env.read:<NAME> for that variable",
    ),
    Rule(
        "CPL-ENV-002",
        RuleFamily.ENVIRONMENT,
        _D,
        _W,
        _K.ENV_READ,
        "{api} reads the environment with a name that is not a literal",
        "read each variable by its literal name and declare env.read:<NAME> for it",
    ),
    # -- obfuscation ------------------------------------------------------------------------
    Rule(
        "CPL-OBF-001",
        RuleFamily.OBFUSCATION,
        _W,
        None,
        None,
        "{api} looks like an encoded blob (base64 or hex)",
        "ship data as readable files or explain the blob in the description",
    ),
    Rule(
        "CPL-OBF-002",
        RuleFamily.OBFUSCATION,
        _W,
        None,
        None,
        "{api} builds a string character by character (obfuscation pattern)",
        "write the string as a literal",
    ),
    Rule(
        "CPL-OBF-003",
        RuleFamily.OBFUSCATION,
        _W,
        None,
        None,
        "{api} is longer than 1000 characters (hides code from review)",
        "wrap the line; ship generated or minified data as a separate file",
    ),
    # -- install hooks / supply chain ---------------------------------------------------------
    Rule(
        "CPL-HOOK-001",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} runs arbitrary code when the tree is installed",
        "plugins are not installed with pip: remove setup.py (use pyproject.toml metadata)",
    ),
    Rule(
        "CPL-HOOK-002",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} is a .pth file: its import lines run at every interpreter start",
        "remove the .pth file",
    ),
    Rule(
        "CPL-HOOK-003",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} runs automatically at interpreter start",
        "rename or remove the module",
    ),
    Rule(
        "CPL-SUP-001",
        RuleFamily.SUPPLY_CHAIN,
        _W,
        None,
        None,
        "third-party import {api} (supply chain: its code is not part of this scan)",
        "vendor the code into the plugin or use the standard library",
    ),
    # -- the scan itself ---------------------------------------------------------------------------
    Rule(
        "CPL-SCAN-001",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: too large ({api})",
        "split the file or raise max_file_bytes",
    ),
    Rule(
        "CPL-SCAN-002",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: too complex ({api})",
        "simplify the code (split deep expressions, shorten the file)",
    ),
    Rule(
        "CPL-SCAN-003",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "does not parse as Python ({api}); code rules were not applied",
        "fix the syntax or encoding error",
    ),
    Rule(
        "CPL-SCAN-004",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: cannot be read ({api})",
        "make the file readable by the scanning user",
    ),
    Rule(
        "CPL-SCAN-005",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: {api} is not a regular file (symlinks are not followed)",
        "replace the link or special file with a regular file",
    ),
)


def rule(rule_id: str) -> Rule:
    """The rule with this id; ``KeyError`` names the id (a programming error)."""
    return RULES[rule_id]


def _table(rule_id: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, rule_id)


#: Fully qualified callables and attributes -> rule id. Any *reference* fires,
#: not only a call: ``f = os.system; f("ls")`` is caught at ``os.system``.
API_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **_table(
            "CPL-PROC-001",
            *(
                f"subprocess.{n}"
                for n in (
                    "run",
                    "call",
                    "check_call",
                    "check_output",
                    "Popen",
                    "getoutput",
                    "getstatusoutput",
                )
            ),
            "os.system",
            "os.popen",
            *(f"os.exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
            *(f"os.spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
            "os.posix_spawn",
            "os.posix_spawnp",
            "os.fork",
            "os.forkpty",
            "pty.spawn",
            "pty.fork",
            "asyncio.create_subprocess_exec",
            "asyncio.create_subprocess_shell",
        ),
        **_table(
            "CPL-DYN-001",
            "builtins.eval",
            "builtins.exec",
            "builtins.compile",
            "code.interact",
            "code.InteractiveInterpreter",
            "code.InteractiveConsole",
        ),
        **_table(
            "CPL-DYN-002",
            "builtins.__import__",
            "importlib.import_module",
            "importlib.__import__",
            "runpy.run_path",
            "runpy.run_module",
        ),
        **_table(
            "CPL-DYN-003",
            "marshal.loads",
            "marshal.load",
            "pickle.loads",
            "pickle.load",
            "pickle.Unpickler",
            "_pickle.loads",
            "_pickle.load",
            "_pickle.Unpickler",
            "shelve.open",
        ),
        **_table("CPL-DYN-004", "types.CodeType", "types.FunctionType"),
        **_table(
            "CPL-INTRO-002",
            "sys._getframe",
            "sys._current_frames",
            "gc.get_referrers",
            "gc.get_referents",
            "gc.get_objects",
            "inspect.currentframe",
            "inspect.stack",
            "inspect.trace",
        ),
        **_table(
            "CPL-NET-002",
            "asyncio.open_connection",
            "asyncio.open_unix_connection",
            "asyncio.start_server",
            "asyncio.start_unix_server",
        ),
        **_table(
            "CPL-FS-003",
            *(
                f"os.{n}"
                for n in (
                    "remove",
                    "unlink",
                    "rmdir",
                    "removedirs",
                    "rename",
                    "renames",
                    "replace",
                    "makedirs",
                    "mkdir",
                    "chmod",
                    "lchmod",
                    "chown",
                    "lchown",
                    "truncate",
                    "link",
                    "symlink",
                    "mkfifo",
                    "mknod",
                    "utime",
                )
            ),
            *(
                f"shutil.{n}"
                for n in (
                    "rmtree",
                    "copy",
                    "copy2",
                    "copyfile",
                    "copytree",
                    "copymode",
                    "copystat",
                    "move",
                    "chown",
                    "make_archive",
                    "unpack_archive",
                )
            ),
        ),
    }
)

#: Modules whose import alone is a finding (a dotted prefix matches too:
#: ``ctypes.util`` hits ``ctypes``). ``from asyncio import open_connection``
#: is checked as ``asyncio.open_connection`` against :data:`API_RULES` instead.
MODULE_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **_table("CPL-PROC-002", "subprocess", "pty"),
        **_table("CPL-NAT-001", "ctypes", "_ctypes", "cffi"),
        **_table(
            "CPL-NET-001",
            "socket",
            "_socket",
            "ssl",
            "_ssl",
            "urllib.request",
            "http.client",
            "http.server",
            "socketserver",
            "xmlrpc.client",
            "requests",
            "httpx",
            "aiohttp",
            "urllib3",
            "websockets",
            "websocket",
            "smtplib",
            "ftplib",
            "telnetlib",
            "poplib",
            "imaplib",
            "nntplib",
        ),
    }
)

#: Calls whose literal first argument names a module that gets imported.
DYNAMIC_IMPORTERS: Final = frozenset(
    {"builtins.__import__", "importlib.import_module", "importlib.__import__"}
)

#: Where each process-running call takes the program (a list's first element,
#: or a command string's first word).
PROGRAM_ARGUMENTS: Final[Mapping[str, ArgumentSpec]] = MappingProxyType(
    {
        **{
            f"subprocess.{n}": ArgumentSpec(0, "args")
            for n in ("run", "call", "check_call", "check_output", "Popen")
        },
        "subprocess.getoutput": ArgumentSpec(0, "cmd"),
        "subprocess.getstatusoutput": ArgumentSpec(0, "cmd"),
        "os.system": ArgumentSpec(0, "command"),
        "os.popen": ArgumentSpec(0, "cmd"),
        **{
            f"os.exec{s}": ArgumentSpec(0, None)
            for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
        },
        # os.spawn*(mode, file, ...): the program is the second argument.
        **{
            f"os.spawn{s}": ArgumentSpec(1, None)
            for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
        },
        "os.posix_spawn": ArgumentSpec(0, None),
        "os.posix_spawnp": ArgumentSpec(0, None),
        "pty.spawn": ArgumentSpec(0, "argv"),
        "asyncio.create_subprocess_exec": ArgumentSpec(0, "program"),
        "asyncio.create_subprocess_shell": ArgumentSpec(0, "cmd"),
    }
)

#: ``open``-like calls and where their mode is; no mode means read.
OPEN_FUNCTIONS: Final[Mapping[str, ArgumentSpec]] = MappingProxyType(
    {
        "builtins.open": ArgumentSpec(1, "mode"),
        "io.open": ArgumentSpec(1, "mode"),
        "codecs.open": ArgumentSpec(1, "mode"),
        # os.open takes flags, not a mode string: see OS_OPEN_WRITE_FLAGS.
        "os.open": ArgumentSpec(1, "flags"),
    }
)

#: ``os.O_*`` names that make an ``os.open`` call a write.
OS_OPEN_WRITE_FLAGS: Final = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"})

#: Method names (any receiver: the scanner does not infer types) that write
#: through ``pathlib``. ``replace`` is left out: ``str.replace`` is everywhere.
FS_WRITE_METHODS: Final = frozenset(
    {
        "write_text",
        "write_bytes",
        "unlink",
        "rmdir",
        "mkdir",
        "touch",
        "rename",
        "symlink_to",
        "hardlink_to",
    }
)

#: Method names that read a whole file through ``pathlib``.
FS_READ_METHODS: Final = frozenset({"read_text", "read_bytes"})

#: Absolute or home-relative path prefixes worth a second look; a literal
#: equal to a prefix without its trailing ``/`` (``"/etc"``) counts too.
SENSITIVE_PATH_PREFIXES: Final = (
    "/etc/",
    "/proc/",
    "/sys/",
    "/root/",
    "/home/",
    "/boot/",
    "/run/secrets",
    "/var/run/secrets",
    "/var/run/docker.sock",
    "~/.",
)

#: Substrings that mark credentials wherever they appear in a literal.
SENSITIVE_PATH_MARKERS: Final = (
    ".ssh/",
    ".aws/credentials",
    ".gnupg/",
    ".netrc",
    ".git-credentials",
    ".kube/config",
    ".docker/config.json",
)

#: The environment mappings; any access to them is an environment read.
ENVIRON_MAPPINGS: Final = frozenset({"os.environ", "os.environb"})

#: Functions taking a variable name as first argument (``key`` by keyword).
ENV_FUNCTIONS: Final = frozenset({"os.getenv", "os.getenvb", "os.putenv", "os.unsetenv"})

#: Mapping methods of ``os.environ`` whose first argument is the variable name.
ENV_METHODS: Final = frozenset(
    {"get", "pop", "setdefault", "__getitem__", "__contains__", "__setitem__", "__delitem__"}
)

#: Attribute names that lead from ordinary objects to interpreter internals
#: (the classic ``().__class__.__base__.__subclasses__()`` escape, frame walking).
INTROSPECTION_ATTRIBUTES: Final = frozenset(
    {
        "__subclasses__",
        "__globals__",
        "__builtins__",
        "__code__",
        "__closure__",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "ag_frame",
        "tb_frame",
    }
)

#: Bare names that are introspection escapes on their own.
INTROSPECTION_NAMES: Final = frozenset({"__builtins__"})

#: Interpreter-wide import state: writing to it changes every later import.
IMPORT_STATE: Final = frozenset(
    {"sys.modules", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache"}
)

#: Methods that mutate a list or dict in place.
MUTATING_METHODS: Final = frozenset(
    {
        "append",
        "insert",
        "extend",
        "remove",
        "pop",
        "popitem",
        "clear",
        "update",
        "setdefault",
        "__setitem__",
        "__delitem__",
    }
)

#: Callables that turn code points into characters (the chr()-join trick).
CHR_FUNCTIONS: Final = frozenset({"builtins.chr"})

#: An encoded blob is at least this long (whitespace between lines removed) ...
BLOB_MIN_LENGTH: Final = 200
#: ... and uses at least this many distinct characters, so that banners
#: (``"=" * 200``) and long runs of one digit are not blobs.
BLOB_MIN_DISTINCT: Final = 6

#: Lines longer than this many characters are a finding.
LONG_LINE: Final = 1000

#: Exact file names (any directory) -> rule id.
FILE_NAME_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "setup.py": "CPL-HOOK-001",
        "sitecustomize.py": "CPL-HOOK-003",
        "usercustomize.py": "CPL-HOOK-003",
    }
)

#: File name endings (any directory) -> rule id.
FILE_SUFFIX_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        ".pth": "CPL-HOOK-002",
        ".so": "CPL-NAT-002",
        ".pyd": "CPL-NAT-002",
        ".dll": "CPL-NAT-002",
        ".dylib": "CPL-NAT-002",
        ".pyc": "CPL-NAT-003",
        ".pyo": "CPL-NAT-003",
    }
)
