"""Threat sinks: what data reaches code execution, a process, the network or a file that is run.

The visitor hands every call that can be a sink to :class:`Sinks` while it
walks; the checks run in :meth:`Sinks.finish`, once the whole file is seen
(a dictionary filled after the call that sends it still counts). Each check
asks :class:`caplet._scan._flow.Flow` which sources the sink's argument may
carry, and maps the combination to a threat rule:

* decoded data run as code or as a command: CPL-THR-001; downloaded data:
  CPL-THR-002; a chat bot's or a socket peer's text: CPL-THR-020;
* Python source kept in a string (or decoded from one) that is run
  (``exec``, ``python -c``, a file written and started) and itself reaches
  processes, the network or native code: CPL-THR-016, and every threat
  inside such source is reported at the string;
* a file written and then started (write then execute): by what was
  written, the rules above, or CPL-THR-018 for a program copied out of the
  package;
* host reconnaissance sent out, a DNS query included: CPL-THR-017; the
  whole environment or several secrets: CPL-THR-006; credential files:
  CPL-THR-007;
* a builtin or an API looked up by a name computed from literals:
  CPL-THR-003; pip run from code: CPL-THR-019; compiled bytecode loaded from a
  file: CPL-THR-027.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

import re2

from caplet._findings import Finding
from caplet._scan._commands import PYTHONS, Commands, encoded_command
from caplet._scan._correlate import Tag
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow, Labels, is_network, secret_name
from caplet._scan._indicators import IndicatorKind, indicator_set
from caplet._scan._rules import (
    API_RULES,
    MODULE_RULES,
    RuleFamily,
    RuleKind,
    rule,
)
from caplet._scan._sources import (
    DECODERS,
    DNS_FUNCTIONS,
    EGRESS_VERBS,
    EXECUTORS,
    NETWORK_PROGRAMS,
    NON_PAYLOAD_KEYWORDS,
    PIP_MAINS,
    RECON_FUNCTIONS,
    SHELLS,
    Source,
)
from caplet._scan._syntax import shorten
from caplet._scan._tags import Tagger

__all__ = ["Sinks", "launches_payload"]

#: Nodes looked at inside one expression (and the values its names are bound to).
_BUDGET = 400
#: Programs that have no business running at install time (CPL-THR-011).
_INSTALL_TIME_PROGRAMS = frozenset(
    {
        "curl",
        "wget",
        "pwsh",
        "powershell",
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
_URL_PREFIXES = ("http://", "https://")
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})  # noqa: S104 -- matched
#: Builtins' namespaces: a lookup in one by a computed name hides what is called.
_BUILTIN_OWNERS = frozenset({"builtins", "builtins.__dict__"})
#: Calls that copy a file (source first, destination second).
_COPIES = frozenset({"shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.move", "os.rename"})
#: Calls that download to a file (URL first, destination second).
_DOWNLOADS_TO = frozenset({"urllib.request.urlretrieve", "urllib.urlretrieve", "wget.download"})
#: What a Windows program file is called.
_PROGRAM_SUFFIXES = frozenset(
    {".exe", ".scr", ".bat", ".cmd", ".ps1", ".vbs", ".js", ".msi", ".com", ".pif", ".hta"}
)
#: Calls that load a pickle (loading one runs the callables it names).
_UNPICKLERS = frozenset(
    {"pickle.loads", "_pickle.loads", "dill.loads", "cloudpickle.loads", "marshal.loads"}
)
#: Calls that create a temporary file open for writing (its ``.name`` is run later).
_TEMPORARY_FILES = frozenset({"tempfile.NamedTemporaryFile", "tempfile.TemporaryFile"})
#: Calls that run a file they are given.
_RUNS_FILE = frozenset(
    {
        "os.startfile",
        "runpy.run_path",
        # a native library loaded runs its initialisers: a DLL written and loaded is run
        *(f"ctypes.{k}" for k in ("CDLL", "WinDLL", "OleDLL", "PyDLL")),
        *(f"ctypes.{k}.LoadLibrary" for k in ("cdll", "windll", "oledll", "pydll")),
        "_ctypes.dlopen",
    }
)
#: Rule families whose presence in Python source kept in a string makes running it a threat.
#: Processes, ctypes, pickle or frames alone are not enough: test suites run
#: snippets that use them; the network only with a host written into the source.
_CAPABLE_FAMILIES = frozenset({RuleFamily.EXFILTRATION, RuleFamily.PERSISTENCE, RuleFamily.MINING})
#: A host or address written into source: ``"https://x.example/"``, ``"192.0.2.1"``.
_FIXED_HOST: Final = re2.compile(
    r"""https?://(?:(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}|(?:\d{1,3}\.){3}\d{1,3})|"""
    r"""['"](?:\d{1,3}\.){3}\d{1,3}['"]"""
)
#: An address credentials must never be sent to: plain http, or an IP address.
_CLEARTEXT_DESTINATION: Final = re2.compile(
    r"(?i)http://|https://(?:\d{1,3}\.){3}\d{1,3}(?:[:/]|$)"
)
#: A parameter that holds a credential.
_CREDENTIAL_NAME: Final = re2.compile(
    r"(?i)passw|passphrase|^pw$|pkey|private_?key|secret|token$|api_?key|mnemonic|seed_?phrase"
)
_LOCAL_ADDRESS: Final = re2.compile(r"""(?:['"]|//)(?:127\.|0\.0\.0\.0|localhost\b)""")


#: Loaders of compiled bytecode from a file (what fshec2 ran its payload with).
_BYTECODE_LOADERS = frozenset(
    {"importlib.machinery.SourcelessFileLoader", "imp.load_compiled", "_imp.load_compiled"}
)
#: Folders and files of a test suite (where replacing a library's function is routine).
_TEST_DIRS = frozenset({"tests", "test", "testing"})


def _test_file(path: str) -> bool:
    """A file of a test suite: under ``tests/``, or ``test_*.py``/``conftest.py``."""
    parts = path.split("/")
    name = parts[-1]
    return (
        not _TEST_DIRS.isdisjoint(parts[:-1]) or name.startswith("test_") or name == "conftest.py"
    )


def _capable(rule_id: str, text: str) -> bool:
    """A finding that makes Python source kept in a string a second stage when it runs."""
    r = rule(rule_id)
    if r.kind is RuleKind.THREAT or r.family in _CAPABLE_FAMILIES:
        return True
    return r.family is RuleFamily.NETWORK and _fixed_host(text)


def _fixed_host(text: str) -> bool:
    """A non-local host or address literal in ``text``."""
    encoded = text.encode("utf-8", "surrogatepass")
    return _FIXED_HOST.search(encoded) is not None and _LOCAL_ADDRESS.search(encoded) is None


#: A string worth scanning as Python: a statement keyword or a call that matters.
_CODE_HINT: Final = re2.compile(
    rb"(?m)(?:^|;)\s*(?:import|from)\s+[\w.]+|\b(?:exec|eval|compile|__import__|system|popen|"
    rb"Popen|socket|urlopen|getattr)\s*\("
)
#: Longest string scanned as Python (larger ones are data, or were scanned as a file).
_MAX_NESTED_TEXT = 1 << 20
#: How deep strings inside strings are followed.
_MAX_NESTED_DEPTH = 3


def launches_payload(program: str) -> bool:
    """A program that is a dropped payload: a Windows executable or something in /tmp."""
    lowered = program.lower()
    return lowered.endswith((".exe", ".scr", ".bat", ".ps1", ".vbs", ".msi")) or lowered.startswith(
        ("/tmp/", "/dev/shm/", "/var/tmp/")  # noqa: S108 -- patterns matched, not paths used
    )


#: pip's program names: pip, pip3, pip3.11, pip.exe.
_PIP = re.compile(r"pip[0-9.]*(?:\.exe)?", re.IGNORECASE)


def _installs_other(words: list[str]) -> bool:
    """``pip install NAME`` (or a URL; ``pip3``, ``pip3.11``, ``pip.exe`` too): not
    ``pip install .`` or ``-r requirements.txt``."""
    if "install" not in words or not any(_PIP.fullmatch(PurePosixPath(w).name) for w in words):
        return False
    targets = [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
    return any(not w.startswith((".", "/", "~")) and "requirements" not in w for w in targets)


#: Modules whose names and functions are worth hiding besides those with rules of their
#: own: decoders, the host's identity, the registry, pip.
_HIDDEN_ROOTS = frozenset(
    {
        "os",
        "builtins",
        "sys",
        "marshal",
        "base64",
        "binascii",
        "zlib",
        "lzma",
        "bz2",
        "codecs",
        "pip",
        "platform",
        "getpass",
        "winreg",
        "_winreg",
        "urllib",
        "http",
    }
)
#: Modules the rule tables name only for harmless reasons (logging handlers, type objects).
_NOT_HIDDEN_ROOTS = frozenset({"logging", "gc", "inspect", "types", "distutils", "code"})
_SENSITIVE_ROOTS = (
    _HIDDEN_ROOTS
    | {m.split(".", 1)[0] for m in MODULE_RULES}
    | {a.split(".", 1)[0] for a in API_RULES}
) - _NOT_HIDDEN_ROOTS


def _worth_hiding(api: str) -> bool:
    """An API a computed lookup hides: one with a rule, or one the data flow watches
    (code runners, files run, decoders, the host's identity, name resolution, pip)."""
    return (
        api in API_RULES
        or api in EXECUTORS
        or api in _RUNS_FILE
        or api in DECODERS
        or api in RECON_FUNCTIONS
        or api in DNS_FUNCTIONS
        or api in PIP_MAINS
    )


def _hides_name(name: str) -> bool:
    """True when ``name`` (a module or attribute built from pieces) is worth hiding: a
    module the rules watch (processes, network, native code, code loading, files) or
    one of :data:`_HIDDEN_ROOTS`, or anything in one."""
    return name in MODULE_RULES or name.split(".", 1)[0] in _SENSITIVE_ROOTS


@dataclass(frozen=True, slots=True)
class _Write:
    """A file written: the names its path is known by, and what was written."""

    keys: frozenset[str]
    data: tuple[ast.expr, ...]
    labels: Labels
    node: ast.AST
    path: ast.AST | None
    #: The name the file object is bound to (its writes are contributions to it).
    handle: str | None
    scope: int
    #: A copy of another file (``shutil.copy``), not data written.
    copied: bool


class Sinks:
    """The threat sinks of one file (see the module docstring)."""

    def __init__(self, scan: FileScan, flow: Flow) -> None:
        self._scan = scan
        self._flow = flow
        self._pending: list[Callable[[], None]] = []
        self._writes: list[_Write] = []
        self._handles: dict[str, ast.AST] = {}
        self._runs: list[tuple[frozenset[str], ast.Call, str]] = []
        self._fixed_destination = False
        self._recon_egress: list[tuple[ast.Call, Labels, str]] = []
        self._secret_egress: list[tuple[ast.Call, str, str]] = []
        self._nested: dict[str, list[Finding]] = {}
        self._patches: list[tuple[ast.AST, str, list[ast.AST]]] = []
        self._by_receiver: dict[int, ast.expr] | None = None
        self._commands = Commands(flow)
        self._tags = Tagger(scan, flow)

    # -- what the visitor hands over ------------------------------------------------------

    def call(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """Every call: tags for the chains, and the sinks it may be."""
        flow = self._flow
        if node.args or node.keywords:
            self._tags.environ_dump(node, funcs)
            self._tags.fixed_endpoint(node, funcs)
            self._tags.joined_path(node, funcs)
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else ""
        # a connection, a socket address or a URL written into the code
        if (
            (node.args or node.keywords)
            and any(is_network(f) for f in funcs)
            and self._tags.literal_destination(node)
        ):
            self._fixed_destination = True
        network = [f for f in funcs if is_network(f) and f.rsplit(".", 1)[-1] in EGRESS_VERBS]
        if network:
            self._scan.tag(Tag.EGRESS, node.lineno, network[0])
            self._pending.append(lambda: self._egress(node, network[0]))
        if not DNS_FUNCTIONS.isdisjoint(funcs) and node.args:
            self._pending.append(lambda: self._dns(node, node.args[0]))
        if node.args and not EXECUTORS.isdisjoint(funcs):
            executor = next(f for f in funcs if f in EXECUTORS).removeprefix("builtins.")
            self._pending.append(lambda: self._run_code(node, executor, node.args[0]))
            read = self._read_back(node.args[0])
            if read is not None:
                # exec(open(p).read()): the file p is run, as if started
                self._runs.append((self._commands.keys(read), node, executor))
        if not _TEMPORARY_FILES.isdisjoint(funcs):
            # NamedTemporaryFile(suffix=".py", delete=False) as f; f.write(src); run f.name
            self._write(node, node, (), set())
        if node.args and not _UNPICKLERS.isdisjoint(funcs):
            self._pending.append(lambda: self._unpickled(node, node.args[0]))
        if node.args and not _RUNS_FILE.isdisjoint(funcs):
            api = next(f for f in funcs if f in _RUNS_FILE)
            self._runs.append((self._commands.keys(node.args[0]), node, api))
        if len(node.args) >= 2 and not _DOWNLOADS_TO.isdisjoint(funcs):
            self._write(node, node.args[1], (), {(Source.DOWNLOADED, funcs[0])})
        if len(node.args) >= 2 and not _COPIES.isdisjoint(funcs):
            self._write(
                node,
                node.args[1],
                (node.args[0],),
                set(flow.path_labels(node.args[0])),
                copied=self._disguised_copy(node.args[0], node.args[1]),
            )
        if (
            isinstance(func, ast.Attribute)
            and method in {"write_bytes", "write_text"}
            and node.args
        ):
            self._write(node, func.value, (node.args[0],), set())
        if not PIP_MAINS.isdisjoint(funcs) and self._installs(node):
            self._scan.emit(
                "CPL-THR-019",
                next(f for f in funcs if f in PIP_MAINS),
                node.lineno,
                node.col_offset,
            )
        if not _BYTECODE_LOADERS.isdisjoint(funcs) or (
            "importlib.util.spec_from_file_location" in funcs
            and len(node.args) >= 2
            and (flow.path_text(node.args[1]) or "").lower().endswith(".pyc")
        ):
            # SourcelessFileLoader(name, path), spec_from_file_location(name, "x.pyc")
            shown = next((f for f in funcs if f in _BYTECODE_LOADERS), funcs[0])
            self._scan.emit("CPL-THR-027", shown, node.lineno, node.col_offset)
        if not {"operator.attrgetter", "operator.methodcaller"}.isdisjoint(funcs) and node.args:
            self._computed_name(node, node.args[0], None)
        if method in {"get", "__getattribute__", "__getitem__"} and 1 <= len(node.args) <= 2:
            self.computed_lookup(node, node.args[-1 if method == "__getattribute__" else 0])
        elif isinstance(func, ast.Name) and node.args and len(node.args) <= 2:
            # g = vars(__builtins__).get; g(name): the bound lookup called by its name
            bound = flow.bindings.assigned.get(func.id, ())
            if (
                len(bound) == 1
                and isinstance(bound[0], ast.Attribute)
                and bound[0].attr in {"get", "__getitem__"}
            ):
                call = ast.copy_location(ast.Call(bound[0], node.args, node.keywords), node)
                self.computed_lookup(call, node.args[0])

    def process(self, node: ast.Call, api: str, command: ast.expr) -> None:
        """A process call: tags for the chains, and what its command carries."""
        scan = self._scan
        line = node.lineno
        first: ast.AST = command
        if isinstance(command, ast.List | ast.Tuple) and command.elts:
            first = command.elts[0]
        if "sys.executable" in self._flow.resolve(first):
            scan.tag(Tag.PYTHON_RUN, line, "sys.executable")
        for value in self._tags.values(first):
            text = self._flow.name_value(value)
            words = text.split() if text else []
            if not words:
                continue
            word = PurePosixPath(words[0]).name.lower()
            if launches_payload(words[0]):
                scan.tag(Tag.LAUNCH, line, words[0])
            if word.startswith("python"):
                scan.tag(Tag.PYTHON_RUN, line, word)
            if word in SHELLS:
                scan.tag(Tag.SHELL, line, word)
            if word in _INSTALL_TIME_PROGRAMS:
                scan.tag(Tag.DOWNLOADER, line, word)
        self._runs.append((self._commands.program_keys(command), node, api))
        self._pending.append(lambda: self._command(node, api, command))

    def opened_for_writing(self, node: ast.Call, path: ast.AST) -> None:
        """``open(path, "w")``: the file's handle, if named, carries what is written."""
        self._write(node, path, (), set())

    def namespace_lookup(self, node: ast.Subscript) -> None:
        """``vars(__builtins__)[name]``, ``builtins.__dict__[name]`` with a computed name,
        and any lookup by a computed name that lands on an API worth hiding: a module's
        namespace (``sys.modules``, ``vars(os)``, a copy of one) or a dispatch table of
        builtins (``{"load": exec}``)."""
        value = node.value
        flow = self._flow
        if isinstance(node.slice, ast.Constant):
            return
        owners = flow.resolve(value)
        if not flow.may_look_up(value, owners):
            return  # a list, a local dict, a parameter: no lookup of anything that can hide
        namespace = not _BUILTIN_OWNERS.isdisjoint(owners) or any(
            o.endswith(".__dict__") and o.removesuffix(".__dict__") in _BUILTIN_OWNERS
            for o in owners
        )
        name = flow.name_value(node.slice)
        hidden = name is None and namespace and flow.closed(node.slice)
        if name is None and not self._decoded(node.slice) and not hidden:
            return
        shown = repr(name) if name is not None else ("<computed>" if hidden else "<decoded>")
        if namespace:
            self._scan.emit(
                "CPL-THR-003",
                f"builtins namespace[{shown} computed]",
                node.lineno,
                node.col_offset,
            )
        elif name is not None:
            self._hidden_lookup(node, flow.resolve(node), f"[{shown} computed]")

    def computed_lookup(self, node: ast.Call, key: ast.expr) -> None:
        """``ns.get(name)``, ``os.__getattribute__(name)``, ``object.__getattribute__(os,
        name)`` with a computed name: a lookup like getattr's, by other means."""
        if isinstance(key, ast.Constant):
            return
        name = self._flow.name_value(key)
        if name is not None:
            method = node.func.attr if isinstance(node.func, ast.Attribute) else "lookup"
            self._hidden_lookup(node, self._flow.resolve(node), f".{method}({name!r} computed)")

    def _hidden_lookup(self, node: ast.expr, resolved: tuple[str, ...], how: str) -> None:
        """CPL-THR-003 when what a computed lookup denotes is an API worth hiding."""
        hidden = next(
            (r for r in resolved if _worth_hiding(r) or ("." not in r and _hides_name(r))),
            None,
        )
        if hidden is not None:
            self._scan.emit(
                "CPL-THR-003", f"{hidden} looked up by {how}", node.lineno, node.col_offset
            )

    def computed_import(self, node: ast.Call, name: str, module: str) -> None:
        """``__import__("o" + "s")``: a module name built from pieces."""
        if not isinstance(node.args[0], ast.Constant) and _hides_name(module):
            api = f"{name.removeprefix('builtins.')}({module!r} built from pieces)"
            self._scan.emit("CPL-THR-003", api, node.lineno, node.col_offset)

    def computed_getattr(
        self, node: ast.Call, owner: ast.expr, name: ast.expr, attr: str | None
    ) -> None:
        """``getattr(owner, name)`` where the name is computed to hide what is called."""
        self._computed_name(node, name, owner, attr)

    def patched(self, node: ast.AST, api: str, value: ast.expr) -> None:
        """A third-party library's ``api`` replaced by ``value``: a threat when ``value``
        is a function of this file that reaches the network and a fixed host (checked
        once the file is seen)."""
        if "()" in api or _test_file(self._scan.file):
            # an instance's attribute (a fixture's connection), or a test's monkeypatch:
            # tests replace library functions as a matter of course
            return
        if isinstance(value, ast.Name):
            found = [f for f in self._flow.bindings.functions if f.name == value.id]
            body: list[ast.AST] = list(found[:4])
            body += [
                v
                for v in self._flow.bindings.assigned.get(value.id, ())
                if isinstance(v, ast.Lambda)
            ]
        elif isinstance(value, ast.Lambda):
            body = [value]
        else:
            return
        if body:
            self._patches.append((node, api, body))

    def _patch_check(self) -> None:
        fixed_file = self._fixed_destination or Tag.FIXED_ENDPOINT in self._scan.tags
        for node, api, bodies in self._patches:
            egress = fixed = False
            for body in bodies:
                for n in ast.walk(body):
                    if isinstance(n, ast.Name | ast.Attribute) and any(
                        is_network(r) and r.rsplit(".", 1)[-1] in EGRESS_VERBS
                        for r in self._flow.resolve(n)
                    ):
                        egress = True
                    elif (
                        isinstance(n, ast.Constant)
                        and isinstance(n.value, str)
                        and _fixed_host(repr(n.value))
                    ):
                        fixed = True
            if (egress and (fixed or fixed_file)) or (fixed and fixed_file):
                self._scan.emit(
                    "CPL-THR-025",
                    f"{api} replaced",
                    getattr(node, "lineno", 0),
                    getattr(node, "col_offset", None),
                )

    def persistence_marker(self, node: ast.AST) -> str | None:
        """An autostart location named by the strings inside ``node`` (see :class:`Tagger`)."""
        return self._tags.persistence_marker(node)

    def secret_read(self, key: str) -> bool:
        """Whether reading environment variable ``key`` is reading a secret."""
        return secret_name(key)

    # -- the checks ---------------------------------------------------------------------------

    def finish(self) -> None:
        """Run the checks, now that every contribution to every name is known."""
        # Taken out of self: each check is a closure over self, and a list of them kept
        # here would make the file's whole syntax tree garbage for the cycle collector
        # instead of freeing it when the file is done (a tenth of a package scan's CPU).
        pending, self._pending = self._pending, []
        for check in pending:
            check()
        self._write_then_run()
        if self._patches:
            self._patch_check()
        fixed = self._fixed_destination or Tag.FIXED_ENDPOINT in self._scan.tags
        for node, names, api in self._secret_egress:
            if fixed:
                self._scan.emit(
                    "CPL-THR-006", f"{names} sent by {api}", node.lineno, node.col_offset
                )
        for node, labels, api in self._recon_egress:
            if fixed:
                what = ", ".join(sorted({d for s, d in labels if s is Source.RECON}))
                self._scan.emit(
                    "CPL-THR-017", f"{what} sent by {api}", node.lineno, node.col_offset
                )

    def _read_back(self, arg: ast.expr) -> ast.expr | None:
        """The path of ``open(p).read()`` or ``Path(p).read_text()`` (what exec is given)."""
        if not (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)):
            return None
        receiver = arg.func.value
        if arg.func.attr in {"read_text", "read_bytes"}:
            return receiver
        opened = isinstance(receiver, ast.Call) and receiver.args
        if arg.func.attr == "read" and isinstance(receiver, ast.Call) and opened:
            openers = {"builtins.open", "io.open", "codecs.open"}
            return receiver.args[0] if openers & set(self._flow.resolve(receiver.func)) else None
        return None

    def _stdin_sources(self, node: ast.Call) -> list[ast.expr]:
        """What a process is given on its standard input: ``input=``, ``.communicate(x)``,
        ``.stdin.write(x)`` on the name the process is bound to."""
        found = [k.value for k in node.keywords if k.arg == "input"]
        handle = self._handle_of(node)
        if handle is None:
            return found
        for n in self._flow.nodes:
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                continue
            owner = n.func.value
            if n.func.attr == "communicate" and isinstance(owner, ast.Name) and owner.id == handle:
                found.extend([*n.args[:1], *(k.value for k in n.keywords if k.arg == "input")])
            elif (
                n.func.attr in {"write", "writelines"}
                and isinstance(owner, ast.Attribute)
                and owner.attr == "stdin"
                and isinstance(owner.value, ast.Name)
                and owner.value.id == handle
            ):
                found.extend(n.args[:1])
        return found[:8]

    def _unpickled(self, node: ast.Call, arg: ast.expr) -> None:
        """A pickle decoded from a literal of this file: loading it runs what it says
        (``pickle.loads(b64decode("..."))``); a pickle of run-time data is not a payload."""
        if isinstance(self._flow.evaluate(arg), bytes) and self._decoded(arg):
            api = min(self._flow.resolve(node.func), default="pickle.loads")
            self._by_source(node, f"{api}(...)", self._flow.labels(arg))

    def _run_code(self, node: ast.Call, executor: str, arg: ast.expr) -> None:
        if executor == "eval" and not isinstance(arg, ast.Constant):
            # eval("ex" + "ec"): a builtin or module named by a computed string
            name = self._flow.name_value(arg)
            if name is not None and name.isidentifier():
                self._hidden_lookup(node, self._flow.resolve(node), f"eval({name!r} computed)")
        labels = self._flow.labels(arg)
        self._by_source(node, f"{executor}(...)", labels)
        value = self._flow.evaluate(arg)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            self._code_string(node, f"{executor}(...)", value)

    def _command(self, node: ast.Call, api: str, command: ast.expr) -> None:
        """What a process call's command carries, and what its text says."""
        flow = self._flow
        line, col = node.lineno, node.col_offset
        # Data from the network or a decoder counts where it can be the command
        # itself (a shell string, a list's program, an interpreter's argument):
        # a version number fetched from an index and passed to pip is not a payload.
        self._by_source(node, f"{api}(...)", self._commands.program_labels(command))
        labels = flow.labels(command)
        recon = sorted({d for s, d in labels if s is Source.RECON})
        words = self._commands.words(command)
        if words is None:
            words = self._commands.literal_pieces(command)
        text = " ".join(words)
        if text:
            self._command_text(node, text)
        script = encoded_command(words)
        if script:
            self._command_text(node, script)
        program = PurePosixPath(words[0]).name.lower() if words else ""
        head = (
            command.elts[0] if isinstance(command, ast.List | ast.Tuple) and command.elts else None
        )
        if head is not None and "sys.executable" in flow.resolve(head):
            program = "python"
        if program.startswith(PYTHONS) and "-c" in words[:-1]:
            self._code_string(node, f"{api}({program} -c ...)", words[words.index("-c") + 1])
        elif program.startswith(PYTHONS) and all(w.startswith("-") for w in words[1:]):
            # python (or python -) reading its program from standard input
            for source in self._stdin_sources(node):
                value = flow.evaluate(source)
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                if isinstance(value, str):
                    self._code_string(node, f"{api}({program} < source)", value)
        # at install time, or when a package is imported (module level of an __init__.py),
        # or a URL at module level anywhere but a test: another package pulled in behind
        # the resolver (a benchmark script pip-installing the library it measures is not)
        import_time = flow.scope(node) == 0 and not _test_file(self._scan.file)
        pulled = import_time and (
            self._scan.file.rsplit("/", 1)[-1] == "__init__.py"
            or any("://" in w or w.startswith("git+") for w in words)
        )
        if (self._scan.installer or pulled) and _installs_other(words):
            self._scan.emit("CPL-THR-019", f"{api}(... pip install ...)", line, col)
        if recon and (program in NETWORK_PROGRAMS or any(w in NETWORK_PROGRAMS for w in words)):
            shown = program or next(w for w in words if w in NETWORK_PROGRAMS)
            self._scan.emit(
                "CPL-THR-017", f"{', '.join(recon)} sent by {api}({shown} ...)", line, col
            )

    def _command_text(self, node: ast.Call, text: str) -> None:
        """A command's known text: a download piped to a shell in it is run, not shown."""
        for indicator in indicator_set().matches(text):
            if indicator.kind is IndicatorKind.DOWNLOAD_EXEC:
                self._scan.emit("CPL-THR-015", shorten(text), node.lineno, node.col_offset)
            elif indicator.kind in {IndicatorKind.NETWORK_PIPE, IndicatorKind.REVERSE_SHELL}:
                self._scan.indicators(text, node.lineno, node.col_offset)

    def _by_source(self, node: ast.Call, api: str, labels: Labels) -> None:
        sources = {s for s, _ in labels}
        # One detail per source, chosen the same way in every process: labels is a set,
        # whose order follows str hashing (PYTHONHASHSEED), and a finding's text must not
        # (a scan fanned out on Dask was compared with a local one and differed). A
        # qualified name ("base64.b64decode") is preferred over a bare method (".decode()").
        detail = dict(sorted(labels, key=lambda label: (not label[1].startswith("."), label[1])))
        if Source.DECODED in sources:
            self._scan.emit(
                "CPL-THR-001", f"{api} of {detail[Source.DECODED]}", node.lineno, node.col_offset
            )
        if Source.REMOTE in sources:
            self._scan.emit(
                "CPL-THR-020", f"{api} of {detail[Source.REMOTE]}", node.lineno, node.col_offset
            )
        elif Source.DOWNLOADED in sources:
            self._scan.emit(
                "CPL-THR-002", f"{api} of {detail[Source.DOWNLOADED]}", node.lineno, node.col_offset
            )

    def _egress(self, node: ast.Call, api: str) -> None:
        flow = self._flow
        payload = [
            *node.args,
            *(k.value for k in node.keywords if k.arg not in NON_PAYLOAD_KEYWORDS),
        ]
        labels: set[tuple[Source, str]] = set()
        for arg in payload:
            labels |= flow.labels(arg)
        sources = {s for s, _ in labels}
        line, col = node.lineno, node.col_offset
        if Source.ENVIRONMENT in sources:
            self._scan.emit("CPL-THR-006", f"the environment sent by {api}", line, col)
        secrets = sorted({d for s, d in labels if s is Source.SECRET})
        if len(secrets) >= 2:
            # one token per provider, sent to it, is authentication; several
            # gathered for a host written into the code is collection
            self._secret_egress.append((node, ", ".join(secrets), api))
        credentials = sorted(d for s, d in labels if s is Source.CREDENTIAL)
        if credentials:
            self._scan.emit("CPL-THR-007", f"{', '.join(credentials)} sent by {api}", line, col)
        if Source.RECON in sources:
            self._recon_egress.append((node, frozenset(labels), api))
        self._handed_credentials(node, api, payload)

    def _handed_credentials(self, node: ast.Call, api: str, payload: list[ast.expr]) -> None:
        """Credentials a function of this file is handed (its parameters ``password``,
        ``pkey``...) sent by it to an ``http://`` or raw-IP address written in the call."""
        destination = self._flow.name_value(node.args[0]) if node.args else None
        if destination is None:
            url = next((k.value for k in node.keywords if k.arg == "url"), None)
            destination = self._flow.name_value(url) if url is not None else None
        if not destination or not _CLEARTEXT_DESTINATION.match(destination.encode()):
            return
        if _LOCAL_ADDRESS.search(b"//" + destination.encode().split(b"//", 1)[-1]):
            return
        params = self._parameters(node)
        if not params:
            return
        # the payload's names, and the values a local name of it was given (two steps)
        names: set[str] = set()
        stack: list[tuple[ast.AST, int]] = [(arg, 0) for arg in payload]
        while stack and len(names) < 64:
            item, step = stack.pop()
            for n in ast.walk(item):
                if isinstance(n, ast.Name) and n.id not in names:
                    names.add(n.id)
                    if step < 2 and n.id not in params:
                        bound = self._flow.bindings.assigned.get(n.id, ())[:4]
                        stack.extend((value, step + 1) for value in bound)
        handed = sorted(n for n in names & params if _CREDENTIAL_NAME.search(n))
        if handed:
            self._scan.emit(
                "CPL-THR-026",
                f"{', '.join(handed)} sent by {api} to {shorten(destination)}",
                node.lineno,
                node.col_offset,
            )

    def _parameters(self, node: ast.AST) -> set[str]:
        """The parameter names of the function ``node`` is in (empty at module level)."""
        scope = self._flow.scope(node)
        if not scope:
            return set()
        for fn in self._flow.bindings.functions:
            if id(fn) == scope:
                a = fn.args
                return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        return set()

    def _dns(self, node: ast.Call, host: ast.expr) -> None:
        labels = self._flow.labels(host)
        recon = sorted(
            d for s, d in labels if s in {Source.RECON, Source.SECRET, Source.CREDENTIAL}
        )
        if recon and self._tags.has_domain(host):
            api = min(self._flow.resolve(node.func), default="a name lookup")
            self._scan.emit(
                "CPL-THR-017",
                f"{', '.join(recon)} in a DNS query ({api})",
                node.lineno,
                node.col_offset,
            )

    def _code_string(self, node: ast.Call, api: str, text: str) -> None:
        """Python source about to run: its threats, and whether it can do harm at all."""
        findings = self._nested_scan(text, node.lineno)
        self._adopt_threats(findings, node)
        capable = sorted({f.rule_id for f in findings if _capable(f.rule_id, text)})
        if capable:
            self._scan.emit(
                "CPL-THR-016",
                f"{api} ({', '.join(capable[:4])} inside)",
                node.lineno,
                node.col_offset,
            )

    def _write_then_run(self) -> None:
        """A file written by this file and then started by it."""
        if not (self._runs and self._writes):
            return
        for run_keys, node, api in self._runs:
            keys = self._through_parameters(run_keys, node)
            for write in self._writes:
                shared = keys & self._through_parameters(write.keys, write.node)
                if not shared:
                    continue
                labels = set(write.labels)
                for data in write.data:
                    labels |= self._flow.labels(data)
                    value = self._flow.evaluate(data)
                    if isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    if isinstance(value, str) and self._looks_like_code(value):
                        self._code_string(node, f"{api} of a file written from a string", value)
                if write.handle is not None:
                    labels |= self._flow.name_labels(write.handle, write.scope)
                    written = self._flow.contributed.get(write.handle, {}).get(write.scope, ())
                    for data in written[:8]:
                        value = self._flow.evaluate(data)
                        if isinstance(value, bytes):
                            value = value.decode("utf-8", "replace")
                        if isinstance(value, str) and self._looks_like_code(value):
                            self._code_string(node, f"{api} of a file written from a string", value)
                name = sorted(shared)[0]
                self._by_source(node, f"{api}({name}) after writing it", frozenset(labels))
                if write.copied and any(s is Source.PACKAGED for s, _ in labels):
                    self._scan.emit("CPL-THR-018", f"{api}({name})", node.lineno, node.col_offset)

    # -- helpers ------------------------------------------------------------------------------

    def _through_parameters(self, keys: frozenset[str], node: ast.AST) -> frozenset[str]:
        """``keys`` and, for each that is a parameter of the function ``node`` is in, the
        names its callers pass (``safe_download(url, file=path)`` writes ``path``)."""
        scope = self._flow.scope(node)
        passed = self._flow.passed_arguments().get(scope) if scope else None
        if not passed:
            return keys
        out = set(keys)
        for key in keys:
            args = passed.get(key, ())[:8]
            if args:
                out.discard(key)  # the parameter is what its callers pass, not its name
            for arg in args:
                out |= self._commands.keys(arg)
        return frozenset(out)

    def _write(
        self,
        node: ast.Call,
        path: ast.AST,
        data: tuple[ast.expr, ...],
        labels: set[tuple[Source, str]],
        *,
        copied: bool = False,
    ) -> None:
        keys = set(self._commands.keys(path)) - self._commands.modules()
        handle = self._handle_of(node)
        if handle is not None:
            keys.add(handle)
        parent_write = self._direct_write(node)
        if parent_write is not None:
            data = (*data, parent_write)
        scope = self._flow.scope(node)
        self._writes.append(
            _Write(frozenset(keys), data, frozenset(labels), node, path, handle, scope, copied)
        )
        self._pending.append(lambda: self._pth_written(node, path, data, handle, scope))

    def _pth_written(
        self,
        node: ast.Call,
        path: ast.AST,
        data: tuple[ast.expr, ...],
        handle: str | None,
        scope: int,
    ) -> None:
        text = self._flow.name_value(path) or ""
        pieces = [
            c.value
            for c in ast.walk(path)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        ]
        if not (text.endswith(".pth") or any(p.endswith(".pth") for p in pieces)):
            return
        items = list(data)
        if handle is not None:
            bound = self._flow.contributed.get(handle, {})
            items.extend(bound.get(scope, ()))
        for item in items:
            value = self._flow.evaluate(item)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if not isinstance(value, str):
                continue
            for line in value.splitlines():
                if line.startswith(("import ", "import\t")):
                    findings = self._nested_scan(line, node.lineno)
                    if any(
                        _capable(f.rule_id, line) or rule(f.rule_id).family is RuleFamily.PROCESS
                        for f in findings
                    ):
                        self._scan.emit(
                            "CPL-THR-013",
                            "a .pth file written by this code",
                            node.lineno,
                            node.col_offset,
                        )
                        return

    def _handle_of(self, node: ast.Call) -> str | None:
        """The name a file object from ``open(...)`` is bound to (``as f``, ``f = ...``)."""
        for name, values in self._flow.bindings.assigned.items():
            if any(v is node for v in values):
                return name
        return None

    def _direct_write(self, node: ast.Call) -> ast.expr | None:
        """``open(p, "w").write(data)``: the data (the call is its receiver)."""
        if self._by_receiver is None:
            self._by_receiver = {
                id(n.func.value): n.args[0]
                for n in self._flow.nodes
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in {"write", "writelines"}
                and isinstance(n.func.value, ast.Call)
                and n.args
            }
        return self._by_receiver.get(id(node))

    def _disguised_copy(self, source: ast.AST, target: ast.AST) -> bool:
        """A copy that becomes a program: to ``.exe`` and the like, or under another extension."""
        src = PurePosixPath(self._flow.path_text(source) or "").suffix.lower()
        dst = PurePosixPath(self._flow.path_text(target) or "").suffix.lower()
        return dst in _PROGRAM_SUFFIXES or bool(src and dst and src != dst)

    def _installs(self, node: ast.Call) -> bool:
        """``pip.main(["install", ...])`` (or ``args=``): an install, not pip's own entry
        point; the list may be filled after it is made (``a = []; a.append("install")``)."""
        flow = self._flow
        pending: list[ast.expr] = [*node.args, *(k.value for k in node.keywords)]
        seen: set[str] = set()
        while pending:
            arg = pending.pop()
            value = flow.evaluate(arg)
            if isinstance(value, list) and "install" in value:
                return True
            if isinstance(arg, ast.List | ast.Tuple) and any(
                flow.name_value(e) == "install" for e in arg.elts
            ):
                return True
            if isinstance(arg, ast.Name) and arg.id not in seen and len(seen) < 8:
                seen.add(arg.id)
                pending.extend(flow.bindings.assigned.get(arg.id, ()))
                given = flow.contributed.get(arg.id, {}).values()
                if any(flow.name_value(v) == "install" for vs in given for v in vs):
                    return True
        return False

    def _decoded(self, node: ast.AST) -> bool:
        return any(s is Source.DECODED for s, _ in self._flow.labels(node))

    def _computed_name(
        self, node: ast.Call, name: ast.expr, owner: ast.expr | None, attr: str | None = None
    ) -> None:
        """A lookup by a name computed from literals (or decoded): what it hides."""
        if isinstance(name, ast.Constant):
            return
        flow = self._flow
        if attr is None:
            attr = flow.name_value(name)
        if owner is None:  # operator.attrgetter(name)
            if attr is not None and (
                f"os.{attr}" in API_RULES
                or f"subprocess.{attr}" in API_RULES
                or f"builtins.{attr}" in API_RULES
            ):
                self._scan.emit(
                    "CPL-THR-003",
                    f"attrgetter({attr!r} built from pieces)",
                    node.lineno,
                    node.col_offset,
                )
            return
        owners = flow.resolve(owner)
        builtin_owner = not _BUILTIN_OWNERS.isdisjoint(owners) or (
            isinstance(owner, ast.Name | ast.Attribute)
            and (owner.id if isinstance(owner, ast.Name) else owner.attr) == "__builtins__"
        )
        # getattr(builtins, name) with a variable is what pydoc, inspect and
        # subprocess do; a name computed from literals or decoded inline is
        # what droppers do.
        # getattr(requests, "teg"[::-1]): a network, process or native-code module
        # looked up by a name spelled so that no reader sees it (os.O_BINARY is not)
        watched = builtin_owner or any(o in MODULE_RULES and flow.of_import(o) for o in owners)
        if attr is None:
            shown = "builtins" if builtin_owner else next(iter(owners), "")
            if watched and self._decoded(name):
                self._scan.emit(
                    "CPL-THR-003", f"getattr({shown}, <decoded name>)", node.lineno, node.col_offset
                )
            elif watched and flow.closed(name):
                self._scan.emit(
                    "CPL-THR-003",
                    f"getattr({shown}, <name computed from literals>)",
                    node.lineno,
                    node.col_offset,
                )
        elif (
            builtin_owner
            or (watched and not attr.isupper() and not flow.plain(name))
            or any(_worth_hiding(f"{o}.{attr}") for o in owners)
        ):
            self._scan.emit(
                "CPL-THR-003",
                f"getattr(..., {attr!r} built from pieces)",
                node.lineno,
                node.col_offset,
            )

    def _looks_like_code(self, text: str) -> bool:
        return (
            self._scan.nested is not None
            and self._scan.depth < _MAX_NESTED_DEPTH
            and 12 <= len(text) <= _MAX_NESTED_TEXT
            and _CODE_HINT.search(text.encode("utf-8", "surrogatepass")) is not None
        )

    def _nested_scan(self, text: str, line: int) -> list[Finding]:
        cached = self._nested.get(text)
        if cached is not None:
            return cached
        nested = self._scan.nested
        found = (
            []
            if nested is None or self._scan.depth >= _MAX_NESTED_DEPTH
            else nested(text, line, self._scan.depth + 1)
        )
        self._nested[text] = found
        return found

    def _adopt_threats(self, findings: list[Finding], node: ast.AST) -> None:
        for f in findings:
            if rule(f.rule_id).kind is RuleKind.THREAT:
                self._scan.adopt(f, getattr(node, "lineno", 0), getattr(node, "col_offset", None))
