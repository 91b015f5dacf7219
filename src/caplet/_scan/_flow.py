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
from collections.abc import Iterable
from typing import Final

from caplet._scan._evaluate import BudgetError, Evaluator
from caplet._scan._resolve import is_network
from caplet._scan._rules import ENV_FUNCTIONS, ENV_METHODS, ENVIRON_MAPPINGS
from caplet._scan._sources import (
    BOT_FRAMEWORKS,
    DECODER_METHODS,
    DECODERS,
    DECODING_CODECS,
    HTTP_CLIENT_MODULES,
    NETWORK_READS,
    PROCESS_OUTPUTS,
    PUBLIC_IP_SERVICES,
    RECON_ENV_NAMES,
    RECON_FILES,
    RECON_FUNCTIONS,
    RECON_PROGRAMS,
    Source,
)
from caplet._scan._syntax import MAX_CANDIDATES, MAX_RESOLVE_DEPTH, Bindings
from caplet._scan._syntax import dotted as _dotted

__all__ = ["Flow", "Label", "Labels", "downloads", "is_network", "secret_name"]

#: One source a value may carry, with a detail (a variable's name, which credential).
Label = tuple[Source, str]
Labels = frozenset[Label]
_NONE: Final[Labels] = frozenset()

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
    # commands typed with their passwords and tokens (SentinelSneak took them, 2022)
    ".bash_history": "shell history",
    ".zsh_history": "shell history",
}


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


class Flow(Evaluator):
    """The three data-flow questions for one file (memoised, bounded).

    Resolution comes from :class:`caplet._scan._resolve.Resolver`, constant
    evaluation from :class:`caplet._scan._evaluate.Evaluator`; the labels
    are this class's own.
    """

    def __init__(
        self, bindings: Bindings, nodes: Iterable[ast.AST] = (), scopes: Iterable[int] = ()
    ) -> None:
        super().__init__(bindings)
        self.nodes = list(nodes)
        self._scopes = scopes
        #: The scope of every surveyed node (a node not surveyed is at module scope),
        #: made on the first question: most files never ask (issue 16's speed).
        self._scope_of: dict[int, int] | None = None
        #: The surveyed nodes by class, each list in the survey's order (on first need).
        self._kinds: dict[type, list[ast.AST]] | None = None
        self._labels: dict[int, Labels] = {}
        self._name_labels: dict[tuple[str, int], Labels] = {}
        self._labelling: set[tuple[str, int]] = set()
        self._remote: dict[str, set[int]] | None = None
        self._passed: dict[int, dict[str, list[ast.expr]]] | None = None
        self._returned: dict[str, list[ast.expr]] = {}

    def scope(self, node: ast.AST) -> int:
        """The scope ``node`` was surveyed in (0: the module)."""
        scope_of = self._scope_of
        if scope_of is None:
            # the module's zeros kept too: built at C speed, a comprehension was 2% of a
            # package scan's CPU on the benign corpus (issue 16)
            scope_of = self._scope_of = dict(zip(map(id, self.nodes), self._scopes, strict=False))
            self._scopes = ()
        return scope_of.get(id(node), 0)

    def of_kind(self, kind: type[ast.AST]) -> list[ast.AST]:
        """The surveyed nodes of class ``kind``, in the survey's order.

        The checks that look at every node of a file for one or two classes (the calls
        passing arguments to this file's functions, a shortcut's name, ...) each walked
        the whole node list; one pass now sorts it by class for all of them (issue 16).
        """
        kinds = self._kinds
        if kinds is None:
            kinds = self._kinds = {}
            for n in self.nodes:
                group = kinds.get(type(n))
                if group is None:
                    kinds[type(n)] = [n]
                else:
                    group.append(n)
        return kinds.get(kind, [])

    def calls(self) -> list[ast.Call]:
        """The surveyed calls, in the survey's order."""
        return self.of_kind(ast.Call)  # type: ignore[return-value]

    # -- labels -----------------------------------------------------------------------

    def labels(self, node: ast.AST) -> Labels:
        """The sources ``node``'s value may carry (empty when none, or when unknown)."""
        try:
            return self._label(node, 0)
        except BudgetError:
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
        if isinstance(node, ast.Lambda):
            # map(lambda b: b ^ 7, data): what the lambda computes is what the call yields
            return self._label(node.body, depth)
        return _NONE

    def name_labels(self, name: str, scope: int) -> Labels:
        """What the name ``name`` carries where ``scope`` sees it."""
        try:
            return self._name_labels_of(name, scope, 0)
        except BudgetError:
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
            else:
                # a parameter: what this file's calls of its function pass to it
                for level in self._chain(scope):
                    passed = self.passed_arguments().get(level, {}).get(name)
                    if passed:
                        out |= self._union(passed[:MAX_CANDIDATES], depth)
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
        if not {"operator.xor", "operator.__xor__"}.isdisjoint(names):
            return frozenset({(Source.DECODED, "XOR")})  # map(operator.xor, data, key)
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
                if node.args and _public_ip(self.name_value(node.args[0])):
                    out.add((Source.RECON, "public IP"))
            elif name in {"builtins.open", "io.open", "codecs.open"} and node.args:
                out |= _file_labels(self.path_text(node.args[0]))
        if node.args and not PROCESS_OUTPUTS.isdisjoint(funcs):
            # check_output("wmic csproduct get uuid"): a program's output that is the host
            program = self._program_word(node.args[0])
            if program in RECON_PROGRAMS:
                out.add((Source.RECON, program))
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
        if "builtins.chr" in funcs and node.args and self._shifted(node.args[0]):
            out.add((Source.DECODED, "chr(ord(...) shifted)"))
        if method == "to_bytes" and receiver is not None and not node.keywords:
            out.add((Source.DECODED, "int.to_bytes"))  # a program packed into an integer
        if method == "translate" and node.args and self._substitution(node.args[0]):
            out.add((Source.DECODED, "str.translate(maketrans(...))"))
        if method == "join" and node.args and self._chr_join(node.args[0]):
            out.add((Source.DECODED, "join(chr(...))"))
        out |= self._union(args, depth)
        if receiver is not None:
            out |= self._label(receiver, depth)
        if isinstance(func, ast.Name) and func.id in self.bindings.defined:
            # a function of this file: its result carries what it returns
            out |= self._union(self._returns(func.id), depth)
        return frozenset(out)

    def _program_word(self, command: ast.expr) -> str:
        """The program a command starts, lowered, without its folder or ``.exe``."""
        first = command
        if isinstance(command, ast.List | ast.Tuple) and command.elts:
            first = command.elts[0]
        text = self.name_value(first) or ""
        word = text.split(None, 1)[0] if text.strip() else ""
        return word.replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe")

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

    def passed_arguments(self) -> dict[int, dict[str, list[ast.expr]]]:
        """By function scope and parameter, the arguments this file's calls pass to it:
        ``def load(blob): exec(blob)`` called as ``load(b64decode(...))`` runs decoded
        data (a function or a lambda bound to a name, called by that name)."""
        if self._passed is not None:
            return self._passed
        found: dict[int, dict[str, list[ast.expr]]] = {}
        targets: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda]] = {}
        for defined in self.bindings.functions:
            targets.setdefault(defined.name, []).append(defined)
        for name, values in self.bindings.assigned.items():
            for value in values:
                if isinstance(value, ast.Lambda):
                    targets.setdefault(name, []).append(value)
        # One pass over the nodes (it was two: 4% of a package scan's CPU on the benign
        # corpus, issue 16); a callee's name is looked up before its receiver is checked:
        # most calls name no function of this file.
        for n in self.calls():
            func = n.func
            if isinstance(func, ast.Lambda):
                # (lambda x: exec(x))(blob): the lambda's parameters are the call's arguments
                slots = found.setdefault(id(func), {})
                for param, arg in zip(func.args.args, n.args, strict=False):
                    if not isinstance(arg, ast.Starred):
                        slots.setdefault(param.arg, []).append(arg)
                continue
            method = isinstance(func, ast.Attribute)
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            candidates = targets.get(name)
            if not candidates:
                continue
            if isinstance(func, ast.Attribute) and not self._own_instance(func.value):
                continue  # out.write(data) is not this file's def write(self, s)
            for fn in candidates[:MAX_CANDIDATES]:
                params = [*fn.args.posonlyargs, *fn.args.args]
                if method:
                    # obj.go(data) into def go(self, d): the receiver is self
                    if not params or params[0].arg not in {"self", "cls"}:
                        continue
                    params = params[1:]
                slots = found.setdefault(id(fn), {})
                for param, arg in zip(params, n.args, strict=False):
                    if not isinstance(arg, ast.Starred):
                        slots.setdefault(param.arg, []).append(arg)
                if not n.keywords:
                    continue
                names = {p.arg for p in (*params, *fn.args.kwonlyargs)}
                for keyword in n.keywords:
                    if keyword.arg in names:
                        slots.setdefault(keyword.arg, []).append(keyword.value)
        self._passed = found
        return found

    def _own_instance(self, receiver: ast.expr) -> bool:
        """``self``, or an object made by a class of this file (``L()``, ``x = L()``)."""
        if isinstance(receiver, ast.Name):
            if receiver.id in {"self", "cls"}:
                return True
            bound = self.bindings.assigned.get(receiver.id, ())
            receiver = bound[0] if len(bound) == 1 else receiver
        return (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id in self.bindings.defined
            and receiver.func.id not in self.bindings.imports
        )

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
        if not frameworks:
            # telebot = __import__("telebot") or importlib.import_module(...): imported all
            # the same (benchmarks/mutate_recall.py's import-* rewrites, issue 16)
            frameworks = {
                found.split(".", 1)[0]
                for values in self.bindings.assigned.values()
                for value in values[:MAX_CANDIDATES]
                if isinstance(value, ast.Call)
                for found in self.resolve(value)
            } & BOT_FRAMEWORKS
        if frameworks:
            registered = {
                a.id
                for n in self.calls()
                if any(f.split(".", 1)[0] in frameworks for f in self.resolve(n.func))
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


def _env_read(key: str) -> Labels:
    if key.upper() in RECON_ENV_NAMES:
        return frozenset({(Source.RECON, f"${key}")})
    if secret_name(key):
        return frozenset({(Source.SECRET, key)})
    return _NONE


def _public_ip(url: str | None) -> bool:
    """``url`` asks a service for the caller's public IP address (:data:`PUBLIC_IP_SERVICES`)."""
    if not url:
        return False
    host = url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return host in PUBLIC_IP_SERVICES or host.removeprefix("www.") in PUBLIC_IP_SERVICES


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
