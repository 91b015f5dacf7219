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

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from caplet._scan._rule_model import ArgumentSpec, Rule, RuleFamily, RuleKind
from caplet._scan._rules_capability import CAPABILITY_RULES
from caplet._scan._rules_scan import SCAN_RULES
from caplet._scan._rules_threat import THREAT_RULES

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
    "NAME_RESOLVERS",
    "OPEN_FUNCTIONS",
    "OS_OPEN_WRITE_FLAGS",
    "PROGRAM_ARGUMENTS",
    "RULES",
    "SENSITIVE_PATH_MARKERS",
    "SENSITIVE_PATH_PREFIXES",
    "ArgumentSpec",
    "Rule",
    "RuleFamily",
    "RuleKind",
    "rule",
]


def _rules(*rules: Rule) -> Mapping[str, Rule]:
    return MappingProxyType({r.rule_id: r for r in rules})


#: Every rule, by id, in the order the catalogue shows them.
RULES: Final[Mapping[str, Rule]] = _rules(*CAPABILITY_RULES, *THREAT_RULES, *SCAN_RULES)


def rule(rule_id: str) -> Rule:
    """The rule with this id; ``KeyError`` names the id (a programming error)."""
    return RULES[rule_id]


def _table(rule_id: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, rule_id)


#: Fully qualified callables and attributes -> rule id. Any *reference* fires,
#: not only a call: ``f = os.system; f("ls")`` is caught at ``os.system``.
_API_RULES: Final[Mapping[str, str]] = MappingProxyType(
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
            "asyncio.subprocess.create_subprocess_exec",
            "asyncio.subprocess.create_subprocess_shell",
            "_posixsubprocess.fork_exec",
            # Standard-library functions that run a program for you.
            "pydoc.pipepager",
            "pydoc.tempfilepager",
            "webbrowser.open",
            "webbrowser.open_new",
            "webbrowser.open_new_tab",
            "webbrowser.get",
            "distutils.spawn.spawn",
            "multiprocessing.Process",
            "multiprocessing.Pool",
            "multiprocessing.get_context",
            "concurrent.futures.ProcessPoolExecutor",
            # pywin32's ways to start a program (blind32: ShellExecute of "cmd.exe" with a
            # decoded "/c ..." as its parameters, the window hidden)
            "win32api.ShellExecute",
            "win32api.WinExec",
            "win32process.CreateProcess",
            "win32process.CreateProcessAsUser",
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
            # Loaders and import hooks that take code from files the scan does not
            # read as modules (a zip archive, a .txt holding source); the worker
            # drops the zip hook, and code that touches these could put it back.
            "zipimport.zipimporter",
            "importlib.machinery.SourceFileLoader",
            "importlib.machinery.SourcelessFileLoader",
            "importlib.machinery.ExtensionFileLoader",
            "importlib.machinery.FileFinder",
            "importlib.util.spec_from_file_location",
            "importlib.util.spec_from_loader",
            "sys.path_hooks",
            "sys.meta_path",
            "imp.load_source",
            "imp.load_compiled",
            "imp.load_dynamic",
            "imp.load_module",
            "imp.load_package",
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
            # issue 13: IPC that reaches other processes of the host
            "socket.AF_UNIX",
            "multiprocessing.connection.Client",
            "multiprocessing.connection.Listener",
            "logging.handlers.SysLogHandler",
            "logging.handlers.SocketHandler",
            "logging.handlers.DatagramHandler",
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

#: What ``os`` takes from ``posix`` (its C module) under the same names: the
#: rules' os functions are reachable there too (``import posix;
#: posix.system("id")`` passed the danger gate). Fixed, not read from this
#: interpreter, so a scan says the same on every platform.
_POSIX_FUNCTIONS: Final = frozenset(
    {
        *("system", "execv", "execve", "fork", "forkpty", "posix_spawn", "posix_spawnp"),
        *("chmod", "chown", "lchown", "link", "mkdir", "mkfifo", "mknod", "remove"),
        *("rename", "replace", "rmdir", "unlink", "symlink", "truncate", "open"),
        *("putenv", "unsetenv"),
    }
)

#: ... and the same functions under ``posix``, the module ``os`` re-exports.
API_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **_API_RULES,
        **{
            f"posix.{name[3:]}": rule_id
            for name, rule_id in _API_RULES.items()
            if name.startswith("os.") and name[3:] in _POSIX_FUNCTIONS
        },
    }
)

#: Modules whose import alone is a finding (a dotted prefix matches too:
#: ``ctypes.util`` hits ``ctypes``). ``from asyncio import open_connection``
#: is checked as ``asyncio.open_connection`` against :data:`API_RULES` instead.
MODULE_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **_table("CPL-PROC-002", "subprocess", "pty"),
        # Third-party modules whose whole purpose is running programs: any use of
        # them runs one (sh.ls(), plumbum's local["ls"]), so importing them is the
        # finding. They passed the gate as a supply-chain warning only.
        **_table(
            "CPL-PROC-001",
            "sh",
            "pexpect",
            "ptyprocess",
            "plumbum",
            "sarge",
            "invoke",
            "fabric",
            "delegator",
            "envoy",
        ),
        # numpy.ctypeslib is ctypes under another name (its .ctypes, load_library).
        **_table(
            "CPL-NAT-001",
            "ctypes",
            "_ctypes",
            "cffi",
            "numpy.ctypeslib",
            # Compile and run native code at run time.
            "numba",
            "llvmlite",
            "pyximport",
        ),
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
            # an Ethereum node's RPC client: a transaction carries whatever its data holds
            # (set-utils sent private keys out in transactions, Socket 2025: blind14)
            "web3",
            # an MQTT client publishes to a broker, scapy sends packets it builds (blind18:
            # host data published to a public broker, carried in ICMP echo payloads)
            "paho.mqtt",
            "scapy",
        ),
    }
)

#: Calls whose literal first argument names a module that gets imported.
DYNAMIC_IMPORTERS: Final = frozenset(
    {"builtins.__import__", "importlib.import_module", "importlib.__import__"}
)
#: Functions that return the object a dotted name in a string denotes
#: (``pkgutil.resolve_name("os:system")``, ``pydoc.locate("os.system")``: blind17).
NAME_RESOLVERS: Final = frozenset({"pkgutil.resolve_name", "pydoc.locate"})

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
        # pydoc's pagers start their second argument through the shell
        # (Lib/pydoc.py: subprocess.Popen(cmd, shell=True)): a shell sink (blind31)
        "pydoc.pipepager": ArgumentSpec(1, "cmd"),
        "pydoc.tempfilepager": ArgumentSpec(1, "cmd"),
        # ShellExecute(hwnd, verb, file, parameters, directory, show)
        "win32api.ShellExecute": ArgumentSpec(2, None),
        "win32api.WinExec": ArgumentSpec(0, None),
        "win32process.CreateProcess": ArgumentSpec(1, None),
        "win32process.CreateProcessAsUser": ArgumentSpec(2, None),
    }
)

#: ``open``-like calls and where their mode is; no mode means read.
OPEN_FUNCTIONS: Final[Mapping[str, ArgumentSpec]] = MappingProxyType(
    {
        "builtins.open": ArgumentSpec(1, "mode"),
        "io.open": ArgumentSpec(1, "mode"),
        "codecs.open": ArgumentSpec(1, "mode"),
        "gzip.open": ArgumentSpec(1, "mode"),
        "bz2.open": ArgumentSpec(1, "mode"),
        "lzma.open": ArgumentSpec(1, "mode"),
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
ENVIRON_MAPPINGS: Final = frozenset({"os.environ", "os.environb", "posix.environ"})

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
