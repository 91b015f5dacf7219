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

Everything is bounded: recursion depth, budgets of steps and the size of
evaluated values, so crafted code can make the answers incomplete (the rules
then err towards reporting nothing more), never slow. The labels are exact
and do not depend on the order questions are asked in
(:mod:`caplet._scan._flow_memo`), so a rule may skip a question it cannot
report without changing the answers of others.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from caplet._scan._evaluate import Evaluator
from caplet._scan._flow_calls import CallLabels, returned_values
from caplet._scan._flow_memo import ExactMemo
from caplet._scan._indicators import Indicator, indicator_set
from caplet._scan._network_input import (
    CallbackData,
    PeerInput,
    bot_handler_params,
    callback_data,
    peer_input,
)
from caplet._scan._passed_arguments import passed_arguments
from caplet._scan._resolve import is_network
from caplet._scan._rules import ENVIRON_MAPPINGS
from caplet._scan._shell_split import ShellSplitter
from caplet._scan._source_labels import NONE as _NONE
from caplet._scan._source_labels import (
    Label,
    Labels,
    downloads,
    env_read,
    file_labels,
    secret_name,
)
from caplet._scan._sources import (
    Source,
)
from caplet._scan._syntax import MAX_CANDIDATES, MAX_RESOLVE_DEPTH, Bindings
from caplet._scan._syntax import dotted as _dotted

__all__ = ["Flow", "Label", "Labels", "downloads", "is_network", "secret_name"]


class Flow(Evaluator, ExactMemo, CallLabels):
    """The three data-flow questions for one file (memoised, bounded).

    Resolution comes from :class:`caplet._scan._resolve.Resolver`, constant
    evaluation from :class:`caplet._scan._evaluate.Evaluator`; the labels
    are this class's own, a call's from :class:`caplet._scan._flow_calls.CallLabels`.
    """

    def __init__(
        self, bindings: Bindings, nodes: Iterable[ast.AST] = (), scopes: Iterable[int] = ()
    ) -> None:
        super().__init__(bindings)
        ExactMemo.__init__(self)
        self.nodes = list(nodes)
        self._scopes = scopes
        #: The scope of every surveyed node (a node not surveyed is at module scope),
        #: made on the first question: most files never ask (issue 16's speed).
        self._scope_of: dict[int, int] | None = None
        #: The surveyed nodes by class, each list in the survey's order (on first need).
        self._kinds: dict[type, list[ast.AST]] | None = None
        self._labels: dict[int, Labels] = {}
        self._name_labels: dict[tuple[str, int], Labels] = {}
        self._remote: dict[str, set[int]] | None = None
        self._callbacks: CallbackData | None = None
        self._peer: PeerInput | None = None
        self._passed: dict[int, dict[str, list[ast.expr]]] | None = None
        self._returned: dict[str, list[ast.expr]] = {}
        #: What the methods of this file's classes return, by (class or "", method name).
        self._method_index: dict[tuple[str, str], list[ast.expr]] | None = None
        #: The file's shell texts split into words, each once, within a budget.
        self.shell = ShellSplitter()
        self._indicated: dict[str, tuple[Indicator, ...]] = {}

    def scope(self, node: ast.AST) -> int:
        """The scope ``node`` was surveyed in (0: the module)."""
        scope_of = self._scope_of
        if scope_of is None:
            # the module's zeros kept too: built at C speed, a comprehension was 2% of a
            # package scan's CPU on the benign corpus (issue 16)
            scope_of = self._scope_of = dict(zip(map(id, self.nodes), self._scopes, strict=False))
            self._scopes = ()
        return scope_of.get(id(node), 0)

    def adopt(self, node: ast.AST, like: ast.AST) -> None:
        """A node built by a rule (a call a hand-over makes) gets ``like``'s scope."""
        scope = self.scope(like)
        assert self._scope_of is not None  # built by scope()
        self._scope_of[id(node)] = scope

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
        return self.question(lambda: self._label(node, 0), _NONE)

    def _kept(self) -> int:
        return len(self._labels) + len(self._name_labels)

    def _label(self, node: ast.AST, depth: int) -> Labels:
        cached = self._labels.get(id(node))
        if cached is not None:
            return cached
        if depth > MAX_RESOLVE_DEPTH:
            self.too_deep(lambda: self._label(node, 0))
            return _NONE
        return self.memoised(
            self._labels, id(node), _NONE, self._compute_labels, node=node, depth=depth + 1
        )

    def _final_label(self, node: ast.AST, depth: int) -> Labels:
        """``node``'s labels for a frame that keeps or drops them by what they are."""
        labels, final = self.final(lambda: self._label(node, depth))
        self.filters(final)
        return labels

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
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                own = own | self._peer_attribute(node)
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
        return self.question(lambda: self._name_labels_of(name, scope, 0), _NONE)

    def _name_labels_of(self, name: str, scope: int, depth: int) -> Labels:
        key = (name, scope)
        cached = self._name_labels.get(key)
        if cached is not None:
            return cached
        return self.memoised(
            self._name_labels, key, _NONE, self._compute_name_labels, node=key, depth=depth
        )

    def _compute_name_labels(self, key: tuple[str, int], depth: int) -> Labels:
        name, scope = key
        out: set[Label] = set(self._reference_labels(self.resolve_name(name)))
        bound = self.bindings.scoped.get(name, {})
        added = self.contributed.get(name, {})
        # Python's rule: the innermost scope that binds the name is the one
        for level in self.chain(scope):
            if level in bound or level in added:
                values = [*bound.get(level, ()), *added.get(level, ())][:MAX_CANDIDATES]
                out |= self._union(values, depth)
                break
        else:
            # a parameter: what this file's calls of its function pass to it
            for level in self.chain(scope):
                passed = self.passed_arguments().get(level, {}).get(name)
                if passed:
                    out |= self._union(passed[:MAX_CANDIDATES], depth)
                    break
        handlers = self.remote_params().get(name)
        if handlers and not handlers.isdisjoint(self.chain(scope)):
            out.add((Source.REMOTE, "a chat bot's message"))
        out |= self._callback_labels(name, scope, depth)
        return frozenset(out)

    def chain(self, scope: int) -> list[int]:
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
                return self._walked_keys(node.slice) or self._label(node.slice, depth)
            return env_read(key)
        entry = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if not isinstance(entry, str):
            return self._label(node.value, depth)
        carried = self._final_label(node.value, depth)
        if any(s is Source.ENVIRONMENT for s, _ in carried):
            return self._one_entry(node.value, entry, carried, depth)
        return carried

    def _walked_keys(self, key: ast.expr) -> Labels:
        """Variables read by a loop over names written out (``{k: os.environ.get(k) for k
        in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}``): each one's (branch blind13)."""
        out: set[Label] = set()
        for walked in (
            self.bindings.iterated.get(key.id, ())[:4] if isinstance(key, ast.Name) else ()
        ):
            names = self.evaluate(walked)
            if isinstance(names, tuple | list):
                for name in names[:32]:
                    out |= env_read(name) if isinstance(name, str) else _NONE
        return frozenset(out)

    def _one_entry(self, container: ast.expr, key: str, carried: Labels, depth: int) -> Labels:
        """One entry, by a key written out, of a value that carries the whole environment:
        that variable (``env["HOME"]`` of ``env = os.environ.copy()``), or that field of
        data made from it (``kernel["id"]`` of a server's answer to a request that sent
        the environment: jupyter-server's gateway/managers.py), not the whole environment;
        unless the file stores the environment under that very key (``{"env": dict(
        os.environ)}``, ``d["env"] = ...``). recall6, issue 16."""
        stored: list[ast.expr] = []
        name = _dotted(container)
        for value in self.bindings.assigned.get(name or "", ())[:MAX_CANDIDATES]:
            if isinstance(value, ast.Dict):
                stored += [
                    v
                    for k, v in zip(value.keys, value.values, strict=True)
                    if isinstance(k, ast.Constant) and k.value == key
                ]
        for n in self.of_kind(ast.Assign) if name else ():
            if not isinstance(n, ast.Assign):
                continue
            stored += [
                n.value
                for t in n.targets
                if isinstance(t, ast.Subscript)
                and isinstance(t.slice, ast.Constant)
                and t.slice.value == key
                and _dotted(t.value) == name
            ]
        kept = frozenset(label for label in carried if label[0] is not Source.ENVIRONMENT)
        return kept | env_read(key) | self._union(stored[:MAX_CANDIDATES], depth)

    def indicators(self, text: str) -> tuple[Indicator, ...]:
        """``indicator_set().matches(text)``, once a file for each text: rules ask at each
        call site, and one long constant run at many sites was read anew at each, the
        square of the file (attack25)."""
        found = self._indicated.get(text)
        if found is None:
            found = self._indicated[text] = indicator_set().matches(text)
        return found

    def _returns(self, name: str) -> list[ast.expr]:
        """The values the functions of this file named ``name`` return (bounded)."""
        cached = self._returned.get(name)
        if cached is None:
            cached = []
            for fn in self.bindings.named(name):
                cached.extend(returned_values(fn))
            self._returned[name] = cached
        return cached

    def returned_by(self, name: str) -> list[ast.expr]:
        """The values the functions of this file named ``name`` return (bounded)."""
        return self._returns(name)

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
            elif isinstance(item, ast.BinOp | ast.JoinedStr | ast.Call) and isinstance(
                value := self.evaluate(item), str
            ):
                # a piece glued from literals is one piece ("~/.ss" + "h/id_rsa", "%s%s"
                # % (...), "".join([...])): joined by "/" it spelled no credential (recall10)
                pieces.append(value)
            elif isinstance(item, ast.BinOp):
                stack.extend((item.right, item.left))
            elif isinstance(item, ast.Call):
                stack.extend(reversed(item.args))
                if isinstance(item.func, ast.Attribute):
                    stack.append(item.func.value)
            elif isinstance(item, ast.Name):
                # a path bound once, or walked (for p in glob(".../.ssh/*"))
                stack.extend(self.bindings.assigned.get(item.id, ())[:1])
                for walked in self.bindings.iterated.get(item.id, ())[:1]:
                    if isinstance(walked, ast.Tuple | ast.List | ast.Set):
                        # for name in (".bash_history", ".zsh_history"): each literal
                        # walked is a piece the path may hold (blind32)
                        stack.extend(walked.elts[:8])
                    else:
                        stack.append(walked)
        return "/".join(pieces) if pieces else None

    def path_labels(self, node: ast.AST) -> Labels:
        """Credential or reconnaissance labels of a path expression's literal pieces."""
        return file_labels(self.path_text(node))

    def passed_arguments(self) -> dict[int, dict[str, list[ast.expr]]]:
        """By function scope and parameter, the arguments this file's calls pass to it
        (:func:`caplet._scan._passed_arguments.passed_arguments`)."""
        if self._passed is None:
            self._passed = passed_arguments(self.calls(), self.bindings)
        return self._passed

    def remote_params(self) -> dict[str, set[int]]:
        """Parameters of a chat bot's handlers, by name and handler: a remote user's
        message (:func:`caplet._scan._network_input.bot_handler_params`)."""
        if self._remote is None:
            self._remote = bot_handler_params(self.calls(), self.bindings, self.resolve)
        return self._remote

    def _callback_labels(self, name: str, scope: int, depth: int) -> Labels:
        """What a network callback hands ``name``: a parameter of the function it calls,
        or a list or buffer it fills (:mod:`caplet._scan._network_input`)."""
        found = self._callbacks
        if found is None:
            found = self._callbacks = callback_data(self.calls(), self.bindings, self.resolve)
        if not found.params and not found.filled and not self._peer_input().params:
            return _NONE
        out: set[Label] = set()
        functions = found.params.get(name)
        if functions and not functions.isdisjoint(self.chain(scope)):
            out.add((Source.DOWNLOADED, "a network callback's data"))
        handlers = self._peer_input().params.get(name)
        if handlers and not handlers.isdisjoint(self.chain(scope)):
            out.add((Source.REMOTE, "a network peer's message"))
        for call in found.filled.get(name, ())[:MAX_CANDIDATES]:
            out |= self._label(call, depth)
            if isinstance(call.func, ast.Attribute) and call.func.attr == "setopt":
                # pycurl's WRITEDATA/WRITEFUNCTION: the transfer's body (recall10)
                out.add((Source.DOWNLOADED, "a network transfer's body"))
        return frozenset(out)

    def _peer_input(self) -> PeerInput:
        if self._peer is None:
            classes = [c for c in self.of_kind(ast.ClassDef) if isinstance(c, ast.ClassDef)]
            self._peer = peer_input(classes, self.resolve)
        return self._peer

    def _peer_attribute(self, node: ast.Attribute) -> Labels:
        """``self.rfile`` in a request handler's method: the peer's request."""
        handlers = self._peer_input().attributes.get(node.attr)
        if handlers and not handlers.isdisjoint(self.chain(self.scope(node))):
            return frozenset({(Source.REMOTE, "a network peer's message")})
        return _NONE

    def note_contribution(self, name: str, value: ast.expr, scope: int) -> None:
        """``name`` receives ``value`` after its binding (a store, an update, a write)."""
        where = 0 if "." in name else scope
        self.contributed.setdefault(name, {}).setdefault(where, []).append(value)
        self._name_labels.clear()
        self._labels.clear()
