"""Mutation testing of the scanner's recall: detection must survive rewriting (issue 16).

    python benchmarks/mutate_recall.py            # every tune sample flagged today, every rewrite
    python benchmarks/mutate_recall.py --quick    # every 3rd computed-names sample, prefilter on
    python benchmarks/mutate_recall.py --class computed-names --blind-too
    python benchmarks/mutate_recall.py --markdown # the matrix as a markdown table

Instead of guessing more spellings of a technique, take every sample of
``benchmarks/malware/tune`` that caplet flags DANGER today, apply automatic
rewrites that keep what the code does (identifiers renamed to CJK, the module
body wrapped in a function / ``if`` / ``try`` / class / setup.py ``cmdclass``,
the payload moved to a sibling module setup.py imports, imports aliased,
string constants split or encoded, intermediate variables, ``getattr``
spelled another way, coding cookies, CRLF, tabs, continuations, benign
padding) and check each mutant is still DANGER in package mode, with the
prefilter on (what ``caplet scan`` does) and, with ``--blind-too``, off
(every file handed whole to the AST pass). Every mutant that escapes is a
generalisation gap of the rules, not a missing spelling.

The holdout is never read. Mutants are written to a temporary directory, only
read by the scanner, never imported or executed. Each rewrite is deterministic
(its random choices are seeded by the sample's name) and is a function from a
package's files to new files (or ``None`` when it does not apply), so rewrites
compose (see ``COMPOSED``).
"""

from __future__ import annotations

import argparse
import ast
import random
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import caplet
from caplet._scan import _filepass
from caplet._scan._prefilter import Need, Prefilter

TUNE = Path(__file__).resolve().parent / "malware" / "tune"

#: A package's files: relative path -> text (``bytes`` for files kept byte for byte).
Files = dict[str, str | bytes]
Rewrite = Callable[[Files, random.Random], Files | None]

_CJK = "版函导入包模块数据名值键对象文件路径网络系统命令执行结果参数列表字典元组集合"


def _cjk_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_CJK) for _ in range(rng.randint(2, 4)))
        if name not in taken:
            taken.add(name)
            return name


def _py(files: Files) -> Iterator[tuple[str, ast.Module]]:
    for rel, text in sorted(files.items()):
        if rel.endswith(".py") and isinstance(text, str):
            try:
                yield rel, ast.parse(text)
            except SyntaxError:
                continue


def _per_module(
    change: Callable[[ast.Module, random.Random, str], ast.Module | None],
) -> Rewrite:
    """A rewrite that transforms every parseable ``.py`` file on its own."""

    def rewrite(files: Files, rng: random.Random) -> Files | None:
        out = dict(files)
        changed = False
        for rel, tree in _py(files):
            try:
                new = change(tree, rng, rel)
                if new is None:
                    continue
                text = ast.unparse(ast.fix_missing_locations(new)) + "\n"
                ast.parse(text)
            except (SyntaxError, ValueError):
                continue  # the rewrite cannot express this file: not a mutant
            if text != ast.unparse(ast.parse(str(files[rel]))) + "\n":
                out[rel] = text
                changed = True
        return out if changed else None

    rewrite.__doc__ = change.__doc__
    return rewrite


def _split_body(body: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """``from __future__`` imports and the docstring stay at the top of a module."""
    head: list[ast.stmt] = []
    for stmt in body:
        if (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__") or (
            not head
            and stmt is body[0]
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            head.append(stmt)
        else:
            break
    return head, body[len(head) :]


def _stmts(src: str) -> list[ast.stmt]:
    return ast.parse(src).body


# ------------------------------------------------------------------------ identifiers


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        self.generic_visit(node)
        return node

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _def  # noqa: N815

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self.names.get(n, n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global  # type: ignore[assignment]  # noqa: N815

    def visit_alias(self, node: ast.alias) -> ast.alias:
        # ``import x as y``: rename the local y only
        if node.asname:
            node.asname = self.names.get(node.asname, node.asname)
        return node


def rename_cjk(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
    """Every identifier the file binds itself (not imports, dunders, attributes or keywords)
    renamed to a random CJK name."""
    bound: set[str] = set()
    keywords: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.keyword) and node.arg:
            keywords.add(node.arg)
        elif isinstance(node, ast.alias) and node.asname:
            bound.add(node.asname)
    # names other modules of the package may import from this one stay
    bound -= keywords | {"self", "cls", "setup", "main", "run"}
    bound = {n for n in bound if not (n.startswith("__") and n.endswith("__"))}
    # a name read as an attribute somewhere (a method) keeps its name
    bound -= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    if not bound:
        return None
    taken: set[str] = set()
    names = {n: _cjk_name(rng, taken) for n in sorted(bound)}
    return _Renamer(names).visit(tree)  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- wrapping


def _wrap(build: Callable[[list[ast.stmt]], list[ast.stmt]]) -> Callable[..., ast.Module | None]:
    def change(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
        head, body = _split_body(tree.body)
        if not body:
            return None
        tree.body = head + build(body)
        return tree

    return change


def _as_function(body: list[ast.stmt]) -> list[ast.stmt]:
    # the module's own names stay module-level: declare every assigned name global
    names = sorted(
        {
            n.id
            for s in body
            for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        | {
            s.name
            for s in body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
    )
    inner: list[ast.stmt] = [ast.Global(names=names)] if names else []
    fn = _stmts("def _caplet_mutant_main():\n    pass\n_caplet_mutant_main()\n")
    assert isinstance(fn[0], ast.FunctionDef)
    fn[0].body = inner + body
    return fn


def _in_if_main(body: list[ast.stmt]) -> list[ast.stmt]:
    node = _stmts("if __name__ == '__main__':\n    pass\n")
    assert isinstance(node[0], ast.If)
    node[0].body = body
    return node


def _in_if_true(body: list[ast.stmt]) -> list[ast.stmt]:
    node = _stmts("if True:\n    pass\n")
    assert isinstance(node[0], ast.If)
    node[0].body = body
    return node


def _in_try(body: list[ast.stmt]) -> list[ast.stmt]:
    node = _stmts("try:\n    pass\nexcept:\n    pass\n")
    assert isinstance(node[0], ast.Try)
    node[0].body = body
    return node


def _in_class(body: list[ast.stmt]) -> list[ast.stmt]:
    node = _stmts("class _CapletMutant:\n    pass\n")
    assert isinstance(node[0], ast.ClassDef)
    node[0].body = body
    return node


wrap_function = _wrap(_as_function)
wrap_function.__doc__ = "The module body in a function called at the end."
wrap_if_main = _wrap(_in_if_main)
wrap_if_true = _wrap(_in_if_true)
wrap_try = _wrap(_in_try)
wrap_class = _wrap(_in_class)


def _is_setup_call(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, (ast.Name, ast.Attribute))
        and (getattr(stmt.value.func, "id", None) or getattr(stmt.value.func, "attr", None))
        == "setup"
    )


def _setup_parts(files: Files) -> tuple[list[ast.stmt], list[ast.stmt], ast.Expr] | None:
    """setup.py's imports, its other statements and its ``setup(...)`` call."""
    text = files.get("setup.py")
    if not isinstance(text, str):
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    calls = [s for s in tree.body if _is_setup_call(s)]
    if len(calls) != 1:
        return None
    imports: list[ast.stmt] = [s for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
    rest = [s for s in tree.body if s is not calls[0] and s not in imports]
    if not rest:
        return None
    call = calls[0]
    assert isinstance(call, ast.Expr)
    return imports, rest, call


def wrap_cmdclass(files: Files, rng: random.Random) -> Files | None:
    """setup.py's statements moved into a ``cmdclass`` ``install.run`` method."""
    parts = _setup_parts(files)
    if parts is None:
        return None
    imports, rest, call = parts
    cls = _stmts(
        "from setuptools.command.install import install as _caplet_install\n"
        "class _CapletInstall(_caplet_install):\n"
        "    def run(self):\n"
        "        pass\n"
        "        _caplet_install.run(self)\n"
    )
    klass = cls[1]
    assert isinstance(klass, ast.ClassDef)
    run = klass.body[0]
    assert isinstance(run, ast.FunctionDef)
    run.body[0:1] = rest
    assert isinstance(call.value, ast.Call)
    call.value.keywords = [k for k in call.value.keywords if k.arg != "cmdclass"]
    call.value.keywords.append(
        ast.keyword(arg="cmdclass", value=ast.parse("{'install': _CapletInstall}").body[0].value)  # type: ignore[attr-defined]
    )
    module = ast.Module(body=[*imports, *cls, call], type_ignores=[])
    return {**files, "setup.py": ast.unparse(ast.fix_missing_locations(module)) + "\n"}


def _to_sibling(target: str, importer: str) -> Rewrite:
    def rewrite(files: Files, rng: random.Random) -> Files | None:
        """setup.py's statements moved to a sibling module that setup.py imports."""
        parts = _setup_parts(files)
        if parts is None or target in files:
            return None
        imports, rest, call = parts
        helper = ast.Module(body=[*imports, *rest], type_ignores=[])
        setup = ast.Module(body=[*imports, *_stmts(importer), call], type_ignores=[])
        return {
            **files,
            target: ast.unparse(ast.fix_missing_locations(helper)) + "\n",
            "setup.py": ast.unparse(ast.fix_missing_locations(setup)) + "\n",
        }

    return rewrite


sibling_helper = _to_sibling("_helper.py", "from _helper import *")
sibling_package = _to_sibling("caplet_mutant_pkg/__init__.py", "from caplet_mutant_pkg import *")
sibling_import = _to_sibling("_helper.py", "import _helper")


# ------------------------------------------------------------------------------ imports


def _alias_imports(style: str) -> Callable[..., ast.Module | None]:
    def change(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
        changed = False
        taken: set[str] = set()
        renames: dict[str, str] = {}

        def replace(stmt: ast.stmt) -> list[ast.stmt]:
            nonlocal changed
            if isinstance(stmt, ast.Import):
                out: list[ast.stmt] = []
                for alias in stmt.names:
                    local = alias.asname or alias.name.split(".")[0]
                    if alias.asname is None and "." in alias.name:
                        out.append(ast.Import(names=[alias]))
                        continue
                    changed = True
                    new = local
                    if style == "as":
                        new = renames.setdefault(local, _cjk_name(rng, taken))
                        out.append(ast.Import(names=[ast.alias(alias.name, new)]))
                    elif style == "dunder":
                        out += _stmts(f"{new} = __import__({alias.name!r}, fromlist=['_'])")
                    else:
                        out += _stmts(
                            f"import importlib\n{new} = importlib.import_module({alias.name!r})"
                        )
                return out
            if (
                isinstance(stmt, ast.ImportFrom)
                and stmt.level == 0
                and stmt.module
                and stmt.module != "__future__"
                and all(a.name != "*" for a in stmt.names)
            ):
                changed = True
                mod = _cjk_name(rng, taken)
                if style == "as":
                    return [
                        ast.ImportFrom(
                            module=stmt.module,
                            names=[
                                ast.alias(
                                    a.name,
                                    renames.setdefault(a.asname or a.name, _cjk_name(rng, taken)),
                                )
                                for a in stmt.names
                            ],
                            level=0,
                        )
                    ]
                if style == "dunder":
                    load = f"__import__({stmt.module!r}, fromlist=[{', '.join(repr(a.name) for a in stmt.names)}])"
                else:
                    load = f"importlib.import_module({stmt.module!r})"
                src = (
                    f"import importlib\n{mod} = {load}\n"
                    if style != "dunder"
                    else f"{mod} = {load}\n"
                )
                for a in stmt.names:
                    src += f"{a.asname or a.name} = getattr({mod}, {a.name!r})\n"
                return _stmts(src)
            return [stmt]

        class Statements(ast.NodeTransformer):
            def generic_visit(self, node: ast.AST) -> ast.AST:
                super().generic_visit(node)
                for field in ("body", "orelse", "finalbody"):
                    value = getattr(node, field, None)
                    if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                        setattr(node, field, [n for s in value for n in replace(s)])
                return node

        tree = Statements().visit(tree)
        if not changed:
            return None
        if renames:
            tree = _Renamer(renames).visit(tree)
        return tree

    return change


# ------------------------------------------------------------------------------ strings


def _strings(
    encode: Callable[[str, random.Random], ast.expr | None],
) -> Callable[..., ast.Module | None]:
    def change(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                skip.update(id(v) for v in ast.walk(node))
            elif isinstance(
                node, (ast.FunctionDef, ast.ClassDef, ast.Module, ast.AsyncFunctionDef)
            ):
                body = node.body
                if (
                    body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                ):
                    skip.add(id(body[0].value))  # docstrings stay
            elif isinstance(node, (ast.MatchValue, ast.arg)) or (
                isinstance(node, (ast.AnnAssign)) and node.annotation is not None
            ):
                skip.update(id(v) for v in ast.walk(node))
        changed = False

        class Strings(ast.NodeTransformer):
            def visit_Constant(self, node: ast.Constant) -> ast.AST:
                nonlocal changed
                if id(node) in skip or not isinstance(node.value, str) or len(node.value) < 2:
                    return node
                new = encode(node.value, rng)
                if new is None:
                    return node
                changed = True
                return new

        tree = Strings().visit(tree)
        return tree if changed else None

    return change


def _cut(value: str, rng: random.Random) -> tuple[str, str]:
    at = rng.randint(1, len(value) - 1)
    return value[:at], value[at:]


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def _concat(value: str, rng: random.Random) -> ast.expr:
    a, b = _cut(value, rng)
    return _expr(f"{a!r} + {b!r}")


def _join(value: str, rng: random.Random) -> ast.expr:
    a, b = _cut(value, rng)
    return _expr(f"''.join([{a!r}, {b!r}])")


def _fstring(value: str, rng: random.Random) -> ast.expr | None:
    a, b = _cut(value, rng)
    if "\\" in repr(value) or ("'" in value and '"' in value):
        return None  # not expressible inside an f-string's braces before Python 3.12
    quote = '"' if "'" in value else "'"
    return _expr(
        f"f{quote}{{{a!r}}}{{{b!r}}}{quote}".replace(
            f"{{{a!r}}}", "{" + a.join([(quote == "'" and '"') or "'"] * 2) + "}"
        ).replace(f"{{{b!r}}}", "{" + b.join([(quote == "'" and '"') or "'"] * 2) + "}")
    )


def _percent(value: str, rng: random.Random) -> ast.expr:
    a, b = _cut(value, rng)
    return _expr(f"'%s%s' % ({a!r}, {b!r})")


def _fromhex(value: str, rng: random.Random) -> ast.expr:
    return _expr(f"bytes.fromhex({value.encode('utf-8').hex()!r}).decode()")


def _chrs(value: str, rng: random.Random) -> ast.expr | None:
    if len(value) > 200:
        return None
    return _expr(" + ".join(f"chr({ord(c)})" for c in value))


def _reversed(value: str, rng: random.Random) -> ast.expr:
    return _expr(f"{value[::-1]!r}[::-1]")


# the spellings the recall5 branch's mutation testing found open (issue 16): keywords of
# str.format, a % mapping, junk characters removed, rot13 both ways, base64 of the text


def _format_named(value: str, rng: random.Random) -> ast.expr:
    a, b = _cut(value, rng)
    return _expr(f"'{{a}}{{b}}'.format(a={a!r}, b={b!r})")


def _percent_map(value: str, rng: random.Random) -> ast.expr | None:
    a, b = _cut(value, rng)
    return _expr(f"'%(a)s%(b)s' % {{'a': {a!r}, 'b': {b!r}}}")


def _junk(value: str, rng: random.Random) -> ast.expr | None:
    if "#" in value or len(value) > 400:
        return None
    return _expr(f"{'#'.join(value)!r}.replace('#', '')")


def _rot13(value: str, rng: random.Random) -> ast.expr:
    import codecs

    return _expr(f"__import__('codecs').decode({codecs.encode(value, 'rot13')!r}, 'rot13')")


def _b64(value: str, rng: random.Random) -> ast.expr:
    import base64

    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return _expr(f"__import__('base64').b64decode({encoded!r}).decode()")


def _join_pieces(value: str, rng: random.Random) -> ast.expr | None:
    if len(value) < 4:
        return None
    cuts = sorted(rng.sample(range(1, len(value)), min(3, len(value) - 1)))
    pieces = [value[i:j] for i, j in zip([0, *cuts], [*cuts, len(value)], strict=True)]
    return _expr(f"''.join({pieces!r})")


# ---------------------------------------------------------------------------- data flow


def _statement_lists(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield node, field


def intermediate_vars(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
    """The arguments of every call statement (and of calls assigned) hoisted into variables."""
    taken: set[str] = set()
    changed = False
    for node, field in list(_statement_lists(tree)):
        if isinstance(node, ast.ClassDef):
            continue
        out: list[ast.stmt] = []
        for stmt in getattr(node, field):
            value = getattr(stmt, "value", None)
            if isinstance(stmt, (ast.Expr, ast.Assign)) and isinstance(value, ast.Call):
                args: list[ast.expr] = []
                for arg in value.args:
                    if isinstance(arg, ast.Starred | ast.Name):
                        args.append(arg)
                        continue
                    name = _cjk_name(rng, taken)
                    out.append(ast.Assign(targets=[ast.Name(name, ast.Store())], value=arg))
                    args.append(ast.Name(name, ast.Load()))
                    changed = True
                value.args = args
            out.append(stmt)
        setattr(node, field, out)
    return tree if changed else None


def tuple_unpack(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
    """``a = x`` as ``a, _ = x, None``."""
    changed = False
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            node.targets = [
                ast.Tuple([node.targets[0], ast.Name("_caplet_unused", ast.Store())], ast.Store())
            ]
            node.value = ast.Tuple([node.value, ast.Constant(None)], ast.Load())
            changed = True
    return tree if changed else None


def walrus(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
    """``a = x`` as the statement ``(a := x)`` (not in class bodies, where it is invalid)."""
    changed = False
    for node, field in list(_statement_lists(tree)):
        if isinstance(node, ast.ClassDef):
            continue
        out: list[ast.stmt] = []
        for stmt in getattr(node, field):
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                out.append(
                    ast.Expr(ast.NamedExpr(ast.Name(stmt.targets[0].id, ast.Store()), stmt.value))
                )
                changed = True
            else:
                out.append(stmt)
        setattr(node, field, out)
    return tree if changed else None


def _getattr_as(template: str) -> Callable[..., ast.Module | None]:
    def change(tree: ast.Module, rng: random.Random, rel: str) -> ast.Module | None:
        changed = False

        class Calls(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                nonlocal changed
                self.generic_visit(node)
                if (
                    isinstance(node.func, ast.Name)
                    and node.func.id == "getattr"
                    and len(node.args) == 2
                    and not node.keywords
                ):
                    changed = True
                    new = _expr(template)
                    return _Fill(node.args[0], node.args[1]).visit(new)  # type: ignore[no-any-return]
                return node

        tree = Calls().visit(tree)
        return tree if changed else None

    return change


class _Fill(ast.NodeTransformer):
    def __init__(self, a: ast.expr, b: ast.expr) -> None:
        self.a, self.b = a, b

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return {"A": self.a, "B": self.b}.get(node.id, node)


# ----------------------------------------------------------------------------- the text


def _text(change: Callable[[str, random.Random], str | bytes | None]) -> Rewrite:
    def rewrite(files: Files, rng: random.Random) -> Files | None:
        out = dict(files)
        changed = False
        for rel, text in sorted(files.items()):
            if not rel.endswith(".py") or not isinstance(text, str):
                continue
            new = change(text, rng)
            if new is not None and new != text:
                out[rel] = new
                changed = True
        return out if changed else None

    rewrite.__doc__ = change.__doc__
    return rewrite


def _same_program(old: str, new: str) -> bool:
    try:
        return ast.dump(ast.parse(old)) == ast.dump(ast.parse(new))
    except SyntaxError:
        return False


def cookie_latin1(text: str, rng: random.Random) -> bytes | None:
    """A PEP 263 ``latin-1`` cookie, the file encoded as latin-1 (when it can be)."""
    try:
        return ("# -*- coding: latin-1 -*-\n" + text).encode("latin-1")
    except UnicodeEncodeError:
        return None


def bom(text: str, rng: random.Random) -> bytes:
    """A UTF-8 byte-order mark and a utf-8-sig cookie."""
    return ("\ufeff# coding: utf-8-sig\n" + text).encode("utf-8")


def crlf(text: str, rng: random.Random) -> bytes:
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8")


def tabs(text: str, rng: random.Random) -> str | None:
    """Indentation by tabs (after ``ast.unparse``, whose indentation is four spaces)."""
    text = ast.unparse(ast.parse(text)) + "\n"
    lines = []
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        lines.append("\t" * depth + " " * ((len(line) - len(stripped)) % 4) + stripped)
    new = "\n".join(lines)
    return new if _same_program(text, new) else None


def continuations(text: str, rng: random.Random) -> str | None:
    """A backslash continuation after every ``=`` and ``(`` that starts a line's value."""
    text = ast.unparse(ast.parse(text)) + "\n"
    out: list[str] = []
    for line in text.split("\n"):
        new = line
        for mark in (" = ", "("):
            at = line.find(mark)
            if at > 0:
                cut = at + len(mark)
                if "'" not in line[:cut] and '"' not in line[:cut]:
                    new = line[:cut] + "\\\n    " + line[cut:]
                break
        out.append(new)
    new = "\n".join(out)
    return new if _same_program(text, new) else None


def long_lines(text: str, rng: random.Random) -> str | None:
    """Every module-level simple statement run joined with ``;`` into one line."""
    tree = ast.parse(text)
    simple = (ast.Assign, ast.Expr, ast.Import, ast.ImportFrom, ast.AugAssign)
    parts: list[str] = []
    run: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, simple) and not (
            isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        ):
            run.append(ast.unparse(stmt))
        else:
            if run:
                parts.append("; ".join(run))
                run = []
            parts.append(ast.unparse(stmt))
    if run:
        parts.append("; ".join(run))
    new = "\n".join(parts) + "\n"
    return new if _same_program(text, new) else None


_BENIGN = '''
def _pad_{n}(values, scale=1.0):
    """Scale and clip a list of numbers (padding)."""
    out = []
    for v in values:
        w = v * scale
        if w > {n}:
            w = {n}
        out.append(round(w, 3))
    return sorted(out)


class _Pad{n}:
    def __init__(self, name):
        self.name = name
        self.items = {{}}

    def add(self, key, value):
        self.items[key] = value
        return len(self.items)
'''


def _padding(size: int) -> str:
    chunks = []
    n = 0
    total = 0
    while total < size:
        chunk = _BENIGN.format(n=n)
        chunks.append(chunk)
        total += len(chunk)
        n += 1
    return "".join(chunks)


def _pad(size: int, where: str) -> Callable[[str, random.Random], str | None]:
    def change(text: str, rng: random.Random) -> str | None:
        tree = ast.parse(text)
        head, body = _split_body(tree.body)
        pad = _padding(size)
        if where == "before":
            return (
                ast.unparse(ast.Module(head, []))
                + "\n"
                + pad
                + "\n"
                + ast.unparse(ast.Module(body, []))
                + "\n"
            )
        return text + "\n" + pad

    change.__doc__ = f"{size // 1024} KiB of benign functions and classes {where} the code."
    return change


# -------------------------------------------------------------------------- the catalogue


REWRITES: dict[str, Rewrite] = {
    "rename-cjk": _per_module(rename_cjk),
    "wrap-function": _per_module(wrap_function),
    "wrap-if-main": _per_module(wrap_if_main),
    "wrap-if-true": _per_module(wrap_if_true),
    "wrap-try": _per_module(wrap_try),
    "wrap-class": _per_module(wrap_class),
    "wrap-cmdclass": wrap_cmdclass,
    "sibling-helper": sibling_helper,
    "sibling-import": sibling_import,
    "sibling-package": sibling_package,
    "import-as": _per_module(_alias_imports("as")),
    "import-dunder": _per_module(_alias_imports("dunder")),
    "import-importlib": _per_module(_alias_imports("importlib")),
    "str-concat": _per_module(_strings(_concat)),
    "str-join": _per_module(_strings(_join)),
    "str-fstring": _per_module(_strings(_fstring)),
    "str-percent": _per_module(_strings(_percent)),
    "str-fromhex": _per_module(_strings(_fromhex)),
    "str-chr": _per_module(_strings(_chrs)),
    "str-reversed": _per_module(_strings(_reversed)),
    "str-format-named": _per_module(_strings(_format_named)),
    "str-percent-map": _per_module(_strings(_percent_map)),
    "str-junk-replace": _per_module(_strings(_junk)),
    "str-rot13": _per_module(_strings(_rot13)),
    "str-b64": _per_module(_strings(_b64)),
    "str-join-pieces": _per_module(_strings(_join_pieces)),
    "intermediate-vars": _per_module(intermediate_vars),
    "tuple-unpack": _per_module(tuple_unpack),
    "walrus": _per_module(walrus),
    "getattr-getattribute": _per_module(_getattr_as("A.__getattribute__(B)")),
    "getattr-vars": _per_module(_getattr_as("vars(A)[B]")),
    "getattr-dict": _per_module(_getattr_as("A.__dict__[B]")),
    "getattr-partial": _per_module(_getattr_as("__import__('functools').partial(getattr, A)(B)")),
    "getattr-lambda": _per_module(_getattr_as("(lambda o, n: getattr(o, n))(A, B)")),
    "cookie-latin1": _text(cookie_latin1),
    "bom-utf8-sig": _text(bom),
    "crlf": _text(crlf),
    "tabs": _text(tabs),
    "continuations": _text(continuations),
    "long-lines": _text(long_lines),
    "pad-before-64k": _text(_pad(64 * 1024, "before")),
    "pad-after-300k": _text(_pad(300 * 1024, "after")),
}


def compose(*names: str) -> Rewrite:
    def rewrite(files: Files, rng: random.Random) -> Files | None:
        out: Files | None = files
        applied = False
        for name in names:
            assert out is not None
            new = REWRITES[name](out, rng)
            if new is not None:
                out, applied = new, True
        return out if applied else None

    return rewrite


COMPOSED: dict[str, Rewrite] = {
    "rename+function+concat": compose("rename-cjk", "wrap-function", "str-concat"),
    "sibling+cmdclass+import-as": compose("sibling-helper", "wrap-cmdclass", "import-as"),
    "vars+fromhex+pad": compose("intermediate-vars", "str-fromhex", "pad-before-64k"),
}


# ------------------------------------------------------------------------------ running


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    klass: str
    files: Files


def load(root: Path) -> list[Sample]:
    samples = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        meta = folder / "SAMPLE.toml"
        klass = "issue-4"
        if meta.is_file():
            klass = tomllib.loads(meta.read_text(encoding="utf-8")).get("class", "issue-4")
        files: Files = {}
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.name == "SAMPLE.toml":
                continue
            rel = path.relative_to(folder).as_posix()
            data = path.read_bytes()
            try:
                files[rel] = data.decode("utf-8") if rel.endswith(".py") else data
            except UnicodeDecodeError:
                files[rel] = data
        samples.append(Sample(folder.name, klass, files))
    return samples


class _Blind(Prefilter):
    """The prefilter off: every file goes whole to the AST pass."""

    def check_text(self, text: str) -> tuple[Need | frozenset[int], bool]:
        return Need.FULL, True


@contextmanager
def prefilter_off() -> Iterator[None]:
    # the same hook as tests/_scan/test_prefilter_trees.py's: the module's own name
    saved = _filepass.__dict__["prefilter"]
    setattr(_filepass, "prefilter", _Blind)  # noqa: B010
    try:
        yield
    finally:
        setattr(_filepass, "prefilter", saved)  # noqa: B010


def danger(files: Files) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="caplet-mutant-") as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(text, encoding="utf-8", newline="")
        report = caplet.scan_tree(root, mode=caplet.ScanMode.PACKAGE)
        return sorted({f.rule_id for f in report.findings if f.severity is caplet.Severity.DANGER})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="every third computed-names sample only"
    )
    parser.add_argument("--class", dest="klass", help="one class of samples only")
    parser.add_argument("--rewrite", action="append", help="only these rewrites")
    parser.add_argument("--blind-too", action="store_true", help="also with the prefilter off")
    parser.add_argument("--markdown", action="store_true", help="print the matrix as markdown")
    parser.add_argument(
        "--show-escapes", action="store_true", help="print each escaping mutant's files"
    )
    args = parser.parse_args(argv)

    samples = load(TUNE)
    if args.quick:  # a third of the computed-names samples: under a minute on one core
        samples = [s for s in samples if s.klass == "computed-names"][::3]
    if args.klass:
        samples = [s for s in samples if s.klass == args.klass]
    rewrites = {**REWRITES, **COMPOSED}
    if args.rewrite:
        rewrites = {k: v for k, v in rewrites.items() if k in args.rewrite}
    modes = [("on", False)] + ([("off", True)] if args.blind_too else [])

    start = time.monotonic()
    flagged = [s for s in samples if danger(s.files)]
    classes = sorted({s.klass for s in flagged})
    # (rewrite, prefilter) -> class -> [survivors, total]
    matrix: dict[tuple[str, str], dict[str, list[int]]] = {}
    escapes: list[tuple[str, str, str]] = []
    for name, rewrite in rewrites.items():
        for mode, blind in modes:
            row = matrix.setdefault((name, mode), {})
            for sample in flagged:
                mutant = rewrite(dict(sample.files), random.Random(f"{name}/{sample.name}"))
                if mutant is None:
                    continue
                if blind:
                    with prefilter_off():
                        found = danger(mutant)
                else:
                    found = danger(mutant)
                cell = row.setdefault(sample.klass, [0, 0])
                cell[1] += 1
                if found:
                    cell[0] += 1
                else:
                    escapes.append((name, mode, sample.name))
                    if args.show_escapes:
                        print(f"--- {name} / prefilter {mode} / {sample.name}")
                        for rel, text in sorted(mutant.items()):
                            if rel.endswith(".py"):
                                shown = (
                                    text
                                    if isinstance(text, str)
                                    else text.decode("utf-8", "replace")
                                )
                                print(f"# {rel}\n{shown[:3000]}")
    elapsed = time.monotonic() - start

    print(
        f"{len(flagged)}/{len(samples)} tune samples DANGER before rewriting; "
        f"{sum(c[1] for r in matrix.values() for c in r.values())} mutants in {elapsed:.0f} s"
    )
    header = ["rewrite", "prefilter", *classes, "all"]
    rows = []
    for (name, mode), row in matrix.items():
        cells = [f"{row[k][0]}/{row[k][1]}" if k in row else "-" for k in classes]
        total = [sum(c[0] for c in row.values()), sum(c[1] for c in row.values())]
        rows.append([name, mode, *cells, f"{total[0]}/{total[1]}"])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
        for r in [header, *rows]:
            print("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)))
    print(f"\n{len(escapes)} escaping mutants:")
    for name, mode, escaped in escapes:
        print(f"  {name} (prefilter {mode}): {escaped}")
    return 1 if escapes else 0


if __name__ == "__main__":
    sys.exit(main())
