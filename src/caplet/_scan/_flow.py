"""In-file data flow: what a name denotes, what a constant expression is, what a value carries.

Three questions the rules ask about an expression of one parsed file, each
answered from the bindings of :mod:`caplet._scan._syntax` (no second walk):

* :meth:`Flow.resolve`: the fully qualified names it may denote
  (``sp.Popen`` -> ``subprocess.Popen``, ``getattr(os, "sys" + "tem")`` ->
  ``os.system``, ``requests.Session()`` -> an instance, whose ``.post`` is
  ``requests.Session().post``);
* :meth:`Flow.evaluate`: its value when it is computed from literals only
  (slices of ``str(oct)``, ``chr`` joins, reversals, ``bytes([...])``, and
  the decoders: base64, hex, zlib, rot13, Fernet with a literal key), so a
  hidden name or an encoded payload is seen as what it is;
* :meth:`Flow.labels`: the :class:`Source` labels its value may carry
  (decoded, downloaded, a remote user's command, host reconnaissance, the
  environment, secrets, credential files), through assignments, loops,
  ``with``, containers filled later (``d[k] = v``, ``f.write(v)``) and calls
  (a call's result carries its arguments and its receiver).

Everything is bounded: recursion depth, a per-file budget of steps and the
size of evaluated values, so crafted code can make the answers incomplete
(the rules then err towards reporting nothing more), never slow.
"""

from __future__ import annotations

import ast
import base64
import binascii
import builtins
import codecs
import zlib
from collections.abc import Callable, Iterable
from typing import Final

from caplet._scan._rules import DYNAMIC_IMPORTERS, ENV_FUNCTIONS, ENV_METHODS, ENVIRON_MAPPINGS
from caplet._scan._sources import (
    BOT_FRAMEWORKS,
    DECODER_METHODS,
    DECODERS,
    DECODING_CODECS,
    HTTP_CLIENT_MODULES,
    NETWORK_MODULES,
    NETWORK_READS,
    NOT_EGRESS,
    RECON_ENV_NAMES,
    RECON_FILES,
    RECON_FUNCTIONS,
    Source,
)
from caplet._scan._syntax import MAX_CANDIDATES, MAX_RESOLVE_DEPTH, Bindings, fold_str

__all__ = ["Flow", "Label", "Labels", "downloads", "is_network", "secret_name"]

#: One source a value may carry, with a detail (a variable's name, which credential).
Label = tuple[Source, str]
Labels = frozenset[Label]
_NONE: Final[Labels] = frozenset()

#: Steps (label or value computations) per file; past it, answers are empty.
_BUDGET = 60_000
#: Largest value the evaluator builds (a decoded payload), in characters or bytes.
_MAX_VALUE = 4 << 20
#: Builtins whose ``str()`` the evaluator may take: real objects of this interpreter.
_PRINTABLE_BUILTINS = frozenset(
    name
    for name, value in vars(builtins).items()
    if callable(value) and not name.startswith("_") and not isinstance(value, type(builtins))
) | {"copyright", "credits", "license"}
#: Environment variables that hold secrets (a read is a SECRET label).
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSW", "API_KEY", "APIKEY", "ACCESS_KEY", "CREDENTIAL")
#: Credential files by what a literal path holds.
_CREDENTIAL_MARKERS = {
    ".ssh": "SSH key",
    ".aws": "AWS credentials",
    ".netrc": "netrc",
    ".git-credentials": "git credentials",
    ".docker": "Docker credentials",
    ".kube": "Kubernetes config",
    ".pypirc": "package index token",
    ".npmrc": "package index token",
    ".gnupg": "GnuPG keys",
}

Value = str | bytes | int | list["Value"]


def is_network(name: str) -> bool:
    """True when ``name`` is a call into a network module that sends or receives."""
    return name.startswith(NETWORK_MODULES) and name not in NOT_EGRESS


def downloads(name: str) -> bool:
    """A call whose result is data from the network (``requests.get``, ``sock.recv``)."""
    if not is_network(name):
        return False
    owner, _, last = name.rpartition(".")
    return last in NETWORK_READS and (owner.endswith("()") or owner in HTTP_CLIENT_MODULES)


def secret_name(name: str) -> bool:
    """A secret-looking environment variable name (``AWS_SECRET_ACCESS_KEY``)."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


class _BudgetError(Exception):
    """Raised when a file's step budget is spent (caught at the public entry points)."""


class Flow:
    """The three data-flow questions for one file (memoised, bounded)."""

    def __init__(
        self, bindings: Bindings, nodes: Iterable[ast.AST] = (), scopes: Iterable[int] = ()
    ) -> None:
        self.bindings = bindings
        self.nodes = list(nodes)
        #: The scope of every surveyed node (a node not surveyed is at module scope).
        self._scope_of = {id(n): s for n, s in zip(self.nodes, scopes, strict=False) if s}
        self._memo: dict[int, tuple[str, ...]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._resolving: set[str] = set()
        self._labels: dict[int, Labels] = {}
        self._name_labels: dict[tuple[str, int], Labels] = {}
        self._labelling: set[tuple[str, int]] = set()
        self._values: dict[int, Value | None] = {}
        self._evaluating: set[str] = set()
        self._steps = 0
        #: Values a name receives after its binding (``d[k] = v``, ``d.update(v)``,
        #: ``f.write(v)``), by scope; an attribute (``self.env``) is module-wide.
        self.contributed: dict[str, dict[int, list[ast.expr]]] = {}
        self._remote: dict[str, set[int]] | None = None
        self._returned: dict[str, list[ast.expr]] = {}

    def scope(self, node: ast.AST) -> int:
        """The scope ``node`` was surveyed in (0: the module)."""
        return self._scope_of.get(id(node), 0)

    # -- resolution ----------------------------------------------------------------

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        """Fully qualified dotted names ``node`` may denote (empty when unknown)."""
        key = id(node)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if depth > MAX_RESOLVE_DEPTH:
            return ()
        result = self._resolve(node, depth)
        self._memo[key] = result
        return result

    def _resolve(self, node: ast.AST, depth: int) -> tuple[str, ...]:
        if isinstance(node, ast.Name):
            return self.resolve_name(node.id, depth)
        if isinstance(node, ast.Attribute):
            return tuple(f"{base}.{node.attr}" for base in self.resolve(node.value, depth + 1))
        if isinstance(node, ast.Subscript):
            return self._resolve_subscript(node, depth)
        if isinstance(node, ast.Call):
            return self._resolve_call(node, depth)
        return ()

    def resolve_name(self, name: str, depth: int = 0) -> tuple[str, ...]:
        """What the bare name ``name`` may denote (imports, assignments, builtins)."""
        cached = self._names.get(name)
        if cached is not None:
            return cached
        if name in self._resolving:  # a = b; b = a
            return ()
        self._resolving.add(name)
        found: list[str] = list(self.bindings.imports.get(name, ()))
        for value in self.bindings.assigned.get(name, ())[:MAX_CANDIDATES]:
            found.extend(self.resolve(value, depth + 1))
        if name == "__builtins__":
            found.append("builtins")
        elif name not in self.bindings.imports and name not in self.bindings.defined:
            # Unbound by import or def: it is the builtin (or a star import).
            found.append(f"builtins.{name}")
            found.extend(f"{m}.{name}" for m in self.bindings.star_modules)
        self._resolving.discard(name)
        result = tuple(dict.fromkeys(found))[:MAX_CANDIDATES]
        self._names[name] = result
        return result

    def _resolve_subscript(self, node: ast.Subscript, depth: int) -> tuple[str, ...]:
        key = self.name_value(node.slice)
        if key is None:
            return ()
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            # builtins.__dict__["eval"] is builtins.eval
            return tuple(f"{b}.{key}" for b in self.resolve(value.value, depth + 1))
        if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            funcs = self.resolve(value.func, depth + 1)
            # vars(builtins)["eval"] likewise
            if "builtins.vars" in funcs:
                return tuple(f"{b}.{key}" for b in self.resolve(value.args[0], depth + 1))
            return ()
        if (
            isinstance(value, ast.Call)
            and not value.args
            and "builtins.globals" in self.resolve(value.func, depth + 1)
            and key == "__builtins__"
        ):
            return ("builtins",)  # globals()["__builtins__"]
        bases = self.resolve(value, depth + 1)
        if "sys.modules" in bases:
            return (key,)
        if "builtins" in bases:
            return (f"builtins.{key}",)  # __builtins__["eval"] (a dict outside __main__)
        return ()

    def _resolve_call(self, node: ast.Call, depth: int) -> tuple[str, ...]:
        funcs = self.resolve(node.func, depth + 1)
        if not funcs:
            return ()
        if node.args and not DYNAMIC_IMPORTERS.isdisjoint(funcs):
            # __import__("os") evaluates to the module os (for a dotted name
            # __import__ returns the top package, import_module the leaf).
            name = self.name_value(node.args[0])
            if name is None:
                return ()
            if "builtins.__import__" in funcs and "fromlist" not in {k.arg for k in node.keywords}:
                return tuple(dict.fromkeys((name, name.split(".", 1)[0])))
            return (name,)
        if "builtins.getattr" in funcs and len(node.args) >= 2:
            attr = self.name_value(node.args[1])
            if attr is None:
                return ()
            return tuple(f"{b}.{attr}" for b in self.resolve(node.args[0], depth + 1))
        if "builtins.vars" in funcs and len(node.args) == 1:
            # vars(builtins) is builtins' namespace: vars(b)[name] resolves through it
            return tuple(f"{b}.__dict__" for b in self.resolve(node.args[0], depth + 1))
        # An object made by a network module (a session, a socket, a connection):
        # its methods are network calls too.
        return tuple(f"{f}()" for f in funcs if is_network(f))[:MAX_CANDIDATES]

    def name_value(self, node: ast.AST) -> str | None:
        """A string a name is looked up by: folded, or evaluated from literals."""
        folded = fold_str(node)
        if folded is not None:
            return folded
        value = self.evaluate(node)
        if isinstance(value, bytes):
            return value.decode("latin-1")
        return value if isinstance(value, str) else None

    # -- constant evaluation ----------------------------------------------------------

    def evaluate(self, node: ast.AST) -> Value | None:
        """The value of ``node`` when it is computed from literals only, else ``None``."""
        try:
            return self._evaluate(node, 0)
        except _BudgetError:
            return None

    def _step(self) -> None:
        self._steps += 1
        if self._steps > _BUDGET:
            raise _BudgetError

    def _evaluate(self, node: ast.AST, depth: int) -> Value | None:
        key = id(node)
        if key in self._values:
            return self._values[key]
        if depth > MAX_RESOLVE_DEPTH:
            return None
        self._step()
        value = self._compute(node, depth + 1)
        if isinstance(value, str | bytes | list) and len(value) > _MAX_VALUE:
            value = None
        self._values[key] = value
        return value

    def _compute(self, node: ast.AST, depth: int) -> Value | None:
        ev = self._evaluate
        if isinstance(node, ast.Constant):
            v = node.value
            return v if isinstance(v, str | bytes | int) and not isinstance(v, bool) else None
        if isinstance(node, ast.Name):
            return self._evaluate_name(node.id, depth)
        if isinstance(node, ast.List | ast.Tuple):
            items = [ev(e, depth) for e in node.elts]
            return None if any(i is None for i in items) else [i for i in items if i is not None]
        if isinstance(node, ast.BinOp):
            return _binop(node.op, ev(node.left, depth), ev(node.right, depth))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Invert):
            operand = ev(node.operand, depth)
            if not isinstance(operand, int):
                return None
            return (
                -operand
                if isinstance(node.op, ast.USub)
                else (operand if isinstance(node.op, ast.UAdd) else ~operand)
            )
        if isinstance(node, ast.JoinedStr):
            parts = [ev(v, depth) for v in node.values]
            return (
                "".join(p for p in parts if isinstance(p, str))
                if all(isinstance(p, str) for p in parts)
                else None
            )
        if isinstance(node, ast.FormattedValue) and node.format_spec is None:
            inner = ev(node.value, depth)
            return str(inner) if isinstance(inner, str | int) else None
        if isinstance(node, ast.Subscript):
            return _subscript(ev(node.value, depth), node.slice, lambda n: ev(n, depth))
        if isinstance(node, ast.Call):
            return self._evaluate_call(node, depth)
        return None

    def _evaluate_name(self, name: str, depth: int) -> Value | None:
        values = self.bindings.assigned.get(name, ())
        if (
            len(values) != 1
            or name in self._evaluating
            or name in self.bindings.iterated
            or name in self.contributed
            or len(self.bindings.scoped.get(name, {})) > 1
        ):
            return None
        self._evaluating.add(name)
        try:
            return self._evaluate(values[0], depth)
        finally:
            self._evaluating.discard(name)

    def _evaluate_call(self, node: ast.Call, depth: int) -> Value | None:
        if node.keywords:
            return None
        ev = self._evaluate
        func = node.func
        args = node.args
        if isinstance(func, ast.Attribute):
            # a module's function first (base64.b64decode), else a method of a value
            for name in self.resolve(func):
                if "." in name and not name.startswith("builtins."):
                    result = _call(name, [ev(a, depth) for a in args])
                    if result is not None:
                        return result
            method = func.attr
            receiver = func.value
            if method == "join" and len(args) == 1:
                sep = ev(receiver, depth)
                items = self._iterable(args[0], depth)
                if (
                    isinstance(sep, str)
                    and items is not None
                    and all(isinstance(i, str) for i in items)
                ):
                    return sep.join(i for i in items if isinstance(i, str))
                return None
            if method == "fromhex" and len(args) == 1:
                text = ev(args[0], depth)
                try:
                    return bytes.fromhex(text) if isinstance(text, str) else None
                except ValueError:
                    return None
            base = ev(receiver, depth)
            values = [ev(a, depth) for a in args]
            return _method(base, method, values, flow=self, node=node, depth=depth)
        names = self.resolve(func)
        if (
            len(args) == 1
            and isinstance(args[0], ast.Name)
            and not ({"builtins.str", "builtins.repr"}.isdisjoint(names))
        ):
            builtin = args[0].id
            if (
                builtin in _PRINTABLE_BUILTINS
                and builtin not in self.bindings.assigned
                and builtin not in self.bindings.imports
                and builtin not in self.bindings.defined
            ):
                return str(getattr(builtins, builtin, "")) or None
        values = [ev(a, depth) for a in args]
        for name in names:
            result = _call(name, values)
            if result is not None:
                return result
        if names and "builtins.map" in names and len(args) == 2:
            items = self._iterable(args[1], depth)
            fn = self.resolve(args[0])
            if items is not None and "builtins.chr" in fn:
                return [_chr(i) for i in items] if all(isinstance(i, int) for i in items) else None
        if "builtins.reversed" in names and len(args) == 1:
            inner = values[0]
            return list(reversed(list(inner))) if isinstance(inner, str | list) else None
        return None

    def _iterable(self, node: ast.AST, depth: int) -> list[Value] | None:
        value = self._evaluate(node, depth)
        if isinstance(value, str):
            return list(value)
        if isinstance(value, bytes):
            return list(value)
        if isinstance(value, list):
            return value
        return None

    # -- labels -----------------------------------------------------------------------

    def labels(self, node: ast.AST) -> Labels:
        """The sources ``node``'s value may carry (empty when none, or when unknown)."""
        try:
            return self._label(node, 0)
        except _BudgetError:
            return _NONE

    def _label(self, node: ast.AST, depth: int) -> Labels:
        key = id(node)
        cached = self._labels.get(key)
        if cached is not None:
            return cached
        if depth > MAX_RESOLVE_DEPTH:
            return _NONE
        self._step()
        self._labels[key] = _NONE  # a cycle through this node adds nothing
        result = self._compute_labels(node, depth + 1)
        self._labels[key] = result
        return result

    def _union(self, nodes: Iterable[ast.AST | None], depth: int) -> Labels:
        out: set[Label] = set()
        for n in nodes:
            if n is not None:
                out |= self._label(n, depth)
        return frozenset(out)

    def _compute_labels(self, node: ast.AST, depth: int) -> Labels:
        if isinstance(node, ast.Constant):
            return _NONE
        if isinstance(node, ast.Name):
            return self._name_labels_of(node.id, self.scope(node), depth)
        if isinstance(node, ast.Attribute):
            own = self._reference_labels(self.resolve(node))
            dotted = _dotted(node)
            if dotted is not None and dotted in self.contributed:
                values = self.contributed[dotted].get(0, [])
                own = own | self._union(values[:MAX_CANDIDATES], depth)
            # message.text, response.content: the receiver's labels carry it
            return own | self._label(node.value, depth)
        if isinstance(node, ast.Subscript):
            return self._subscript_labels(node, depth)
        if isinstance(node, ast.Call):
            return self._call_labels(node, depth)
        if isinstance(node, ast.BinOp):
            both = self._union((node.left, node.right), depth)
            if isinstance(node.op, ast.BitXor):
                return both | {(Source.DECODED, "XOR")}
            return both
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return self._union((node.elt, *(g.iter for g in node.generators)), depth)
        if isinstance(node, ast.DictComp):
            return self._union((node.key, node.value, *(g.iter for g in node.generators)), depth)
        if isinstance(node, ast.Dict):
            return self._union((*node.keys, *node.values), depth)
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.BoolOp):
            return self._union(
                node.elts if not isinstance(node, ast.BoolOp) else node.values, depth
            )
        if isinstance(node, ast.JoinedStr):
            return self._union(node.values, depth)
        if isinstance(node, ast.FormattedValue | ast.Await | ast.Starred | ast.NamedExpr):
            return self._label(node.value, depth)
        if isinstance(node, ast.IfExp):
            return self._union((node.body, node.orelse), depth)
        return _NONE

    def name_labels(self, name: str, scope: int) -> Labels:
        """What the name ``name`` carries where ``scope`` sees it."""
        try:
            return self._name_labels_of(name, scope, 0)
        except _BudgetError:
            return _NONE

    def _name_labels_of(self, name: str, scope: int, depth: int) -> Labels:
        key = (name, scope)
        cached = self._name_labels.get(key)
        if cached is not None:
            return cached
        if key in self._labelling:
            return _NONE
        self._labelling.add(key)
        try:
            out: set[Label] = set(self._reference_labels(self.resolve_name(name)))
            bound = self.bindings.scoped.get(name, {})
            added = self.contributed.get(name, {})
            # Python's rule: the innermost scope that binds the name is the one
            for level in self._chain(scope):
                if level in bound or level in added:
                    values = [*bound.get(level, ()), *added.get(level, ())][:MAX_CANDIDATES]
                    out |= self._union(values, depth)
                    break
            handlers = self.remote_params().get(name)
            if handlers and not handlers.isdisjoint(self._chain(scope)):
                out.add((Source.REMOTE, "a chat bot's message"))
        finally:
            self._labelling.discard(key)
        result = frozenset(out)
        self._name_labels[key] = result
        return result

    def _chain(self, scope: int) -> list[int]:
        """``scope`` and the scopes enclosing it, innermost first, the module last."""
        chain = [scope]
        parents = self.bindings.parents
        while chain[-1] != 0 and len(chain) < MAX_RESOLVE_DEPTH:
            chain.append(parents.get(chain[-1], 0))
        if chain[-1] != 0:
            chain.append(0)
        return chain

    def _reference_labels(self, names: tuple[str, ...]) -> Labels:
        if not ENVIRON_MAPPINGS.isdisjoint(names):
            return frozenset({(Source.ENVIRONMENT, "os.environ")})
        if "__file__" in {n.removeprefix("builtins.") for n in names}:
            return frozenset({(Source.PACKAGED, "__file__")})
        return _NONE

    def _subscript_labels(self, node: ast.Subscript, depth: int) -> Labels:
        owners = self.resolve(node.value)
        if not ENVIRON_MAPPINGS.isdisjoint(owners):
            key = self.name_value(node.slice)
            if key is None:
                return self._label(node.slice, depth)
            return _env_read(key)
        return self._label(node.value, depth)

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
                return _env_read(key)
            # one variable by a computed name carries what the name carries
            # (a key walked out of os.environ is the environment, a constant
            # of the class is one setting)
            return self._label(node.args[0], depth) if node.args else _NONE
        if method in {"recv", "recvfrom", "recv_into", "makefile"} and any(
            is_network(f) for f in funcs
        ):
            # what a socket peer sends: a command, in a remote shell's loop
            out.add((Source.REMOTE, "a network peer's message"))
        for name in funcs:
            if name in DECODERS:
                out.add((Source.DECODED, name.removeprefix("builtins.")))
            elif name in RECON_FUNCTIONS:
                out.add((Source.RECON, name))
            elif downloads(name):
                out.add((Source.DOWNLOADED, name))
            elif name in {"builtins.open", "io.open", "codecs.open"} and node.args:
                out |= _file_labels(self.path_text(node.args[0]))
        codec = str(self.name_value(node.args[-1]) or "").lower() if node.args else ""
        if (
            method in DECODER_METHODS
            or (method == "decode" and codec in DECODING_CODECS)
            or (method == "encode" and codec in {"rot13", "rot_13"})
        ):
            out.add((Source.DECODED, f".{method}()"))
        if method in {"read", "readline", "text", "json"} and any(
            downloads(f) for f in self.resolve(func)
        ):
            out.add((Source.DOWNLOADED, method))
        if method in {"read_text", "read_bytes", "open"} and receiver is not None:
            out |= _file_labels(self.path_text(receiver))
        if method == "join" and node.args and self._chr_join(node.args[0]):
            out.add((Source.DECODED, "join(chr(...))"))
        out |= self._union(args, depth)
        if receiver is not None:
            out |= self._label(receiver, depth)
        if isinstance(func, ast.Name) and func.id in self.bindings.defined:
            # a function of this file: its result carries what it returns
            out |= self._union(self._returns(func.id), depth)
        return frozenset(out)

    def _returns(self, name: str) -> list[ast.expr]:
        """The values the functions of this file named ``name`` return (bounded)."""
        cached = self._returned.get(name)
        if cached is None:
            cached = []
            for fn in self.bindings.functions:
                if fn.name != name:
                    continue
                stack: list[ast.AST] = list(fn.body)
                budget = 2000
                while stack and budget:
                    budget -= 1
                    item = stack.pop()
                    if isinstance(item, ast.Return) and item.value is not None:
                        cached.append(item.value)
                    elif not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                        stack.extend(ast.iter_child_nodes(item))
            self._returned[name] = cached
        return cached

    def path_text(self, node: ast.AST) -> str | None:
        """The literal pieces of a path expression joined (``Path.home() / ".ssh" / "id_rsa"``)."""
        pieces: list[str] = []
        stack = [node]
        budget = 64
        while stack and budget:
            budget -= 1
            item = stack.pop()
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                pieces.append(item.value)
            elif isinstance(item, ast.BinOp):
                stack.extend((item.right, item.left))
            elif isinstance(item, ast.Call):
                stack.extend(reversed(item.args))
                if isinstance(item.func, ast.Attribute):
                    stack.append(item.func.value)
            elif isinstance(item, ast.Name):
                # a path bound once, or walked (for p in glob(".../.ssh/*"))
                stack.extend(self.bindings.assigned.get(item.id, ())[:1])
                stack.extend(self.bindings.iterated.get(item.id, ())[:1])
        return "/".join(pieces) if pieces else None

    def path_labels(self, node: ast.AST) -> Labels:
        """Credential or reconnaissance labels of a path expression's literal pieces."""
        return _file_labels(self.path_text(node))

    def _chr_join(self, arg: ast.AST) -> bool:
        if isinstance(arg, ast.GeneratorExp | ast.ListComp) and isinstance(arg.elt, ast.Call):
            return "builtins.chr" in self.resolve(arg.elt.func)
        if isinstance(arg, ast.Call) and arg.args and "builtins.map" in self.resolve(arg.func):
            return "builtins.chr" in self.resolve(arg.args[0])
        return False

    def remote_params(self) -> dict[str, set[int]]:
        """Parameters of a chat bot's handlers, by name and handler: a remote user's message.

        A handler is a function of a file that imports a bot framework and is
        decorated, or passed to a call into the framework
        (``CommandHandler("run", run)``).
        """
        if self._remote is not None:
            return self._remote
        found: dict[str, set[int]] = {}
        frameworks = {
            module.split(".", 1)[0]
            for modules in self.bindings.imports.values()
            for module in modules
        } & BOT_FRAMEWORKS
        if frameworks:
            registered = {
                a.id
                for n in self.nodes
                if isinstance(n, ast.Call)
                and any(f.split(".", 1)[0] in frameworks for f in self.resolve(n.func))
                for a in n.args
                if isinstance(a, ast.Name)
            }
            for fn in self.bindings.functions:
                if fn.decorator_list or fn.name in registered:
                    a = fn.args
                    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
                    params += [p for p in (a.vararg, a.kwarg) if p is not None]
                    for p in params:
                        if p.arg not in {"self", "cls"}:
                            found.setdefault(p.arg, set()).add(id(fn))
        self._remote = found
        return found

    def note_contribution(self, name: str, value: ast.expr, scope: int) -> None:
        """``name`` receives ``value`` after its binding (a store, an update, a write)."""
        where = 0 if "." in name else scope
        self.contributed.setdefault(name, {}).setdefault(where, []).append(value)
        self._name_labels.clear()
        self._labels.clear()


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _env_read(key: str) -> Labels:
    if key.upper() in RECON_ENV_NAMES:
        return frozenset({(Source.RECON, f"${key}")})
    if secret_name(key):
        return frozenset({(Source.SECRET, key)})
    return _NONE


def _file_labels(path: str | None) -> Labels:
    if not path:
        return _NONE
    out: set[Label] = set()
    for marker, what in _CREDENTIAL_MARKERS.items():
        if marker in path:
            out.add((Source.CREDENTIAL, what))
    if path in RECON_FILES:
        out.add((Source.RECON, path))
    return frozenset(out)


def _chr(code: Value) -> str:
    return chr(code) if isinstance(code, int) and 0 <= code < 0x110000 else "\ufffd"


def _binop(op: ast.operator, left: Value | None, right: Value | None) -> Value | None:
    if left is None or right is None:
        return None
    if isinstance(op, ast.Add):
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, bytes) and isinstance(right, bytes):
            return left + right
        if isinstance(left, int) and isinstance(right, int):
            return left + right
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        return None
    if isinstance(op, ast.Mult):
        if (
            isinstance(left, str | bytes)
            and isinstance(right, int)
            and len(left) * right <= _MAX_VALUE
        ):
            return left * right
        return left * right if isinstance(left, int) and isinstance(right, int) else None
    if isinstance(op, ast.BitXor) and isinstance(left, int) and isinstance(right, int):
        return left ^ right
    if isinstance(op, ast.Sub) and isinstance(left, int) and isinstance(right, int):
        return left - right
    return None


def _subscript(
    value: Value | None, index: ast.AST, ev: Callable[[ast.AST], Value | None]
) -> Value | None:
    if not isinstance(value, str | bytes | list):
        return None
    if isinstance(index, ast.Slice):
        parts = (index.lower, index.upper, index.step)
        bounds = [None if p is None else ev(p) for p in parts]
        if any(
            p is not None and not isinstance(b, int) for p, b in zip(parts, bounds, strict=True)
        ):
            return None
        lower, upper, step = (b if isinstance(b, int) else None for b in bounds)
        if step == 0:
            return None
        return value[lower:upper:step]
    position = ev(index)
    if not isinstance(position, int) or not -len(value) <= position < len(value):
        return None
    item = value[position]
    return item if isinstance(item, str | int | list) else None


def _method(
    base: Value | None,
    method: str,
    args: list[Value | None],
    *,
    flow: Flow,
    node: ast.Call,
    depth: int,
) -> Value | None:
    if isinstance(base, bytes) and method == "decode":
        encoding = args[0] if args else "utf-8"
        if not isinstance(encoding, str):
            return None
        try:
            return codecs.decode(base, encoding) if encoding.lower() in _TEXT_CODECS else None
        except (ValueError, LookupError):
            return None
    if isinstance(base, str) and method == "encode":
        try:
            return base.encode("utf-8", "surrogatepass")
        except UnicodeError:
            return None
    if isinstance(base, str | bytes) and method in {"lower", "upper", "strip", "lstrip", "rstrip"}:
        return getattr(base, method)() if not args else None
    if isinstance(base, str) and method == "replace" and len(args) == 2:
        old, new = args
        if isinstance(old, str) and isinstance(new, str) and (old or not base):
            out = base.replace(old, new)
            return out if len(out) <= _MAX_VALUE else None
        return None
    if method == "decrypt" and isinstance(args[0] if args else None, bytes | str):
        return _fernet(flow, node, args[0], depth)
    return None


_TEXT_CODECS = frozenset({"utf-8", "utf8", "ascii", "latin-1", "latin1", "iso-8859-1", "cp1252"})


def _fernet(flow: Flow, node: ast.Call, token: Value | None, depth: int) -> Value | None:
    """``Fernet(key).decrypt(token)`` with both literal: the plaintext (no code runs)."""
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    if not isinstance(receiver, ast.Call) or len(receiver.args) != 1:
        if isinstance(receiver, ast.Name):
            bound = flow.bindings.assigned.get(receiver.id, ())
            receiver = bound[0] if len(bound) == 1 else None
        if not isinstance(receiver, ast.Call) or len(receiver.args) != 1:
            return None
    if not any(n.endswith("fernet.Fernet") for n in flow.resolve(receiver.func)):
        return None
    key = flow._evaluate(receiver.args[0], depth)
    if not isinstance(key, bytes | str) or not isinstance(token, bytes | str):
        return None
    try:
        from cryptography.fernet import Fernet, InvalidToken  # a dependency of caplet
    except ImportError:  # pragma: no cover - cryptography is a declared dependency
        return None
    try:
        return Fernet(key).decrypt(token)
    except (InvalidToken, ValueError, TypeError):
        return None


def _call(name: str, values: list[Value | None]) -> Value | None:
    """Pure builtins and decoders applied to evaluated arguments (never anything else)."""
    if not values or any(v is None for v in values):
        return None
    first = values[0]
    try:
        if name == "builtins.chr" and isinstance(first, int):
            return _chr(first)
        if name == "builtins.ord" and isinstance(first, str) and len(first) == 1:
            return ord(first)
        if name in {"builtins.str", "builtins.repr"} and isinstance(first, str | int):
            return str(first) if name == "builtins.str" else repr(first)
        if name in {"builtins.bytes", "builtins.bytearray"} and isinstance(first, list):
            codes = [i for i in first if isinstance(i, int) and 0 <= i < 256]
            return bytes(codes) if len(codes) == len(first) else None
        if name in {"builtins.list", "builtins.tuple"} and isinstance(first, str | list):
            return list(first)
        if name == "builtins.bytes.fromhex" and isinstance(first, str):
            return bytes.fromhex(first)
        data = first.encode("latin-1") if isinstance(first, str) else first
        if not isinstance(data, bytes):
            return None
        if name in {"base64.b64decode", "base64.decodebytes", "base64.standard_b64decode"}:
            return base64.b64decode(data + b"=" * (-len(data) % 4))
        if name == "base64.urlsafe_b64decode":
            return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))
        if name == "base64.b32decode":
            return base64.b32decode(data + b"=" * (-len(data) % 8))
        if name == "base64.b16decode":
            return base64.b16decode(data, casefold=True)
        if name == "base64.b85decode":
            return base64.b85decode(data)
        if name == "base64.a85decode":
            return base64.a85decode(data)
        if name in {"binascii.unhexlify", "binascii.a2b_hex"}:
            return binascii.unhexlify(data)
        if name == "binascii.a2b_base64":
            return binascii.a2b_base64(data)
        if name in {"zlib.decompress", "gzip.decompress"}:
            inflater = zlib.decompressobj(47)  # zlib or gzip header, detected
            out = inflater.decompress(data, _MAX_VALUE)
            return out if not inflater.unconsumed_tail else None
        if name == "codecs.decode" and len(values) == 2 and isinstance(values[1], str):
            codec = values[1].lower()
            if codec in {"rot13", "rot_13"} and isinstance(first, str):
                return codecs.decode(first, "rot13")
            if codec in {"hex", "base64"}:
                return codecs.decode(data, codec)
    except (ValueError, TypeError, binascii.Error, zlib.error, OverflowError):
        return None
    return None
