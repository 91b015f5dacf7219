"""What one file puts into its containers and objects after binding them (recall11).

``xs.append(exec)``, ``xs[0] = exec``, ``xs.insert(0, exec)``, ``xs += [exec]``,
``d["k"] = exec``, ``d.update(k=exec)``, ``d.setdefault("k", exec)``,
``o.f = exec``, ``setattr(o, "f", exec)``: the resolver reads ``xs[0]``, ``d["k"]``
and ``o.f`` through this table as well as through the literal the name was bound
to, so a sink kept in a container and called out of it is the sink (issue 16
point 1). A container whose order the file changes without adding to it
(``xs.reverse()``, ``del xs[0]``, handed to a call that may do either) is
``changed``: its literal is no longer read by position.

The table is made once per file from every surveyed node, not from what the
rules' walk has reached (:attr:`caplet._scan._evaluate.Evaluator.contributed`
grows as the walk goes, breadth first): a function defined above the store
that calls out of the container is resolved the same as a call below it.
Names are compared as written (``dotted``); a name bound to another
(``ys = xs``) shares its stores, so an alias filled is the container filled.
Nothing is evaluated while the table is made; :class:`StoredReads`, the resolver's
mixin, reads it (evaluating keys then), split out of :mod:`caplet._scan._resolve`.
A value stored is followed when it is a builtin or an API that runs code or a program
(``_resolve._hidden``) for attributes and loops; a container looked up by a key or
a position follows every callable it was given, as a dict literal's entries are.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from caplet._scan._syntax import MAX_CANDIDATES, MAX_RESOLVE_DEPTH, Bindings, dotted, fold_str

__all__ = ["StoredReads", "Stores", "container_stores"]

#: What a store adds: the key it is stored under (``None``: any place), and the value.
Entry = tuple[ast.expr | None, ast.expr]

#: Methods that add one element (the value is the last argument).
_ADD_ONE = frozenset({"append", "appendleft", "add", "insert"})
#: Methods that add every element of their argument.
_ADD_ALL = frozenset({"extend", "extendleft"})
#: Methods that change what is where without adding anything.
_REORDER = frozenset(
    {"pop", "popleft", "remove", "clear", "sort", "reverse", "rotate", "popitem", "discard"}
)
#: Every method :func:`_called` records (one set test for the calls of anything else).
_METHODS = _ADD_ONE | _ADD_ALL | _REORDER | {"update", "setdefault", "__setitem__", "__delitem__"}
#: Calls that read a container handed to them and never change it.
_READERS = frozenset(
    {
        "len",
        "print",
        "list",
        "tuple",
        "set",
        "frozenset",
        "dict",
        "iter",
        "sorted",
        "reversed",
        "enumerate",
        "zip",
        "map",
        "filter",
        "str",
        "repr",
        "isinstance",
        "id",
        "type",
        "bool",
        "any",
        "all",
        "sum",
        "min",
        "max",
        "hash",
        "next",
    }
)


@dataclass(frozen=True, slots=True)
class Stores:
    """One file's stores into containers and objects (see the module docstring)."""

    #: By container (its root name, :meth:`root`), what the file adds to it.
    entries: dict[str, list[Entry]] = field(default_factory=dict)
    #: By container, containers whose every element it takes (``xs.extend(ys)``).
    spreads: dict[str, list[ast.expr]] = field(default_factory=dict)
    #: By attribute as written (``o.f``), the values stored into it.
    attributes: dict[str, list[ast.expr]] = field(default_factory=dict)
    #: ``setattr(o, name, v)`` with a name not written out: owner, name, value.
    named_later: list[tuple[str, ast.expr, ast.expr]] = field(default_factory=list)
    #: Containers (root names) whose places the file changes.
    reordered: set[str] = field(default_factory=set)
    #: A name bound to another name (``ys = xs``): the name it is one with.
    aliases: dict[str, str] = field(default_factory=dict)

    def root(self, name: str) -> str:
        """The name ``name`` is one container with (itself when no alias binds it)."""
        seen = 0
        while name in self.aliases and seen < 32:
            name = self.aliases[name]
            seen += 1
        return name

    def entries_of(self, name: str) -> list[Entry]:
        """What the file adds to the container ``name``."""
        return self.entries.get(self.root(name), [])

    def spreads_of(self, name: str) -> list[ast.expr]:
        """The containers whose elements the file adds to ``name``."""
        return self.spreads.get(self.root(name), [])

    def changed(self, name: str) -> bool:
        """Whether the file adds to ``name`` or changes its order after binding it."""
        key = self.root(name)
        return key in self.reordered or key in self.entries or key in self.spreads

    def any_store(self, name: str) -> bool:
        """Whether anything is stored into ``name`` (elements or whole containers)."""
        key = self.root(name)
        return key in self.entries or key in self.spreads


def container_stores(of_kind: Callable[[type[ast.AST]], list[ast.AST]]) -> Stores:
    """The stores of the nodes ``of_kind`` lists (the surveyed nodes by class)."""
    stores = Stores()
    for node in of_kind(ast.Assign):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            _assigned(stores, target, node.value)
    for node in of_kind(ast.AugAssign):
        if not isinstance(node, ast.AugAssign):
            continue
        _augmented(stores, node)
    for node in of_kind(ast.Delete):
        if not isinstance(node, ast.Delete):
            continue
        for target in node.targets:
            if isinstance(target, ast.Subscript) and (name := dotted(target.value)):
                stores.reordered.add(name)
    for node in of_kind(ast.Call):
        if not isinstance(node, ast.Call):
            continue
        _called(stores, node)
    _join_aliases(stores)
    return stores


def _add(stores: Stores, container: str, key: ast.expr | None, value: ast.expr) -> None:
    stores.entries.setdefault(container, []).append((key, value))


def _add_all(stores: Stores, container: str, values: ast.expr) -> None:
    """Every element of ``values`` added to ``container`` (a literal's, or a spread)."""
    if isinstance(values, ast.List | ast.Tuple | ast.Set):
        for element in values.elts:
            _add(stores, container, None, element)
    elif isinstance(values, ast.Dict):
        for key, value in zip(values.keys, values.values, strict=True):
            if key is None:
                stores.spreads.setdefault(container, []).append(value)  # {**other}
            else:
                _add(stores, container, key, value)
    else:
        stores.spreads.setdefault(container, []).append(values)


def _keyword(stores: Stores, container: str, keyword: ast.keyword) -> None:
    """``d.update(k=v)``, ``dict(k=v)``: ``v`` stored under ``"k"`` (``**m``: all of ``m``)."""
    if keyword.arg is None:
        stores.spreads.setdefault(container, []).append(keyword.value)
    else:
        key = ast.copy_location(ast.Constant(keyword.arg), keyword.value)
        _add(stores, container, key, keyword.value)


def _assigned(stores: Stores, target: ast.expr, value: ast.expr) -> None:
    if isinstance(target, ast.Subscript):
        container = dotted(target.value)
        if container is None:
            return
        if isinstance(target.slice, ast.Slice):
            _add_all(stores, container, value)  # xs[:0] = [exec]
        else:
            _add(stores, container, target.slice, value)
        stores.reordered.add(container)
    elif isinstance(target, ast.Attribute):
        name = dotted(target)
        if name is not None:
            stores.attributes.setdefault(name, []).append(value)
            _alias(stores, name, value)
    elif isinstance(target, ast.Name):
        _alias(stores, target.id, value)
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in {"dict", "OrderedDict"}
        ):
            # d = dict(k=exec): a table written as a call
            for arg in value.args[:1]:
                _add_all(stores, target.id, arg)
            for keyword in value.keywords:
                _keyword(stores, target.id, keyword)


def _alias(stores: Stores, name: str, value: ast.expr) -> None:
    """``ys = xs``, ``self.h = h``: one container under two names."""
    other = dotted(value) if isinstance(value, ast.Name | ast.Attribute) else None
    if other is not None and other != name:
        stores.aliases.setdefault(name, other)


def _augmented(stores: Stores, node: ast.AugAssign) -> None:
    target = node.target
    if isinstance(target, ast.Subscript):
        if (name := dotted(target.value)) is not None:
            stores.reordered.add(name)  # xs[0] += ...: an element replaced
        return
    name = dotted(target)
    if name is not None and isinstance(node.op, ast.Add | ast.BitOr):
        _add_all(stores, name, node.value)  # xs += [exec], d |= {"k": exec}


def _called(stores: Stores, node: ast.Call) -> None:
    # every call of the file passes here once: the common ones leave after a class test
    func = node.func
    args = node.args
    if isinstance(func, ast.Attribute):
        method = func.attr
        if method in _METHODS and (container := dotted(func.value)) is not None:
            _method_store(stores, container, method, node)
        elif method == "setattr" and dotted(func) == "builtins.setattr":
            _setattr(stores, args)
            return
    elif isinstance(func, ast.Name):
        if func.id == "setattr":
            _setattr(stores, args)
            return
        if func.id in _READERS:
            return
    # random.shuffle(xs), f(xs): a call of anything else may change its places
    stores.reordered.update(a.id for a in args if isinstance(a, ast.Name))


def _method_store(stores: Stores, container: str, method: str, node: ast.Call) -> None:
    args = node.args
    if method in _ADD_ONE:
        if args:
            _add(stores, container, None, args[-1])
    elif method in _ADD_ALL:
        if args:
            _add_all(stores, container, args[0])
    elif method == "update":
        for arg in args[:1]:
            _add_all(stores, container, arg)
        for keyword in node.keywords:
            _keyword(stores, container, keyword)
    elif method in {"setdefault", "__setitem__"}:
        if len(args) == 2:
            _add(stores, container, args[0], args[1])
    else:
        stores.reordered.add(container)


def _setattr(stores: Stores, args: list[ast.expr]) -> None:
    """``setattr(o, "f", v)``: ``o.f`` holds ``v`` (a name not written out: kept to evaluate)."""
    if len(args) != 3 or (owner := dotted(args[0])) is None:
        return
    attr = fold_str(args[1])
    if attr is not None:
        stores.attributes.setdefault(f"{owner}.{attr}", []).append(args[2])
    else:
        stores.named_later.append((owner, args[1], args[2]))


def _join_aliases(stores: Stores) -> None:
    """What is stored under an alias is stored in the container it names."""
    if not stores.aliases:
        return
    for name in [n for n in stores.entries if n in stores.aliases]:
        if (root := stores.root(name)) != name:
            stores.entries.setdefault(root, []).extend(stores.entries.pop(name))
    for name in [n for n in stores.spreads if n in stores.aliases]:
        if (root := stores.root(name)) != name:
            stores.spreads.setdefault(root, []).extend(stores.spreads.pop(name))
    for name in [n for n in stores.reordered if n in stores.aliases]:
        stores.reordered.add(stores.root(name))


#: The values that may denote a callable (a literal, an operation or a lambda of the file
#: is nothing worth hiding, and resolving it costs).
_CALLABLE_VALUES = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.IfExp, ast.BoolOp)
#: Constructors of a plain namespace whose keywords are its attributes.
_NAMESPACES = frozenset({"types.SimpleNamespace", "argparse.Namespace"})


#: The calls that copy a container's elements (:meth:`StoredReads._copied`).
_COPIES = frozenset(
    {
        "collections.deque",
        "builtins.list",
        "builtins.tuple",
        "builtins.iter",
        "builtins.reversed",
        "builtins.sorted",
    }
)


#: The keywords of a copy that only order it (``sorted(xs, key=repr, reverse=True)``).
_ORDER_KEYWORDS = frozenset({"key", "reverse"})
#: Calls that pick one element of a container (or of their arguments), recall14.
_PICKS = frozenset({"builtins.min", "builtins.max", "random.choice"})


class StoredReads:
    """The resolver's reads of what the file stored (a mixin of
    :class:`caplet._scan._resolve.Resolver`: the state and the primitives are its own,
    declared here for the type checker)."""

    bindings: Bindings
    _stores: Stores | None
    _attribute_stores: dict[str, tuple[str, ...]]
    _container_reads: dict[tuple[str, str | None], list[str]]

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, ...]:
        raise NotImplementedError

    def name_value(self, node: ast.AST) -> str | None:
        raise NotImplementedError

    def passed_arguments(self) -> dict[int, dict[str, list[ast.expr]]]:
        raise NotImplementedError

    def _sequences(self, container: ast.expr) -> list[ast.List | ast.Tuple]:
        raise NotImplementedError

    def tables(self, container: ast.expr) -> list[ast.Dict]:
        raise NotImplementedError

    def lookup(self, container: ast.expr, key: str, depth: int = 0) -> tuple[str, ...]:
        raise NotImplementedError

    @staticmethod
    def hidden(name: str) -> bool:
        """Whether a value stored is followed (:func:`caplet._scan._resolve._hidden`)."""
        raise NotImplementedError

    def of_kind(self, kind: type[ast.AST]) -> list[ast.AST]:
        """The surveyed nodes of class ``kind`` (the data flow's answer,
        :meth:`caplet._scan._flow.Flow.of_kind`; none here)."""
        return []

    def stores(self) -> Stores:
        """What this file stores into its containers and objects (recall11)."""
        stores = self._stores
        if stores is None:
            stores = self._stores = container_stores(self.of_kind)
        return stores

    def _changed(self, container: ast.expr) -> bool:
        """Whether the file adds to ``container`` or reorders it after its literal."""
        name = dotted(container)
        return name is not None and self.stores().changed(name)

    def _has_stores(self, container: ast.expr) -> bool:
        """Whether the file stored a builtin or an API that runs code into ``container``
        (a lookup in it by a computed key may then be one worth hiding, as in a table
        written with one; any other container filled by the file stays skipped)."""
        name = dotted(container)
        if name is None or not self.stores().any_store(name):
            return False
        return any(self.hidden(r) for r in self._stored(container, None, 0))

    def _stored(self, container: ast.expr, key: str | None, depth: int) -> list[str]:
        """What ``container[key]`` may denote by what the file stored into it: an entry
        stored under ``key``, under a key not known, or added at any place; ``key``
        ``None`` (a position) takes every element added (``xs.append(exec)``)."""
        name = dotted(container)
        if name is None or depth > MAX_RESOLVE_DEPTH:
            return []
        stores = self.stores()
        # by the container's name and the key, the same for every read: memoised, a
        # container spread into itself (a.update(b); b.update(a)) answering nothing inside,
        # or each read walked every path between them down to the depth bound
        memo = (stores.root(name), key)
        known = self._container_reads.get(memo)
        if known is not None:
            return known
        self._container_reads[memo] = []
        found: list[str] = []
        for entry, value in stores.entries_of(name)[:MAX_CANDIDATES]:
            if not isinstance(value, _CALLABLE_VALUES):
                continue
            if key is not None and entry is not None:
                if isinstance(entry, ast.Constant):
                    if entry.value != key:
                        continue  # d[0] = exec is not d["k"]
                elif (stored := self.name_value(entry)) is not None and stored != key:
                    continue
            found.extend(self._stored_value(value, depth + 1))
        for spread in stores.spreads_of(name)[:MAX_CANDIDATES]:
            found.extend(self._elements(spread, depth + 1))
        found = self._container_reads[memo] = list(dict.fromkeys(found))[:MAX_CANDIDATES]
        return found

    def _stored_value(self, value: ast.expr, depth: int) -> tuple[str, ...]:
        """What a value stored into a container denotes; a parameter of this file's function
        (``def register(hook): HOOKS.append(hook)``) is what the file's calls pass it, when
        that is a builtin or a module that runs code (:meth:`hidden`)."""
        found = self.resolve(value, depth)
        if isinstance(value, ast.Name) and not (
            value.id in self.bindings.assigned
            or value.id in self.bindings.imports
            or value.id in self.bindings.defined
        ):
            passed = [
                a for slots in self.passed_arguments().values() for a in slots.get(value.id, ())
            ]
            given = [r for a in passed[:MAX_CANDIDATES] for r in self.resolve(a, depth + 1)]
            found = (*found, *(r for r in given if self.hidden(r)))
        return found

    def _elements(self, container: ast.expr, depth: int) -> list[str]:
        """What any element (a value of a dict) of ``container`` may denote: its literal's
        and what the file stored into it."""
        if depth > MAX_RESOLVE_DEPTH:
            return []
        if isinstance(container, ast.Call) and not container.args:
            func = container.func
            if isinstance(func, ast.Attribute) and func.attr == "values":
                container = func.value  # for f in handlers.values()
        copied = self._copied(container, depth)
        if copied is not None:
            # deque([exec]), list(xs), a name bound once to one: a copy's elements are
            # the original's (recall12)
            return self._elements(copied, depth + 1)
        values: list[ast.expr] = [
            *(e for s in self._sequences(container) for e in s.elts),
            *(v for t in self.tables(container) for v in t.values),
            *(e for s in self._set_literals(container) for e in s.elts),
        ]
        found = [r for v in values[:MAX_CANDIDATES] for r in self.resolve(v, depth + 1)]
        found.extend(self._stored(container, None, depth))
        return found

    def taken_out(self, node: ast.Call, funcs: tuple[str, ...], depth: int) -> list[str] | None:
        """What a value taken back out of a container denotes: ``xs.pop()``,
        ``d.pop("k")`` (as ``d["k"]``), a deque's ``popleft()``, ``next(iter(xs))``,
        ``next(it)`` with ``it = iter(xs)``, ``iter(xs).__next__()``, ``next(f for f in
        xs if ...)`` (recall12: recall11 read indexes,
        keys, attributes and loops only, so ``xs = [exec]; xs.pop()(payload)`` was no
        sink). Like a loop's elements, only code sinks and builtins; ``None`` when
        ``node`` takes nothing out."""
        func, args = node.func, node.args
        if isinstance(func, ast.Attribute) and func.attr == "popleft" and not args:
            return self._iterated_elements(func.value, depth)  # a deque's
        if isinstance(func, ast.Attribute) and func.attr == "pop" and len(args) <= 2:
            key = self.name_value(args[0]) if args else None
            if key is not None:
                return list(self.lookup(func.value, key, depth))
            return self._iterated_elements(func.value, depth)
        if not _PICKS.isdisjoint(funcs) and args:
            # min(xs, key=id), max(print, exec), random.choice(xs): one of the elements
            if len(args) == 1:
                return self._iterated_elements(args[0], depth)
            resolved = (r for a in args[:MAX_CANDIDATES] for r in self.resolve(a, depth + 1))
            return [r for r in resolved if self.hidden(r)]
        if "builtins.next" in funcs and 1 <= len(args) <= 2:
            iterator = args[0]
        elif isinstance(func, ast.Attribute) and func.attr == "__next__" and not args:
            iterator = func.value
        else:
            return None
        if (
            isinstance(iterator, ast.GeneratorExp)
            and len(iterator.generators) == 1
            and isinstance(iterator.elt, ast.Name)
            and isinstance(iterator.generators[0].target, ast.Name)
            and iterator.elt.id == iterator.generators[0].target.id
        ):
            # next(f for f in [print, exec] if ...): one of the elements the test keeps
            return self._iterated_elements(iterator.generators[0].iter, depth)
        # next(iter(xs)), it = iter(xs); next(it): the iterator's elements
        copied = self._copied(iterator, depth)
        return None if copied is None else self._iterated_elements(copied, depth)

    def _set_literals(self, container: ast.expr) -> list[ast.Set]:
        """The set literal ``container`` is, or a name of it is bound to once (its elements
        are a loop's or a pick's, never a position's: recall14)."""
        if isinstance(container, ast.Name):
            bound = self.bindings.assigned.get(container.id, ())
            container = bound[0] if len(bound) == 1 else container
        return [container] if isinstance(container, ast.Set) else []

    def any_element(self, container: ast.expr, depth: int) -> list[str]:
        """``d[k]``, ``d.get(k)`` with a key the file does not show: any code sink or builtin
        ``container`` holds, stored under any key (recall14: ``d[k] = exec; d[j](x)`` with
        both keys read at run time), as a loop over it would be."""
        if isinstance(
            container, ast.Name | ast.Attribute | ast.Dict | ast.List | ast.Tuple | ast.Set
        ):
            return self._iterated_elements(container, depth)
        return []

    def picked_element(self, value: ast.expr, depth: int) -> list[str]:
        """An element picked out of a container by a call (recall14): the value of
        ``d.popitem()`` (read as ``d.popitem()[1]`` or unpacked, ``k, f = d.popitem()``),
        the first of ``sorted(xs, key=...)``, ``min``/``max``/``random.choice`` of it."""
        if not isinstance(value, ast.Call):
            return []
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "popitem" and not value.args:
            return self._iterated_elements(func.value, depth)
        copied = self._copied(value, depth)
        return [] if copied is None else self._iterated_elements(copied, depth)

    def _copied(self, container: ast.expr, depth: int) -> ast.expr | None:
        """What ``container`` copies: the argument of ``collections.deque(x)``,
        ``list(x)``, ``tuple(x)``, ``iter(x)``, ``reversed(x)``, ``sorted(x)``, written
        there or bound once to the name ``container`` is."""
        if isinstance(container, ast.Name):
            bound = self.bindings.assigned.get(container.id, ())
            container = bound[0] if len(bound) == 1 else container
        if (
            isinstance(container, ast.Call)
            and len(container.args) == 1
            and all(k.arg in _ORDER_KEYWORDS for k in container.keywords)
            and not _COPIES.isdisjoint(self.resolve(container.func, depth + 1))
        ):
            return container.args[0]
        return None

    def _iterated_elements(self, iterable: ast.expr, depth: int) -> list[str]:
        """``for f in xs`` of a container the file named: only code sinks and builtins,
        the values worth keeping in a container to hide (a loop over a list of the
        file's own objects resolves as before)."""
        return [r for r in self._elements(iterable, depth + 1) if self.hidden(r)]

    def _stored_attribute(self, node: ast.Attribute, depth: int) -> tuple[str, ...]:
        """``o.f`` after ``o.f = exec``, ``setattr(o, "f", exec)`` or
        ``o = SimpleNamespace(f=exec)``: the values stored into it (by ``o.f`` as
        written, the same for every read of it: memoised by that name, a store that
        reads itself, ``self.x = self.x.parent``, answering nothing inside)."""
        owner = dotted(node.value)
        if owner is None:
            return ()
        key = f"{owner}.{node.attr}"
        known = self._attribute_stores.get(key)
        if known is not None:
            return known
        self._attribute_stores[key] = ()
        stores = self.stores()
        values: list[ast.expr] = [
            v for v in stores.attributes.get(key, ()) if isinstance(v, _CALLABLE_VALUES)
        ]
        for named, attr, value in stores.named_later[:MAX_CANDIDATES]:
            if named == owner and self.name_value(attr) == node.attr:
                values.append(value)
        if isinstance(node.value, ast.Name):
            for made in self.bindings.assigned.get(owner, ())[:MAX_CANDIDATES]:
                if not isinstance(made, ast.Call):
                    continue
                given = [k.value for k in made.keywords if k.arg == node.attr]
                if given and not _NAMESPACES.isdisjoint(self.resolve(made.func, depth + 1)):
                    values.extend(given)
        found = (r for v in values[:MAX_CANDIDATES] for r in self._stored_value(v, depth + 1))
        result = self._attribute_stores[key] = tuple(
            dict.fromkeys(r for r in found if self.hidden(r))
        )
        return result
