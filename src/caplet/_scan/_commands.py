"""Reading a process call's command: its program, what an interpreter runs, its text.

Data from the network or a decoder matters where it can be the program (a
shell string, a list's first element, what ``python``/``sh -c``/``cmd /c
start`` is given), not where it is an argument (a version number passed to
pip). :class:`Commands` answers those questions for one file's data flow;
a shell string is read like a shell (after ``&&``, ``;`` or ``|`` a new
program starts), and ``powershell -EncodedCommand`` is decoded.
"""

from __future__ import annotations

import ast
import base64
import binascii
import re
from pathlib import PurePosixPath

from caplet._scan._flow import Flow, Labels
from caplet._scan._sources import INTERPRETERS, Source

__all__ = [
    "PYTHONS",
    "Commands",
    "encoded_command",
    "new_argv",
    "string_parts",
    "wrapped_programs",
]

PYTHONS = ("python", "pythonw", "py")
#: Words between an interpreter and what it runs (``cmd /c start "" x.exe``).
_LAUNCHER_WORDS = frozenset({"/c", "/k", "", "start", "-c", "-m", "/i", "/s", "/q"})
#: Shell operators after which a new program starts.
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
#: A Windows program's switch (``wscript //B``, ``cscript /nologo``): a flag, not the file.
_SLASH_FLAG = re.compile(r"//?[A-Za-z][\w:]{0,15}")


def _interpreter_name(name: str) -> bool:
    """Whether a program's file name is an interpreter's, with or without ``.exe``
    (``wscript.exe //B x.vbs`` runs ``x.vbs``: blind14)."""
    bare = name.removesuffix(".exe")
    return name in INTERPRETERS or bare in INTERPRETERS or name.startswith(PYTHONS)


#: Where the new program's argv starts in the calls that take it after the file they
#: name: ``os.exec*(file, ...)``, ``os.spawn*(mode, file, ...)``, ``os.posix_spawn*(file,
#: argv, env)``.
_ARGV_AT = {"os.exec": 1, "os.spawn": 2, "os.posix_spawn": 1}


def new_argv(node: ast.Call, name: str) -> ast.expr | None:
    """``os.execvp("sh", ["sh", "-c", cmd])``: the new program's argv is its command (the
    file argument only names the program); the ``l`` variants spread it. ``os.spawn*`` and
    ``posix_spawn`` likewise, after their mode or before their environment (blind15)."""
    if name == "win32api.ShellExecute" and len(node.args) >= 4:
        # ShellExecute(0, "open", "cmd.exe", "/c " + cmd, None, 0): the program and its
        # parameters are one command line (blind32)
        program, parameters = node.args[2], node.args[3]
        spaced = ast.BinOp(program, ast.Add(), ast.copy_location(ast.Constant(" "), program))
        line = ast.BinOp(ast.copy_location(spaced, program), ast.Add(), parameters)
        return ast.copy_location(line, program)
    prefix = next((p for p in _ARGV_AT if name.startswith(p)), None)
    if prefix is None or len(node.args) <= _ARGV_AT[prefix]:
        return None
    at = _ARGV_AT[prefix]
    if prefix == "os.posix_spawn" or "v" in name.removeprefix(prefix):
        return node.args[at]
    spread = node.args[at:]
    if name.endswith("e"):
        spread = spread[:-1]  # spawnle/execle: the environment comes last
    return ast.copy_location(ast.List(spread, ast.Load()), node.args[at])


class Commands:
    """Commands of one file, read through its data flow."""

    def __init__(self, flow: Flow) -> None:
        self._flow = flow

    def program_labels(self, command: ast.expr) -> Labels:
        """Labels of the parts of a command that can be the program or the code it runs."""
        flow = self._flow
        if not isinstance(command, ast.List | ast.Tuple):
            return flow.labels(command)
        out: set[tuple[Source, str]] = set()
        for part in self.program_parts(command):
            out |= flow.labels(part)
        return frozenset(out)

    def program_parts(self, command: ast.List | ast.Tuple) -> list[ast.expr]:
        """The program of a list command and, after an interpreter and its flags, what it runs."""
        parts: list[ast.expr] = []
        for element in command.elts:
            if isinstance(element, ast.Starred):
                break
            parts.append(element)
            word = self._flow.name_value(element)
            if word is not None and (
                word.startswith("-") or word in _LAUNCHER_WORDS or _SLASH_FLAG.fullmatch(word)
            ):
                continue  # an interpreter's flag: what it runs comes next
            if not self.interpreter(element, word):
                break
        return parts

    def interpreter(self, element: ast.AST, word: str | None) -> bool:
        if "sys.executable" in self._flow.resolve(element):
            return True
        if word is None:
            # os.path.join(os.path.dirname(sys.executable), "pythonw.exe"): a path whose
            # last literal piece names an interpreter (blind33)
            word = self._flow.path_text(element)
        name = PurePosixPath(word.replace("\\", "/")).name.lower() if word else ""
        return _interpreter_name(name)

    def program_keys(self, command: ast.expr) -> frozenset[str]:
        """The names a command's program (or the file an interpreter runs) is held in.

        A shell string is read like a shell: after ``&&``, ``;`` or ``|`` a
        new program starts (``"chmod +x " + p + " && " + p`` runs ``p``).
        """
        keys: set[str] = set()
        if isinstance(command, ast.Name):
            # command = [path, "-o", pool]; Popen(command): the list bound to the name
            bound = self._flow.bindings.assigned.get(command.id, ())
            if len(bound) == 1 and isinstance(bound[0], ast.List | ast.Tuple):
                command = bound[0]
        if isinstance(command, ast.List | ast.Tuple):
            for part in self.program_parts(command):
                keys |= self.keys(part)
            return frozenset(keys - self.modules())
        at_program = True
        for piece in string_parts(command):
            if not isinstance(piece, str):
                if at_program:
                    keys |= self.keys(piece)
                # sys.executable + " " + path: the interpreter runs what follows
                at_program = at_program and self.interpreter(piece, None)
                continue
            for word in piece.split():
                token = word.strip("\"'")
                if not token:
                    continue  # a quote around the next piece ('python "' + path + '"')
                if token in _SEPARATORS or token.endswith(";"):
                    at_program = True
                elif at_program:
                    name = PurePosixPath(token.replace("\\", "/")).name.lower()
                    interpreter = _interpreter_name(name)
                    at_program = (
                        interpreter
                        or token.startswith("-")
                        or token in _LAUNCHER_WORDS
                        # "/proc/self/fd/%d" % fd: the program is the file fd is open on
                        # (an anonymous memfd a download was written to: blind16)
                        or token.endswith(("/proc/self/fd/", "/dev/fd/"))
                    )
        return frozenset(keys - self.modules())

    def modules(self) -> set[str]:
        return set(self._flow.bindings.imports)

    def literal_pieces(self, command: ast.expr) -> list[str]:
        """The literal words of a command whose whole text is not known (``"curl " + url``)."""
        texts = [
            n.value
            for n in ast.walk(command)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ][:64]
        return " ".join(texts).split()

    def bound_texts(self, name: ast.Name, scope: int) -> list[str]:
        """The texts of the values ``name`` is bound to in ``scope`` (several: one per
        branch), with ``?`` for what is not known: a command chosen by a test (blind8)."""
        texts: list[str] = []
        for value in self._flow.bindings.scoped.get(name.id, {}).get(scope, [])[:4]:
            words = self.words(value) or self.literal_pieces(value)
            if words:
                texts.append(" ".join(words))
        return texts

    def keys(self, node: ast.AST) -> frozenset[str]:
        """How a path is known: a name (``p``, ``f.name``, ``str(p)``), or its whole expression.

        Two uses of one path are the same name, or the same expression written
        twice (``join(d, "bin", "x")``); a shared directory name alone is not.
        """
        while True:
            if isinstance(node, ast.Name):
                return frozenset({node.id})
            descriptor = _descriptor_path(node)
            if descriptor is not None:
                return frozenset({descriptor})  # "/proc/self/fd/%d" % fd is the file fd
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "name"
                and isinstance(node.value, ast.Name)
            ):
                return frozenset({node.value.id})  # a temporary file's .name
            if (
                isinstance(node, ast.Call)
                and len(node.args) == 1
                and not node.keywords
                and {"builtins.str", "os.fspath", "pathlib.Path"}
                & set(self._flow.resolve(node.func))
            ):
                node = node.args[0]
                continue
            returned = self._returned_names(node)
            if returned:
                return returned
            return frozenset({ast.dump(node)})

    def _returned_names(self, node: ast.AST) -> frozenset[str]:
        """``_fetch()``, a function of this file whose every return is a name (``return
        dst``): the path is known by those names (blind33: a download's path returned,
        then started through ``multiprocessing.Process(target=os.startfile, ...)``)."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return frozenset()
        if node.func.id not in self._flow.bindings.defined:
            return frozenset()
        returned = self._flow.returned_by(node.func.id)[:8]
        if not returned or not all(isinstance(r, ast.Name) for r in returned):
            return frozenset()
        return frozenset(r.id for r in returned if isinstance(r, ast.Name))

    def words(self, command: ast.expr) -> list[str] | None:
        """The command's words when its text is known (a list, or a string split like a shell)."""
        value = self._flow.evaluate(command)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return [v for v in value if isinstance(v, str)]
        if isinstance(command, ast.List | ast.Tuple | ast.BinOp | ast.Name):
            listed = self._list_words(command, 0)
            if listed:
                return listed
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if value is None and isinstance(command, ast.JoinedStr | ast.BinOp | ast.Call):
            # f"{sys.executable} -m pip install {name}", sys.executable + " -m pip " + verb,
            # "{} -m pip {}".format(...): what is not known is one word "?"
            parts = string_parts(command)
            if len(parts) > 1 or isinstance(command, ast.JoinedStr):
                pieces = [p if isinstance(p, str) else self._flow.name_value(p) for p in parts[:64]]
                value = "".join(p if p is not None else " ? " for p in pieces)
        if isinstance(value, str):
            return self._flow.shell.split(value)
        return None

    def _list_words(self, command: ast.expr, depth: int) -> list[str] | None:
        """A command list's words, ``?`` for what is not known: a list literal, lists
        added together (``base + ["install", x]``), or a name bound once to a list and
        what is added to it later (``cmd += [...]``, ``cmd.extend(...)``, ``append``)."""
        flow = self._flow
        if depth > 4:
            return None
        if isinstance(command, ast.List | ast.Tuple):
            listed: list[str] = []
            for e in command.elts[:64]:
                spread = flow.evaluate(e.value) if isinstance(e, ast.Starred) else None
                if isinstance(spread, list) and all(isinstance(w, str) for w in spread):
                    # [sys.executable, "-m", *Step._fields[:2], url]: the words spread in
                    listed += [w for w in spread[:64] if isinstance(w, str)]
                else:
                    listed.append(flow.name_value(e) or "?")
            return listed
        if isinstance(command, ast.BinOp) and isinstance(command.op, ast.Add):
            left = self._list_words(command.left, depth + 1)
            right = self._list_words(command.right, depth + 1)
            return None if left is None or right is None else left + right
        if not isinstance(command, ast.Name):
            return None
        bound = flow.bindings.assigned.get(command.id, ())
        words = self._list_words(bound[0], depth + 1) if len(bound) == 1 else None
        if words is None:
            return None
        for values in flow.contributed.get(command.id, {}).values():
            for value in values[:16]:
                more = self._list_words(value, depth + 1)
                words += more if more is not None else [flow.name_value(value) or "?"]
        return words

    def literal_words(self, command: ast.expr) -> list[str] | None:
        if isinstance(command, ast.Constant) and isinstance(command.value, str):
            return self._flow.shell.split(command.value)
        return None


#: A shell's switches that take the script to run, and Windows' shells' (recall17).
_SCRIPT_SWITCHES = re.compile(r"-[a-z]*c|/[ck]|-command", re.IGNORECASE)
#: Where a new program starts inside a shell's script: after an operator, in a command
#: substitution, in a subshell.
_SCRIPT_BREAKS = re.compile(r"&&|\|\||[;|&\n(`]|\$\(")
#: Quotes and a substitution's end, read as blanks around a script's words.
_QUOTES = str.maketrans({'"': " ", "'": " ", ")": " "})
#: Words before a program that only change how it runs.
_PREFIX_WORDS = frozenset({"sudo", "exec", "env", "command", "time", "then", "do", "!"})


def wrapped_programs(words: list[str]) -> list[str]:
    """The programs a shell given a script runs (``bash -c "curl ... $(hostname)"``,
    ``cmd /c curl ...``, ``powershell -Command iwr ...``): the first word of each of the
    script's commands, lowered, without folder or ``.exe``. A shell's own first word is
    what the rules read; a downloader wrapped in one hid from them (recall17)."""
    if not words:
        return []
    shell = PurePosixPath(words[0].replace("\\", "/")).name.lower().removesuffix(".exe")
    if shell not in {"sh", "bash", "zsh", "dash", "ksh", "cmd", "powershell", "pwsh"}:
        return []
    at = next((i for i, w in enumerate(words[1:8], 1) if _SCRIPT_SWITCHES.fullmatch(w)), None)
    if at is None:
        return []
    script = " ".join(words[at + 1 :])[:4096]
    programs: list[str] = []
    for part in _SCRIPT_BREAKS.split(script)[:64]:
        pieces = part.translate(_QUOTES).split()
        while pieces and ("=" in pieces[0] or pieces[0] in _PREFIX_WORDS):
            pieces.pop(0)
        if pieces:
            name = PurePosixPath(pieces[0].replace("\\", "/")).name.lower()
            programs.append(name.removesuffix(".exe"))
    return programs


def encoded_command(words: list[str]) -> str | None:
    """The script of ``powershell -EncodedCommand <base64 of UTF-16LE>``, decoded."""
    for index, word in enumerate(words[:-1]):
        if word.lower() in {"-encodedcommand", "-enc", "-ec", "-e"}:
            try:
                return base64.b64decode(words[index + 1], validate=True).decode("utf-16-le")
            except (ValueError, binascii.Error, UnicodeDecodeError):
                return None
    return None


def string_parts(node: ast.AST) -> list[str | ast.expr]:
    """A string expression's parts in order: literal text, or the expressions between."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [*string_parts(node.left), *string_parts(node.right)]
    if isinstance(node, ast.JoinedStr):
        out: list[str | ast.expr] = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                out.append(value.value)
            else:
                out.extend(string_parts(value))
        return out
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "str"
        and len(node.args) == 1
    ):
        return [node.args[0]]
    template: ast.expr | None = None
    values: list[ast.expr] = []
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and not node.keywords
    ):
        template, values = node.func.value, list(node.args)  # "{} {}".format(python, path)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        template = node.left  # "%s %s" % (python, path)
        values = list(node.right.elts) if isinstance(node.right, ast.Tuple) else [node.right]
    if (
        isinstance(template, ast.Constant)
        and isinstance(template.value, str)
        and not any(isinstance(v, ast.Starred) for v in values)
    ):
        pieces = re.split(r"\{\d*\}|%[sdr]", template.value)
        if len(pieces) == len(values) + 1:
            out = [pieces[0]]
            for value, text in zip(values, pieces[1:], strict=True):
                out.extend([value, text])
            return out
    return [node] if isinstance(node, ast.expr) else []


#: Folders whose entries are this process's open descriptors, by number.
_DESCRIPTOR_FOLDERS = ("/proc/self/fd/", "/dev/fd/")


def _descriptor_path(node: ast.AST) -> str | None:
    """The descriptor's name in a path to it (``"/proc/self/fd/%d" % fd``,
    ``f"/proc/self/fd/{fd}"``, ``"/dev/fd/" + str(fd)``): the file that descriptor is
    open on, as the name ``os.write(fd, ...)`` wrote it under (blind16)."""
    head: ast.AST | None = None
    tail: ast.AST | None = None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        head, tail = node.left, node.right
    elif isinstance(node, ast.JoinedStr) and len(node.values) == 2:
        head, tail = node.values
        tail = tail.value if isinstance(tail, ast.FormattedValue) else None
    if not (isinstance(head, ast.Constant) and isinstance(head.value, str)):
        return None
    if not head.value.replace("%d", "").replace("%s", "").endswith(_DESCRIPTOR_FOLDERS):
        return None
    if isinstance(tail, ast.Call) and len(tail.args) == 1 and isinstance(tail.func, ast.Name):
        tail = tail.args[0]  # str(fd)
    return tail.id if isinstance(tail, ast.Name) else None
