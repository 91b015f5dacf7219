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
Nothing is evaluated here (the resolver evaluates keys when it reads them).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from caplet._scan._syntax import dotted, fold_str

__all__ = ["Stores", "container_stores"]

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
