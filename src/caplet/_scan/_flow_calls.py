"""The labels a call's value carries (a mixin of :class:`caplet._scan._flow.Flow`).

A call carries what its arguments and its receiver carry, and a source of its own when
it reads one: the environment by name, a socket peer's message, a decoder's output, host
reconnaissance, credentials, a download (a downloader's printed output too), a file's
contents. Split out of ``_flow`` (past 600 lines with blind31's rules); the flow's state
and its other questions are the class's own, declared here for the type checker.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from caplet._scan._network_input import wraps_network
from caplet._scan._packed_bytes import packed_bytes
from caplet._scan._resolve import is_network
from caplet._scan._rules import ENV_FUNCTIONS, ENV_METHODS, ENVIRON_MAPPINGS
from caplet._scan._source_labels import (
    APPLIERS,
    DATA_STORES,
    FILE_READERS,
    SHIPPED_DATABASE,
    Label,
    Labels,
    downloads,
    env_read,
    file_labels,
    hands_decoder,
    prints_download,
    reader_labels,
    url_labels,
)
from caplet._scan._source_labels import NONE as _NONE
from caplet._scan._sources import (
    COOKIE_READERS,
    DECODER_METHODS,
    DECODERS,
    DECODING_CODECS,
    DNS_ANSWERS,
    ENV_FILE_READERS,
    LITERAL_DECODERS,
    NETWORK_STREAMS,
    PROCESS_OUTPUTS,
    RECON_FUNCTIONS,
    RECON_PROGRAMS,
    SDK_CREDENTIAL_READERS,
    Source,
)
from caplet._scan._syntax import MAX_CANDIDATES, Bindings
from caplet._scan._values import Value

__all__ = ["CallLabels", "returned_values"]


class CallLabels:
    """What a call's value carries (see the module's text)."""

    bindings: Bindings
    _method_index: dict[tuple[str, str], list[ast.expr]] | None

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        raise NotImplementedError

    def name_value(self, node: ast.AST) -> str | None:
        raise NotImplementedError

    def evaluate(self, node: ast.AST) -> Value | None:
        raise NotImplementedError

    def path_text(self, node: ast.AST) -> str | None:
        raise NotImplementedError

    def _label(self, node: ast.AST, depth: int) -> Labels:
        raise NotImplementedError

    def _final_label(self, node: ast.AST, depth: int) -> Labels:
        raise NotImplementedError

    def _union(self, nodes: Iterable[ast.AST | None], depth: int) -> Labels:
        raise NotImplementedError

    def _walked_keys(self, key: ast.expr) -> Labels:
        raise NotImplementedError

    def _one_entry(self, container: ast.expr, key: str, carried: Labels, depth: int) -> Labels:
        raise NotImplementedError

    def _returns(self, name: str) -> list[ast.expr]:
        raise NotImplementedError

    def _call_labels(self, node: ast.Call, depth: int) -> Labels:
        funcs = self.resolve(node.func)
        out: set[Label] = set()
        func = node.func
        receiver = func.value if isinstance(func, ast.Attribute) else None
        method = func.attr if isinstance(func, ast.Attribute) else ""
        args = [*node.args, *(k.value for k in node.keywords)]
        # the environment read by name: os.environ.get("X"), os.getenv("X")
        env_method = receiver is not None and method in ENV_METHODS
        owners = self.resolve(receiver) if receiver is not None and env_method else ()
        if (env_method and not ENVIRON_MAPPINGS.isdisjoint(owners)) or (
            not ENV_FUNCTIONS.isdisjoint(funcs)
        ):
            key = self.name_value(node.args[0]) if node.args else None
            if key is not None:
                return env_read(key)
            walked = self._walked_keys(node.args[0]) if node.args else _NONE
            if walked:
                return walked
            # one variable by a computed name carries what the name carries
            # (a key walked out of os.environ is the environment, a constant
            # of the class is one setting)
            return self._label(node.args[0], depth) if node.args else _NONE
        if method in {"get", "pop"} and receiver is not None and node.args:
            entry = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
            carried = self._final_label(receiver, depth) if isinstance(entry, str) else _NONE
            if isinstance(entry, str) and any(s is Source.ENVIRONMENT for s, _ in carried):
                # env.get("HOME") of a copy of the environment: one variable
                one = self._one_entry(receiver, entry, carried, depth)
                return one | self._union(node.args[1:], depth)
        if (
            method in {"recv", "recvfrom", "recv_into", "makefile"}
            and (
                any(is_network(f) for f in funcs)
                or (receiver is not None and wraps_network(receiver, self.bindings, self.resolve))
            )
        ) or (
            # await loop.sock_recv(sock, n): asyncio's read of a socket it is handed
            method in {"sock_recv", "sock_recvfrom"}
            and node.args
            and any(is_network(f) for f in self.resolve(node.args[0]))
        ):
            # what a socket peer sends: a command, in a remote shell's loop (a socket
            # wrapped by TLS too: ctx.wrap_socket(raw).recv, recall6)
            out.add((Source.REMOTE, "a network peer's message"))
        if not NETWORK_STREAMS.isdisjoint(funcs):
            # reader, writer = await asyncio.open_connection(...): the peer's streams
            out.add((Source.REMOTE, "a network peer's message"))
        for name in funcs:
            if name in DECODERS or (name in LITERAL_DECODERS and self._literal_first(node)):
                out.add((Source.DECODED, name.removeprefix("builtins.")))
            elif name in RECON_FUNCTIONS:
                out.add((Source.RECON, name))
            elif name in ENV_FILE_READERS:
                out.add((Source.ENVIRONMENT, name))
            elif name.split(".", 1)[0] in COOKIE_READERS:
                out.add((Source.CREDENTIAL, "browser cookies"))
            elif name in SDK_CREDENTIAL_READERS:
                out.add((Source.CREDENTIAL, "the cloud SDK's credentials"))
            elif downloads(name) or name in DNS_ANSWERS:
                out.add((Source.DOWNLOADED, name))
                if node.args:
                    out |= url_labels(self.name_value(node.args[0]), self.path_text(node.args[0]))
            elif name in FILE_READERS:
                out |= reader_labels(name, self.path_text(node.args[0]) if node.args else None)
        if (
            node.args
            and not DATA_STORES.isdisjoint(funcs)
            and any(s is Source.PACKAGED for s, _ in self._union(node.args[:1], depth))
        ):
            # sqlite3.connect(<a file of the package>): its rows are what it ships (blind32)
            out.add((Source.PACKAGED, SHIPPED_DATABASE))
        if not APPLIERS.isdisjoint(funcs) and hands_decoder(
            node.args[:3], self.bindings.assigned, self.resolve
        ):
            # reduce(lambda d, f: f(d), (b64decode, zlib.decompress), blob): decoded (blind31)
            out.add((Source.DECODED, "decoders applied by reduce/map"))
        if node.args and not PROCESS_OUTPUTS.isdisjoint(funcs):
            # check_output("wmic csproduct get uuid"): a program's output that is the host
            for program in sorted(self._program_words(node.args[0]) & RECON_PROGRAMS)[:1]:
                out.add((Source.RECON, program))
            if self._prints_download(node.args[0]):
                # run(["wget", "-qO-", url]).stdout: what a downloader prints is the download
                # (fed to sh on stdin: blind31, b31-dr-wget-stdout-sh-input)
                out.add((Source.DOWNLOADED, "a download printed by curl/wget"))
        codec = str(self.name_value(node.args[-1]) or "").lower() if node.args else ""
        if (
            method in DECODER_METHODS
            or (method == "decode" and codec in DECODING_CODECS)
            or (method == "encode" and codec in {"rot13", "rot_13"})
        ):
            out.add((Source.DECODED, f".{method}()"))
        if method == "get_payload" and any(
            k.arg == "decode" and isinstance(k.value, ast.Constant) and k.value.value
            for k in node.keywords
        ):
            # a MIME part's base64 or quoted-printable body, decoded by the email package
            # (blind32: a stage kept as a message literal)
            out.add((Source.DECODED, ".get_payload(decode=True)"))
        if method in {"read", "readline", "text", "json"} and any(
            downloads(f) for f in self.resolve(func)
        ):
            out.add((Source.DOWNLOADED, method))
        if method in {"read_text", "read_bytes", "open"} and receiver is not None:
            out |= file_labels(self.path_text(receiver))
        if "builtins.chr" in funcs and node.args and self._shifted(node.args[0]):
            out.add((Source.DECODED, "chr(ord(...) shifted)"))
        if method == "to_bytes" and receiver is not None and not node.keywords:
            out.add((Source.DECODED, "int.to_bytes"))  # a program packed into an integer
        if method == "translate" and node.args and self._substitution(node.args[0]):
            out.add((Source.DECODED, "str.translate(maketrans(...))"))
        if method == "join" and node.args and self._chr_join(node.args[0]):
            out.add((Source.DECODED, "join(chr(...))"))
        if packed_bytes(node, funcs, self.bindings.assigned, self.resolve):
            out.add((Source.DECODED, "bytes of listed integers"))
        out |= self._union(args, depth)
        if receiver is not None:
            out |= self._label(receiver, depth)
        if isinstance(func, ast.Name) and func.id in self.bindings.defined:
            # a function of this file: its result carries what it returns
            out |= self._union(self._returns(func.id), depth)
        elif isinstance(func, ast.Attribute):
            # self._text(), cls.run(s), Decoder.run(s): a method of this file's classes
            # returns what its body returns (blind33: a blob decoded in a method, exec'd)
            out |= self._union(self._method_returns(func), depth)
        return frozenset(out)

    def _method_returns(self, func: ast.Attribute) -> list[ast.expr]:
        """What the methods named ``func.attr`` return: of the class ``func.value`` names,
        or of any class of the file for ``self``/``cls`` (the class a method is in is not
        tracked; a method of that name in another class of the file is the same guess).
        Indexed once per file: ``self.x()`` calls are many."""
        owner = func.value
        if not isinstance(owner, ast.Name):
            return []
        index = self._method_index
        if index is None:
            index = self._method_index = {}
            for name, found in self.bindings.classes.items():
                for cls in found[:MAX_CANDIDATES]:
                    for stmt in cls.body:
                        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                            values = returned_values(stmt)
                            # self.m(...) is any class's m: only a getter of the object's
                            # own state (no parameter but self) is followed; a method given
                            # arguments returns what its callers hand it, a guess too wide
                            # (setuptools' PackageIndex, meson's wrap: benign corpus, blind33)
                            entries = [(name, stmt.name)]
                            if _getter(stmt):
                                entries.append(("", stmt.name))
                            for entry in entries:
                                kept = index.setdefault(entry, [])
                                kept += values[: MAX_CANDIDATES - len(kept)]
        key = "" if owner.id in {"self", "cls"} else owner.id
        return index.get((key, func.attr), [])

    def _prints_download(self, command: ast.expr) -> bool:
        """A command list (or its literal string) that runs a downloader printing what it
        downloads (:func:`~caplet._scan._source_labels.prints_download`)."""
        if isinstance(command, ast.List | ast.Tuple):
            return prints_download([self.name_value(e) or "" for e in command.elts[:64]])
        text = self.name_value(command)
        return text is not None and prints_download(text.split()[:64])

    def _program_words(self, command: ast.expr) -> frozenset[str]:
        """The programs a command may start, lowered, without their folder or ``.exe``: its
        first word, or each command of a literal list a loop takes it from (``for c in
        ("whoami", "id")``, a beacon's commands run one by one: blind14)."""
        first = command
        if isinstance(command, ast.List | ast.Tuple) and command.elts:
            first = command.elts[0]
        text = self.name_value(first)
        texts = [text] if text is not None else []
        if text is None and isinstance(first, ast.Name):
            for iterable in self.bindings.iterated.get(first.id, ())[:4]:
                if isinstance(iterable, ast.List | ast.Tuple | ast.Set):
                    texts += [self.name_value(e) or "" for e in iterable.elts[:32]]
        words = (t.split(None, 1)[0] if t.strip() else "" for t in texts)
        return frozenset(
            w.replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe") for w in words
        )

    def _substitution(self, table: ast.AST) -> bool:
        """A translation table built by ``maketrans`` (a substitution cipher, rot13 by hand)."""
        if isinstance(table, ast.Name):
            bound = self.bindings.assigned.get(table.id, ())
            table = bound[0] if len(bound) == 1 else table
        return (
            isinstance(table, ast.Call)
            and isinstance(table.func, ast.Attribute)
            and table.func.attr == "maketrans"
            and len(table.args) >= 2
        )

    def _shifted(self, arg: ast.AST) -> bool:
        """``ord(c) - 3``, ``(ord(c) ^ k) % 256``: a character of run-time text shifted
        (a Caesar or XOR decoder written as a loop)."""
        if not isinstance(arg, ast.BinOp):
            return False
        return any(
            isinstance(n, ast.Call)
            and n.args
            and not isinstance(n.args[0], ast.Constant)
            and "builtins.ord" in self.resolve(n.func)
            for n in ast.walk(arg)
        )

    def _chr_join(self, arg: ast.AST) -> bool:
        if isinstance(arg, ast.GeneratorExp | ast.ListComp) and isinstance(arg.elt, ast.Call):
            return "builtins.chr" in self.resolve(arg.elt.func)
        if isinstance(arg, ast.Call) and arg.args and "builtins.map" in self.resolve(arg.func):
            return "builtins.chr" in self.resolve(arg.args[0])
        return False

    def _literal_first(self, node: ast.Call) -> bool:
        """The call's first argument is a value of this file's literals."""
        return bool(node.args) and isinstance(self.evaluate(node.args[0]), str | bytes)


def returned_values(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    """The values ``fn``'s own ``return`` statements give (nested functions left out; bounded)."""
    found: list[ast.expr] = []
    stack: list[ast.AST] = list(fn.body)
    budget = 2000
    while stack and budget:
        budget -= 1
        item = stack.pop()
        if isinstance(item, ast.Return) and item.value is not None:
            found.append(item.value)
        elif not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(item))
    return found


def _getter(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` takes nothing but its object (``def _text(self)``)."""
    a = fn.args
    return len(a.posonlyargs) + len(a.args) <= 1 and not (a.vararg or a.kwarg or a.kwonlyargs)
