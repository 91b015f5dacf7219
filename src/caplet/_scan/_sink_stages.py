"""Threat sinks of second stages: files written and then run (a program, a native library,
a file read back into exec, a .pth start-up hook), and Python source kept in a string that is
run (scanned as code, bounded), with the sources the run data carries (decoded, downloaded,
remote).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Final

import re2

from caplet._findings import Finding
from caplet._scan._commands import Commands
from caplet._scan._config_factories import FILE_LOADERS, file_config_source
from caplet._scan._correlate import Tag
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow, Labels
from caplet._scan._git_clones import runs_from_inside, starts_under
from caplet._scan._rewritten_commands import command_found_on_path
from caplet._scan._rules import RuleKind, rule
from caplet._scan._shell_scripts import script_payload
from caplet._scan._sink_startup import (
    MAX_NESTED_TEXT,
    SHELL_STARTUP,
    StartupSinks,
    capable_finding,
)
from caplet._scan._source_labels import SHIPPED_DATABASE
from caplet._scan._sources import Source
from caplet._scan._tags import Tagger

__all__ = ["CRON_JOBS", "StageSinks", "Write"]


#: A job added to a crontab (python-crontab), whose command cron runs.
CRON_JOBS: Final = frozenset({"crontab.CronTab().new"})


#: What a Windows program file is called.
_PROGRAM_SUFFIXES = frozenset(
    {".exe", ".scr", ".bat", ".cmd", ".ps1", ".vbs", ".js", ".msi", ".com", ".pif", ".hta"}
)


#: A string worth scanning as Python: a statement keyword or a call that matters.
_CODE_HINT: Final = re2.compile(
    rb"(?m)(?:^|;)\s*(?:import|from)\s+[\w.]+|\b(?:exec|eval|compile|__import__|system|popen|"
    rb"Popen|socket|urlopen|getattr)\s*\("
)


#: How deep strings inside strings are followed.
_MAX_NESTED_DEPTH = 3


#: Calls that unpack an archive file into a folder (archive first, folder second).
_UNPACKERS = frozenset({"shutil.unpack_archive"})
#: Calls that open an archive whose ``extractall``/``extract`` writes files.
_ARCHIVE_OPENERS = frozenset(
    {
        "zipfile.ZipFile",
        "zipfile.PyZipFile",
        "tarfile.open",
        "tarfile.TarFile",
        "tarfile.TarFile.open",
        "py7zr.SevenZipFile",
        "rarfile.RarFile",
    }
)
#: Calls that join a path under a folder.
_PATH_JOINS = frozenset(
    {"os.path.join", "posixpath.join", "ntpath.join", "pathlib.Path", "pathlib.PurePath"}
)


#: What an import finds in a folder on ``sys.path``: a module's source, bytecode or build.
_MODULE_SUFFIXES = (".py", ".pyw", ".pyc", ".so", ".pyd")


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


@dataclass(frozen=True, slots=True)
class Write:
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
    #: A folder an archive is unpacked into: every path joined under it is written.
    folder: bool = False


#: Write-run pairs one file may judge (tens of microseconds each; corpora need < 1,000).
WRITE_RUN_PAIRS: Final = 100_000


class StagePairsError(Exception):
    """A file's writes and runs make more pairs than :data:`WRITE_RUN_PAIRS` to judge."""

    def __init__(self, budget: int) -> None:
        super().__init__(
            f"its file writes and program runs make more than {budget} pairs to judge"
            " (no real file holds a fraction of that): not checked; write and start"
            " fewer files, or each under a name of its own"
        )


class StageSinks(StartupSinks):
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _writes: list[Write]
    _handles: dict[str, ast.AST]
    _runs: list[tuple[frozenset[str], ast.Call, str]]
    _nested: dict[str, list[Finding]]
    _commands: Commands
    _pending: list[Callable[[], None]]
    _by_receiver: dict[int, ast.expr] | None
    _tags: Tagger

    def _code_string(self, node: ast.Call, api: str, text: str) -> None:
        """Python source about to run: its threats, and whether it can do harm at all."""
        findings = self._nested_scan(text, node.lineno)
        self._adopt_threats(findings, node)
        capable = sorted({f.rule_id for f in findings if capable_finding(f.rule_id, text)})
        if capable:
            self._scan.emit(
                "CPL-THR-016",
                f"{api} ({', '.join(capable[:4])} inside)",
                node.lineno,
                node.col_offset,
            )

    def _write_then_run(self) -> None:
        """A file written by this file and then started by it. Each run meets, in their
        order, the writes sharing a name with it (an index) and the folder writes: every
        run against every write was their product (scandos37: 4,000 distinct downloads
        and runs, 400 kB, 18 s). Runs meeting many writes (one path written and run 1,000
        times: 57 kB, 27 s) are bounded by :data:`WRITE_RUN_PAIRS` (too complex past it)."""
        if not (self._runs and self._writes):
            return
        written = [self._through_parameters(w.keys, w.node) for w in self._writes]
        index: dict[str, list[int]] = {}
        for at, written_keys in enumerate(written):
            for key in written_keys:
                index.setdefault(key, []).append(at)
        folders = [at for at, write in enumerate(self._writes) if write.folder]
        pairs = 0
        for run_keys, node, api in self._runs:
            if api.startswith("sys.path."):
                continue  # pairs found through an index below (attack36)
            keys = self._through_parameters(run_keys, node)
            met = sorted({at for key in keys for at in index.get(key, ())}.union(folders))
            pairs += len(met)
            if pairs > WRITE_RUN_PAIRS:
                raise StagePairsError(WRITE_RUN_PAIRS)
            for at in met:
                write, written_keys = self._writes[at], written[at]
                shared = keys & written_keys
                if not shared and write.folder:
                    shared = self._run_under(node, keys, written_keys, write.path)
                if shared:
                    self._written_and_run(node, api, write, shared)
        self._modules_put_on_path()

    def _modules_put_on_path(self) -> None:
        """A module written into a folder put on ``sys.path`` (blind35); one the package
        copies there is its own, scanned as its own file.

        Each write's folders are read once, and each folder is judged at the first
        ``sys.path`` call that names it: every call against every write (each pair
        walking the write's path) took time in their product (attack36: 100 calls and
        1,000 writes of one folder, 8 s; a 2 MiB file of them, hours)."""
        under: dict[str, list[Write]] = {}
        folders: dict[int, frozenset[str]] = {}
        done: set[str] = set()
        for run_keys, node, api in self._runs:
            if not api.startswith("sys.path."):
                continue
            if not under and not folders:
                for write in self._writes:
                    folders[id(write)] = found = (
                        frozenset() if write.copied else self._module_folders(write)
                    )
                    for key in found:
                        under.setdefault(key, []).append(write)
            keys = self._through_parameters(run_keys, node) - done
            done |= keys
            reported: set[int] = set()
            for key in sorted(keys):
                for write in under.get(key, ()):
                    if id(write) not in reported:
                        reported.add(id(write))
                        self._written_and_run(node, api, write, keys & folders[id(write)])

    def _written_and_run(
        self, node: ast.Call, api: str, write: Write, shared: frozenset[str]
    ) -> None:
        """``write``'s file started by ``node`` (through ``shared``): what it was written
        with, as code or a script, and where its data came from."""
        labels = set(write.labels)
        if write.folder:
            labels |= self._archive_labels(write)
        for data in write.data:
            labels |= self._flow.labels(data)
            value = self._flow.evaluate(data)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if isinstance(value, str):
                self._written_text(node, api, value, write)
        if write.handle is not None:
            labels |= self._flow.name_labels(write.handle, write.scope)
            contributed = self._flow.contributed.get(write.handle, {}).get(write.scope, ())
            for data in contributed[:8]:
                value = self._flow.evaluate(data)
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                if isinstance(value, str):
                    self._written_text(node, api, value, write)
        name = sorted(shared)[0]
        self._by_source(node, f"{api}({name}) after writing it", frozenset(labels))
        if write.copied and any(s is Source.PACKAGED for s, _ in labels):
            self._scan.emit("CPL-THR-018", f"{api}({name})", node.lineno, node.col_offset)

    def _written_text(self, node: ast.Call, api: str, value: str, write: Write) -> None:
        """Text a file was written with, and the file then started: Python source is
        scanned as code; a script of another language (a VBScript or batch dropper kept
        in a string, started with ``wscript``/``cmd /c``) is read as a shipped script is,
        for a download it runs (branch blind14)."""
        if api in FILE_LOADERS:
            # an INI file fileConfig reads: the Python it evaluates (recall18)
            source = file_config_source(value[:MAX_NESTED_TEXT])
            if source is not None:
                self._code_string(node, f"{api} of a file written with handlers", source)
            return
        if self._looks_like_code(value):
            self._code_string(node, f"{api} of a file written from a string", value)
            return
        path = self._flow.path_text(write.path) if write.path is not None else None
        suffix = PurePosixPath((path or "").replace("\\", "/")).suffix.lower()
        found = script_payload(value[:MAX_NESTED_TEXT], suffix)
        if found is not None:
            self._scan.emit(
                "CPL-THR-015",
                f"{api} of a file written with a script ({found[1][:80]})",
                node.lineno,
                node.col_offset,
            )

    # -- blind8 (issue 16 point 1: writes and stored code a blind round found missed) --------

    def descriptor_written(self, node: ast.Call, descriptor: ast.expr, data: ast.expr) -> None:
        """``os.write(fd, data)``: the file ``fd`` was opened on is written. The path is the
        name ``mkstemp`` unpacked beside ``fd`` (``fd, path = mkstemp()``), or the path
        ``os.open`` was given: the descriptor is only the file's other name."""
        if not isinstance(descriptor, ast.Name):
            return
        flow = self._flow
        bindings = flow.bindings
        for value in bindings.assigned.get(descriptor.id, ())[:4]:
            funcs = flow.resolve(value.func) if isinstance(value, ast.Call) else ()
            if isinstance(value, ast.Call) and value.args and "os.open" in funcs:
                self._write(node, value.args[0], (data,), set())
            elif "os.memfd_create" in funcs:  # a file in memory, run as /proc/self/fd/N
                self._write(node, descriptor, (data,), set())
        for value, place, count in bindings.unpacked.get(descriptor.id, ())[:4]:
            if not (
                isinstance(value, ast.Call)
                and count == 2
                and place == 0
                and "tempfile.mkstemp" in flow.resolve(value.func)
            ):
                continue
            for name, entries in bindings.unpacked.items():
                if any(v is value and where == 1 for v, where, _ in entries):
                    path = ast.copy_location(ast.Name(name, ast.Load()), descriptor)
                    self._write(node, path, (data,), set())

    def extracted(self, node: ast.Call, funcs: tuple[str, ...], method: str) -> None:
        """An archive unpacked into a folder (``ZipFile(x).extractall(d)``,
        ``shutil.unpack_archive(f, d)``): every file under ``d`` is written from what the
        archive held, so a program joined under ``d`` and started is a file written then run."""
        flow = self._flow
        folder: ast.expr | None = None
        archive: ast.expr | None = None
        if not _UNPACKERS.isdisjoint(funcs):
            archive = node.args[0] if node.args else None
            folder = node.args[1] if len(node.args) >= 2 else _keyword(node, "extract_dir")
        elif method in {"extractall", "extract"} and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            made: list[ast.expr] = [receiver]
            if isinstance(receiver, ast.Name):
                made = list(flow.bindings.assigned.get(receiver.id, ())[:4])
            if not any(
                isinstance(m, ast.Call) and not _ARCHIVE_OPENERS.isdisjoint(flow.resolve(m.func))
                for m in made
            ):
                return
            archive = receiver
            place = 0 if method == "extractall" else 1
            folder = node.args[place] if len(node.args) > place else _keyword(node, "path")
        if folder is None or archive is None:
            return
        self._write(node, folder, (archive,), set())
        self._writes[-1] = replace(self._writes[-1], folder=True)

    def _archive_labels(self, folder: Write) -> set[tuple[Source, str]]:
        """What the archive unpacked into ``folder`` was written from, when it is a file
        this code wrote (``urlretrieve(URL, a)`` then ``unpack_archive(a, d)``)."""
        archive = frozenset().union(*(self._commands.keys(d) for d in folder.data))
        labels: set[tuple[Source, str]] = set()
        for other in self._writes:
            if other is not folder and not other.folder and other.keys & archive:
                labels |= other.labels
                for data in other.data:
                    labels |= self._flow.labels(data)
                if other.handle is not None:
                    # with open(a, "wb") as f: f.write(urlopen(URL).read()): what the
                    # handle was given (blind37), as _written_and_run reads it
                    labels |= self._flow.name_labels(other.handle, other.scope)
        return labels

    def _run_under(
        self,
        node: ast.Call,
        keys: frozenset[str],
        folder: frozenset[str],
        path: ast.AST | None = None,
    ) -> frozenset[str]:
        """The folder's names that the program ``node`` starts is joined under: in the call
        itself (``run([join(d, "x.exe")])``), bound to a name it runs, or walked by the loop
        that binds it (``for exe in glob(join(d, "*.exe"))``, blind13). recall18: or a
        literal path under a literal folder (``git clone URL`` then ``helpers/x.py``), or
        the folder is the run's working directory and the run starts its code
        (``run([sys.executable, "x.py"], cwd=d)``)."""
        flow = self._flow
        words = self._run_words(node)
        cwd = next((k.value for k in node.keywords if k.arg == "cwd"), None)
        inside = self._commands.keys(cwd) & folder if cwd is not None else frozenset()
        if inside and words and runs_from_inside(words):
            return inside
        literal = path.value if isinstance(path, ast.Constant) else None
        if isinstance(literal, str) and words and starts_under(literal, words):
            return folder
        joins: list[ast.AST] = [node]
        for key in sorted(keys)[:8]:
            joins.extend(flow.bindings.assigned.get(key, ())[:4])
            joins.extend(flow.bindings.iterated.get(key, ())[:4])
        for head in self._join_heads(joins):
            if under := self._commands.keys(head) & folder:
                return under
        return frozenset()

    def _module_folders(self, write: Write) -> frozenset[str]:
        """The names of the folders the written file's path is joined under (``d / "m.py"``,
        ``os.path.join(d, "m.py")``, or a name bound to either), when a literal piece of
        the path names a module: a folder put on ``sys.path`` runs it when imported;
        data beside it (an image, an egg a bootstrap script fetches) is not imported."""
        flow = self._flow
        roots: list[ast.AST] = [write.path] if write.path is not None else []
        if isinstance(write.path, ast.Name):
            roots.extend(flow.bindings.assigned.get(write.path.id, ())[:4])
        if not any(
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and n.value.endswith(_MODULE_SUFFIXES)
            for root in roots
            for n in ast.walk(root)
        ):
            return frozenset()
        found: set[str] = set()
        for head in self._join_heads(roots):
            found |= self._commands.keys(head)
        return frozenset(found)

    def _join_heads(self, roots: list[ast.AST]) -> Iterator[ast.AST]:
        """The folders paths in ``roots`` are joined under: the head of an
        ``os.path.join``-like call, or the left of ``/`` or ``+``."""
        for root in roots:
            for n in ast.walk(root):
                if (
                    isinstance(n, ast.Call)
                    and n.args
                    and _PATH_JOINS & set(self._flow.resolve(n.func))
                ):
                    yield n.args[0]
                elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div | ast.Add):
                    yield n.left

    def _run_words(self, node: ast.Call) -> list[str] | None:
        """The words of the command ``node`` runs, an interpreter not written out
        (``[sys.executable, "x.py"]``) read as ``python``."""
        command = node.args[0] if node.args else None
        if command is None:
            return None
        words = self._commands.words(command)
        if isinstance(command, ast.List | ast.Tuple) and command.elts:
            first = command.elts[0]
            if self._commands.interpreter(first, self._flow.name_value(first)):
                rest = [self._flow.name_value(e) or "?" for e in command.elts[1:16]]
                words = ["python", *rest]
        return words

    def stored_code(self, node: ast.Call, executor: str, arg: ast.expr) -> None:
        """``exec(self.code)``: what the methods of the enclosing class store into that
        attribute, and, for a parameter stored (``self.code = code`` in ``__init__``), what
        the class's calls in this file pass for it (``Loader(BLOB)``): run as if passed."""
        if not (
            isinstance(arg, ast.Attribute)
            and isinstance(arg.value, ast.Name)
            and arg.value.id in {"self", "cls"}
        ):
            return
        flow = self._flow
        owner = next(
            (
                c
                for c in flow.of_kind(ast.ClassDef)
                if isinstance(c, ast.ClassDef)
                and c.lineno <= node.lineno <= (c.end_lineno or c.lineno)
            ),
            None,
        )
        if owner is None:
            return
        values: list[ast.expr] = []
        for method in owner.body:
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            params = [a.arg for a in (*method.args.posonlyargs, *method.args.args)][1:]
            for n in ast.walk(method):
                if not (
                    isinstance(n, ast.Assign)
                    and any(
                        isinstance(t, ast.Attribute)
                        and t.attr == arg.attr
                        and isinstance(t.value, ast.Name)
                        and t.value.id == arg.value.id
                        for t in n.targets
                    )
                ):
                    continue
                value = n.value
                if method.name == "__init__" and isinstance(value, ast.Name) and value.id in params:
                    values.extend(self._constructed_with(owner.name, params.index(value.id)))
                else:
                    values.append(value)
        for value in values[:4]:
            self._by_source(node, f"{executor}(self.{arg.attr})", self._flow.labels(value))
            text = flow.evaluate(value)
            if isinstance(text, bytes):
                text = text.decode("utf-8", "replace")
            if isinstance(text, str):
                self._code_string(node, f"{executor}(self.{arg.attr})", text)

    def _constructed_with(self, name: str, place: int) -> list[ast.expr]:
        """The arguments at ``place`` of this file's calls of its class ``name``."""
        return [
            c.args[place]
            for c in self._flow.calls()
            if isinstance(c.func, ast.Name)
            and c.func.id == name
            and len(c.args) > place
            and not isinstance(c.args[place], ast.Starred)
        ][:4]

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
            Write(frozenset(keys), data, frozenset(labels), node, path, handle, scope, copied)
        )
        self._pending.append(lambda: self._pth_written(node, path, data, handle, scope))
        marker = self._tags.persistence_marker(path)
        if marker is not None and SHELL_STARTUP.search(marker) is None:
            # Path(...).write_text, a copy, a download into a folder or table that only
            # starts programs (open() is tagged where its mode is read); a shell's start-up
            # file is every completion installer's (typer, cyclopts: Path.home() /
            # ".bashrc"), so only what is written into it tells (branch blind13)
            self._scan.tag(Tag.PERSISTENCE_WRITE, node.lineno, marker)
        rewritten = command_found_on_path(path, scope, self._flow.resolve, self._flow.bindings)
        if rewritten is not None and (data or labels or handle is not None):
            # a command the user runs by name replaced (bitcoinlibdbfix's clw: blind18)
            self._scan.tag(Tag.PERSISTENCE_WRITE, node.lineno, rewritten)

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
                for n in self._flow.calls()
                if isinstance(n.func, ast.Attribute)
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
        if (Source.PACKAGED, SHIPPED_DATABASE) in labels:
            self._scan.emit("CPL-THR-029", api, node.lineno, node.col_offset)

    def _looks_like_code(self, text: str) -> bool:
        return (
            self._scan.nested is not None
            and self._scan.depth < _MAX_NESTED_DEPTH
            and 12 <= len(text) <= MAX_NESTED_TEXT
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
