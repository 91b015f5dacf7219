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
from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePosixPath

from caplet._findings import Finding
from caplet._scan._bytecode_caches import BYTECODE_COMPILERS, foreign_cache
from caplet._scan._commands import Commands, wrapped_programs
from caplet._scan._container_escape import command_escape, container_escapes
from caplet._scan._correlate import Tag
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow, Labels, is_network, secret_name
from caplet._scan._git_clones import cloned_and_run, cloned_folder
from caplet._scan._installer_network import import_time_egress
from caplet._scan._lookup_forms import attribute_lookup
from caplet._scan._rules import NAME_RESOLVERS
from caplet._scan._sink_commands import CommandSinks, launches_payload
from caplet._scan._sink_egress import BROWSER_OPENS, EgressSinks
from caplet._scan._sink_lookups import LookupSinks
from caplet._scan._sink_packaged import DLL_LOADERS, PackagedSinks
from caplet._scan._sink_pip import PipSinks
from caplet._scan._sink_runners import RunnerSinks
from caplet._scan._sink_shortcuts import shortcut_hijacks
from caplet._scan._sink_stages import CRON_JOBS, Write
from caplet._scan._source_labels import remote_call
from caplet._scan._sources import (
    DNS_FUNCTIONS,
    DNS_METHODS,
    EGRESS_VERBS,
    EXECUTORS,
    PIP_MAINS,
    RUNS_FILE,
    SHELLS,
    Source,
)
from caplet._scan._tags import Tagger

__all__ = ["Sinks"]

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
#: Calls that copy a file (source first, destination second).
_COPIES = frozenset(
    # a folder copied too: an extension planted in an editor's extensions folder (blind18)
    {
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
        "shutil.copytree",
        "shutil.move",
        "os.rename",
    }
)
#: Calls that download to a file (URL first, destination second).
_DOWNLOADS_TO = frozenset({"urllib.request.urlretrieve", "urllib.urlretrieve", "wget.download"})
#: Calls that load a pickle (loading one runs the callables it names).
_UNPICKLERS = frozenset(
    {"pickle.loads", "_pickle.loads", "dill.loads", "cloudpickle.loads", "marshal.loads"}
)
#: Calls that create a temporary file open for writing (its ``.name`` is run later).
_TEMPORARY_FILES = frozenset({"tempfile.NamedTemporaryFile", "tempfile.TemporaryFile"})

#: runpy's runners: given pip (and an install in ``sys.argv``) they are pip's command line.
_RUNPY = frozenset({"runpy.run_module", "runpy.run_path", "runpy._run_module_as_main"})


#: Loaders of compiled bytecode from a file (what fshec2 ran its payload with).
_BYTECODE_LOADERS = frozenset(
    {"importlib.machinery.SourcelessFileLoader", "imp.load_compiled", "_imp.load_compiled"}
)

#: Calls that make a module of a source file by its path (the second argument), run when
#: the module is executed: a stage written to a temporary .py and imported (blind31).
_MODULE_FROM_FILE = frozenset(
    {
        "importlib.util.spec_from_file_location",
        "importlib.machinery.SourceFileLoader",
        "importlib._bootstrap_external.SourceFileLoader",
    }
)
_LOCATION = frozenset({"location", "path"})


#: The names some check of ``Sinks._named_sinks`` looks for (besides the network calls).
_SINK_NAMES = (
    DNS_FUNCTIONS
    | EXECUTORS
    | RUNS_FILE
    | PIP_MAINS
    | _TEMPORARY_FILES
    | _UNPICKLERS
    | _DOWNLOADS_TO
    | _COPIES
    | _RUNPY
    | _BYTECODE_LOADERS
    | _MODULE_FROM_FILE
    | BYTECODE_COMPILERS
    | {"builtins.setattr"}
    | CRON_JOBS
    | BROWSER_OPENS
    | {
        "builtins.eval",
        *NAME_RESOLVERS,
        "importlib.util.spec_from_file_location",
        "operator.attrgetter",
        "operator.methodcaller",
        # blind8: a file written through its descriptor, an archive unpacked into a folder
        "os.write",
        "shutil.unpack_archive",
    }
)


def _download_target(node: ast.Call) -> ast.expr | None:
    """Where a downloader of :data:`_DOWNLOADS_TO` writes: its second argument, or the
    keyword naming it (``urlretrieve(url, filename=p)``, ``wget.download(url, out=p)``:
    a keyword hid a download then run, recall10)."""
    if len(node.args) >= 2:
        return node.args[1]
    return next((k.value for k in node.keywords if k.arg in {"filename", "out"}), None)


def _sftp_get(api: str) -> bool:
    """paramiko's SFTP client's ``get(remote, local)``: a download to a file (blind16:
    b16-dr-sftp-get-run, a program fetched over SFTP and started)."""
    return api.startswith("paramiko.") and api.endswith(".get")


def _executable(flow: Flow, prot: ast.expr) -> bool:
    """A protection that has ``PROT_EXEC`` (4) set, as an int or wrapped in a ctypes
    constructor (``ctypes.c_int(7)``)."""
    if isinstance(prot, ast.Call) and len(prot.args) == 1:
        prot = prot.args[0]
    value = flow.evaluate(prot)
    return isinstance(value, int) and bool(value & 4)


class Sinks(LookupSinks, EgressSinks, CommandSinks, PipSinks, RunnerSinks, PackagedSinks):
    """The threat sinks of one file (see the module docstring)."""

    def __init__(self, scan: FileScan, flow: Flow) -> None:
        self._scan = scan
        self._flow = flow
        self._pending: list[Callable[[], None]] = []
        self._synthetic: list[ast.AST] = []
        self._writes: list[Write] = []
        self._handles: dict[str, ast.AST] = {}
        self._runs: list[tuple[frozenset[str], ast.Call, str]] = []
        self._fixed_destination = False
        self._recon_egress: list[tuple[ast.Call, Labels, str]] = []
        self._document_egress: list[tuple[ast.Call, str, str]] = []
        self._secret_egress: list[tuple[ast.Call, str, str]] = []
        self._nested: dict[str, list[Finding]] = {}
        self._patches: list[tuple[ast.AST, str, list[ast.AST]]] = []
        self._by_receiver: dict[int, ast.expr] | None = None
        self._commands = Commands(flow)
        self._tags = Tagger(scan, flow)

    # -- what the visitor hands over ------------------------------------------------------

    @staticmethod
    def named(funcs: tuple[str, ...]) -> bool:
        """Whether a call of ``funcs`` is one :meth:`_named_sinks` checks."""
        return not _SINK_NAMES.isdisjoint(funcs) or any(is_network(f) for f in funcs)

    def path_chain(self, node: ast.BinOp) -> None:
        """A pathlib path joined by ``/``, its pieces read by the indicators (mend19)."""
        self._tags.path_chain(node)

    def call(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """Every call: tags for the chains, and the sinks it may be."""
        flow = self._flow
        if node.args or node.keywords:
            self._tags.environ_dump(node, funcs)
            self._tags.fixed_endpoint(node, funcs)
            self._tags.joined_path(node, funcs)
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else ""
        if "builtins.setattr" in funcs and len(node.args) == 3:
            self.builtins_store(node)
        if node.args:
            self.lookup_call(node, funcs)
        self.code_runners(node, funcs, method)  # exec by other names (blind16)
        if self.named(funcs):
            self._named_sinks(node, funcs, method)
        elif (
            isinstance(func, ast.Attribute)
            and method in {"write_bytes", "write_text"}
            and node.args
        ):
            # the one check of _named_sinks that needs no name: the only one left to make
            # for the calls of nothing it looks for, most calls (issue 16's speed)
            self._write(node, func.value, (node.args[0],), set())
        if self._scan.installer and node.args and self._loaded_installs(node):
            self._scan.emit(
                "CPL-THR-019", "a loaded entry point (pip install)", node.lineno, node.col_offset
            )
        if (
            isinstance(func, ast.Attribute)
            and method in {"insert", "append"}
            and node.args
            and "sys.path" in flow.resolve(func.value)
        ):
            # sys.path.insert(0, d): a module written into d is run by the next import of
            # it, as a script is by its start (blind35, b35-ls-temp-module-import)
            self._runs.append((self._commands.keys(node.args[-1]), node, "sys.path." + method))
        if method in {"extractall", "extract"}:
            self.extracted(node, funcs, method)  # blind8: an archive unpacked, files written
        if (func.id if isinstance(func, ast.Name) else method) == "__pyarmor__" and any(
            isinstance(a, ast.Constant) and isinstance(a.value, bytes) for a in node.args
        ):
            # PyArmor's runtime given the module's encrypted bytecode: code run without
            # its source, as a .pyc loader runs it (blind13)
            self._scan.emit("CPL-THR-027", "__pyarmor__(...)", node.lineno, node.col_offset)
        if method == "mprotect" and len(node.args) >= 3 and _executable(flow, node.args[2]):
            # libc.mprotect(page, size, 7) through ctypes: a buffer made executable, which
            # only a shellcode loader needs (blind35, b35-ot-mprotect-ctypes-buffer)
            self._scan.tag(Tag.EXEC_MEMORY, node.lineno, "mprotect(..., PROT_EXEC)")
        if method in DNS_METHODS and node.args and DNS_FUNCTIONS.isdisjoint(funcs):
            # loop.getaddrinfo(name, port): asyncio's resolver, its receiver no network object
            self._pending.append(lambda: self._dns(node, node.args[0]))
        if method == "__getattribute__" and (looked := attribute_lookup(node, flow.resolve)):
            # X.__getattribute__(k) and object.__getattribute__(X, k) are getattr(X, k):
            # the same rules, whatever the spelling (issue 16's mutation testing)
            self.computed_getattr(node, looked[0], looked[1], None)
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

    def _named_sinks(self, node: ast.Call, funcs: tuple[str, ...], method: str) -> None:
        """The sinks :meth:`call` finds by the names a call may denote (a network call,
        exec, a process started from a file, a copy, pip, a pickle, ...)."""
        flow = self._flow
        func = node.func
        # a connection, a socket address or a URL written into the code
        if (
            (node.args or node.keywords)
            and any(is_network(f) for f in funcs)
            and self._tags.literal_destination(node)
        ):
            self._fixed_destination = True
        network = [
            f
            for f in funcs
            if is_network(f) and (f.rsplit(".", 1)[-1] in EGRESS_VERBS or remote_call(f))
        ]
        if network:
            self._scan.tag(Tag.EGRESS, node.lineno, network[0])
            # at import of a module the installer imports: network at install (recall10)
            import_time_egress(self._scan, node, network[0], flow.scope(node))
            self._pending.append(lambda: self._egress(node, network[0]))
        if not DNS_FUNCTIONS.isdisjoint(funcs) and node.args:
            self._pending.append(lambda: self._dns(node, node.args[0]))
        if "builtins.setattr" in funcs:
            self.looped_setattr(node)
        if not BYTECODE_COMPILERS.isdisjoint(funcs):
            poisoned = foreign_cache(node, flow.resolve, flow.bindings.assigned)
            if poisoned is not None:  # another module's .pyc rewritten (blind17)
                self._scan.emit("CPL-THR-009", poisoned, node.lineno, node.col_offset)
        if node.args and not BROWSER_OPENS.isdisjoint(funcs):
            self.browser_opened(node, funcs)
        if not CRON_JOBS.isdisjoint(funcs):
            self.scheduled(node)
        if "builtins.eval" in funcs and len(node.args) == 1 and not node.keywords:
            self.computed_eval(node, node.args[0])
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
        if node.args and not RUNS_FILE.isdisjoint(funcs):
            api = next(f for f in funcs if f in RUNS_FILE)
            self._runs.append((self._commands.keys(node.args[0]), node, api))
        if not _MODULE_FROM_FILE.isdisjoint(funcs):
            # spec_from_file_location(name, path) / SourceFileLoader(name, path): the file at
            # path imported as a module is run, as runpy.run_path runs it (blind31)
            location = [*node.args[1:2], *(k.value for k in node.keywords if k.arg in _LOCATION)]
            if location:
                api = next(f for f in funcs if f in _MODULE_FROM_FILE)
                self._runs.append((self._commands.keys(location[0]), node, api))
        downloads = not _DOWNLOADS_TO.isdisjoint(funcs) or any(map(_sftp_get, funcs))
        if downloads and (target := _download_target(node)) is not None:
            self._write(node, target, (), {(Source.DOWNLOADED, funcs[0])})
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
        if "os.write" in funcs and len(node.args) >= 2:
            self.descriptor_written(node, node.args[0], node.args[1])
        if "shutil.unpack_archive" in funcs:
            self.extracted(node, funcs, method)
        if not NAME_RESOLVERS.isdisjoint(funcs) and node.args:
            # pkgutil.resolve_name("os:system"): an API named in a string, not in the code
            name = flow.name_value(node.args[0])
            api = min(NAME_RESOLVERS & set(funcs))
            self._hidden_lookup(node, flow.resolve(node), f"{api}({name!r})")
        if (
            not _RUNPY.isdisjoint(funcs)
            and node.args
            and self._runs_pip(node.args[0])
            and self._installs_argv()
        ):
            # sys.argv = ["pip", "install", X]; runpy.run_module("pip", run_name="__main__")
            api = next(f for f in funcs if f in _RUNPY)
            self._scan.emit(
                "CPL-THR-019", f"{api}(pip) with sys.argv", node.lineno, node.col_offset
            )
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

    def keep(self, node: ast.AST) -> None:
        """Keep a node a rule built alive while the file is checked (ids are memo keys)."""
        self._synthetic.append(node)

    def process(self, node: ast.Call, api: str, command: ast.expr) -> None:
        """A process call: tags for the chains, and what its command carries."""
        scan = self._scan
        line = node.lineno
        # Each site reads its command's text, several passes of it (attack25, left open:
        # one long constant run at many sites); counted against the file's read budget.
        text = self._flow.name_value(command)
        if text is not None:
            self._flow.shell.count_read(text)
        first: ast.AST = command
        if isinstance(command, ast.List | ast.Tuple) and command.elts:
            first = command.elts[0]
        if "sys.executable" in self._flow.resolve(first):
            scan.tag(Tag.PYTHON_RUN, line, "sys.executable")
        for value in self._tags.values(first):
            text = self._flow.name_value(value)
            if text and first is not command:
                # The program word of a list (or execv's): read whole here and by the rules
                # after (lowered, matched), so it counts as a command's text does (attack28).
                self._flow.shell.count_read(text)
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
                self._pending.append(lambda: self.piped_shell(node, command))
            if word in _INSTALL_TIME_PROGRAMS:
                scan.tag(Tag.DOWNLOADER, line, word)
        self._runs.append((self._commands.program_keys(command), node, api))
        self._pending.append(lambda: self._command(node, api, command))
        known = self._commands.words(command)
        words = known or self._commands.literal_pieces(command)
        for word in wrapped_programs(words):  # bash -c "curl ...": the wrapped downloader
            if word in _INSTALL_TIME_PROGRAMS:
                scan.tag(Tag.DOWNLOADER, line, word)
        if (ways := command_escape(words)) is not None:  # docker run --privileged -v /:/h
            scan.emit("CPL-THR-028", f"a container ({ways}) started by {api}", line, None)
        if (cloned := cloned_and_run(words)) is not None:  # git clone X d && python d/x.py
            scan.emit("CPL-THR-002", f"{api}(git clone into {cloned}, then from it)", line, None)
        folder = cloned_folder(command, known)
        if folder is not None:  # git clone: a folder written from the network (recall17)
            self.keep(folder)
            self._write(node, folder, (), {(Source.DOWNLOADED, "git clone")})
            self._writes[-1] = replace(self._writes[-1], folder=True)
        loader = PurePosixPath(words[0].replace("\\", "/")).name.lower() if words else ""
        if loader in DLL_LOADERS:
            self._pending.append(lambda: self._dll_loaded(node, api, command, loader))

    def opened_for_writing(self, node: ast.Call, path: ast.AST) -> None:
        """``open(path, "w")``: the file's handle, if named, carries what is written."""
        self._write(node, path, (), set())

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
        for node in shortcut_hijacks(self._flow):
            self._scan.emit(
                "CPL-THR-009",
                "a browser shortcut rewritten with --load-extension",
                getattr(node, "lineno", 0),
                getattr(node, "col_offset", 0),
            )
        for node, ways in container_escapes(self._flow, self._scan.text):
            line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
            self._scan.emit("CPL-THR-028", f"a container ({ways})", line, col)
        if self._patches:
            self._patch_check()
        fixed = self._fixed_destination or Tag.FIXED_ENDPOINT in self._scan.tags
        for node, names, api in self._secret_egress:
            if fixed:
                self._scan.emit(
                    "CPL-THR-006", f"{names} sent by {api}", node.lineno, node.col_offset
                )
        for node, folder, api in self._document_egress:
            if fixed:
                # the user's files sent to a host written into the code
                self._scan.emit(
                    "CPL-THR-007",
                    f"the user's {folder} files sent by {api}",
                    node.lineno,
                    node.col_offset,
                )
        for node, labels, api in self._recon_egress:
            if fixed:
                what = ", ".join(sorted({d for s, d in labels if s is Source.RECON}))
                self._scan.emit(
                    "CPL-THR-017", f"{what} sent by {api}", node.lineno, node.col_offset
                )

    def _read_back(self, arg: ast.expr) -> ast.expr | None:
        """The path of ``open(p).read()`` or ``Path(p).read_text()`` (what exec is given),
        also bound to a name first (``code = p.read_text(); exec(code)``, recall18)."""
        named = isinstance(arg, ast.Name)
        if isinstance(arg, ast.Name):
            bound = self._flow.bindings.assigned.get(arg.id, ())
            if len(bound) != 1:
                return None
            arg = bound[0]
        if not (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)):
            return None
        receiver = arg.func.value
        if arg.func.attr in {"read_text", "read_bytes"}:
            return receiver
        opened = isinstance(receiver, ast.Call) and receiver.args
        if arg.func.attr == "read" and isinstance(receiver, ast.Call) and opened:
            openers = {"builtins.open", "io.open", "codecs.open"}
            return receiver.args[0] if openers & set(self._flow.resolve(receiver.func)) else None
        return None if named else self._read_by_library(arg)

    def _read_by_library(self, arg: ast.Call) -> ast.expr | None:
        """The path a library's reader is given when exec runs what it returns
        (``exec(lsb.reveal(path))``: text hidden in an image the code downloaded there,
        blind17's b17-np-judyb-lsb-reveal): the file is run as a read-back one is. A
        builtin's argument is no such path (``compile(src, name, "exec")``)."""
        if not arg.args or not isinstance(arg.args[0], ast.Name | ast.Attribute | ast.Constant):
            return None
        funcs = self._flow.resolve(arg.func)
        if not funcs or any(f.startswith("builtins.") for f in funcs):
            return None
        return arg.args[0]

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
        elif value is None:
            self.stored_code(node, executor, arg)
