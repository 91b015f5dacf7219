"""What the rule visitor checks where a file replaces what other code calls: a library's or a
builtin's attribute assigned (``lib.f = g``, ``setattr``), the same through a module's namespace
(``vars(m)["f"] = g``), a finder added to the import system, and ``getattr``/``setattr``/
``delattr`` by name. The :class:`~caplet._scan._sinks.Sinks` decide whether what replaces it
sends or runs something (CPL-THR-025).

A mixin of :class:`caplet._scan._visitor.RuleVisitor` (its state is the visitor's), split out of
``_visitor`` when that grew past 600 lines (recall18's import hooks).
"""

from __future__ import annotations

import ast
from typing import Final

from caplet._scan._flow import is_network
from caplet._scan._rules import INTROSPECTION_ATTRIBUTES
from caplet._scan._visitor_report import STDLIB, Reporting

__all__ = ["HOOK_ADDERS", "Patching"]

#: Methods that add a finder to ``sys.meta_path`` or ``sys.path_hooks`` (recall18).
HOOK_ADDERS: Final = frozenset({"insert", "append", "extend"})


class Patching(Reporting):
    """The visitor's checks of replaced attributes, import hooks and lookups by name."""

    def _patch(self, owner: ast.expr, value: ast.expr, attr: str, node: ast.AST) -> None:
        """``lib.f = g``/``setattr``: a library's, a network module's (blind15) or a builtin's
        (recall17) attribute replaced by a function or class of this file (sinks decide)."""
        local = self._scan.local_modules
        for base in self.resolve(owner):
            top = base.split(".", 1)[0]
            if top == "builtins" and base != "builtins":
                continue  # ``self``, never bound in the file, reads as builtins.self
            stdlib = top in STDLIB and top != "builtins" and not is_network(f"{base}.{attr}")
            if top and not stdlib and top not in local:
                self._sinks.patched(node, f"{base}.{attr}", value)
                return

    def _import_hook(self, node: ast.Call, func: ast.Attribute) -> None:
        """``sys.meta_path.insert(0, Finder())``, ``sys.path_hooks.append(factory)``: a
        finder of this file asked for every import after it; one whose methods send each
        module's name to a fixed host, or fetch the module from it, is a patched import
        system (recall18). The sinks decide, as for a library's function replaced."""
        hooks = {"sys.meta_path", "sys.path_hooks"}.intersection(self.resolve(func.value))
        if not hooks:
            return
        added = node.args[-1]
        values = added.elts[:8] if isinstance(added, ast.List | ast.Tuple) else [added]
        for value in values:
            self._sinks.patched(node, f"{min(hooks)}'s finders", value)

    def _patch_in_namespace(self, target: ast.Subscript, value: ast.expr, node: ast.AST) -> None:
        """``vars(m)["f"] = g``, ``m.__dict__["f"] = g``, ``__builtins__["f"] = g``: the
        attribute replaced through the module's namespace, as ``m.f = g`` is (recall18:
        an import hook that sends each module's name put in ``vars(builtins)``)."""
        space = target.value
        owner: ast.expr | None = None
        if isinstance(space, ast.Call) and len(space.args) == 1 and not space.keywords:
            if "builtins.vars" in self.resolve(space.func):
                owner = space.args[0]
        elif isinstance(space, ast.Attribute) and space.attr == "__dict__":
            owner = space.value
        elif isinstance(space, ast.Name) and space.id == "__builtins__":
            owner = space
        key = self.flow.name_value(target.slice) if owner is not None else None
        if owner is not None and key is not None and key.isidentifier():
            self._patch(owner, value, key, node)

    def _attribute_call(self, node: ast.Call, name: str) -> None:
        """getattr/setattr/delattr: introspection, patching, names computed to hide a call."""
        if len(node.args) < 2:
            return
        attr = self.flow.name_value(node.args[1])
        if name == "builtins.setattr" and attr is not None and len(node.args) == 3:
            self._patch(node.args[0], node.args[2], attr, node)
        if attr is not None and attr in INTROSPECTION_ATTRIBUTES:
            self._emit_at("CPL-INTRO-001", attr, node)
        if name == "builtins.getattr":
            self._sinks.computed_getattr(node, node.args[0], node.args[1], attr)
            return
        owner = self._mutable_owner(node.args[0], attr)
        if owner is not None:
            verb = name.removeprefix("builtins.")
            self._emit_at("CPL-GLOB-001", f"{verb}({owner}, {attr!r})", node)
