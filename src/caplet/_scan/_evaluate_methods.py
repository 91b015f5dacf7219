"""Methods called on constant values: the pure ones of ``str``, ``bytes`` and ``int``,
and Fernet's ``decrypt`` with a literal key (split out of :mod:`caplet._scan._evaluate`
by concern, issue 16: the evaluator walks expressions, this module computes one call).
"""

from __future__ import annotations

import ast
import codecs
import string
from collections.abc import Mapping
from typing import Protocol

from caplet._scan._syntax import Bindings
from caplet._scan._values import MAX_VALUE as _MAX_VALUE
from caplet._scan._values import TEXT_CODECS as _TEXT_CODECS
from caplet._scan._values import Value
from caplet._scan._values import binop as _binop
from caplet._scan._values import format_fields as _format
from caplet._scan._values import regex_sub as _regex_sub

__all__ = ["Receiver", "method_value", "template_value"]


class Receiver(Protocol):
    """What computing a method needs of :class:`~caplet._scan._evaluate.Evaluator`."""

    @property
    def bindings(self) -> Bindings: ...

    def resolve(self, node: ast.AST) -> tuple[str, ...]: ...

    def bound_once(self, node: ast.expr) -> ast.expr: ...

    def _evaluate(self, node: ast.AST, depth: int) -> Value | None: ...


def method_value(
    base: Value | None,
    method: str,
    args: list[Value | None],
    *,
    flow: Receiver,
    node: ast.Call,
    depth: int,
) -> Value | None:
    """``base.method(*args)`` for the pure methods of literal values; ``None`` otherwise."""
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
    if (
        isinstance(base, str)
        and method in {"strip", "lstrip", "rstrip"}
        and len(args) == 1
        and isinstance(args[0], str)
    ):
        stripped: str = getattr(base, method)(args[0])  # "__x__".strip("_") (blindcn)
        return stripped
    if (
        isinstance(base, bytes)
        and method in {"strip", "lstrip", "rstrip"}
        and len(args) == 1
        and isinstance(args[0], bytes)
    ):
        # struct.pack("<%dI" % n, *ints).rstrip(b" "): a stage packed into integers and
        # padded to their width (blind37)
        trimmed: bytes = getattr(base, method)(args[0])
        return trimmed
    if isinstance(base, str | bytes) and method in {"lower", "upper", "strip", "lstrip", "rstrip"}:
        return getattr(base, method)() if not args else None
    if isinstance(base, str) and method == "replace" and len(args) == 2:
        old, new = args
        if isinstance(old, str) and isinstance(new, str) and (old or not base):
            # sized before it is built: "s.replace('a', s)" of a 100 kB s is 10 GB (scanfuzz)
            size = len(base) + base.count(old) * (len(new) - len(old))
            return base.replace(old, new) if size <= _MAX_VALUE else None
        return None
    if isinstance(base, int) and method == "to_bytes" and len(args) == 2:
        # (0x73797374656d).to_bytes(6, "big"): a name packed into an integer
        length, order = args
        if isinstance(length, int) and 0 <= length <= 4096 and order in {"big", "little"}:
            try:
                return base.to_bytes(length, "big" if order == "big" else "little")
            except OverflowError:
                return None
        return None
    if method == "__add__" and len(args) == 1:
        return _binop(ast.Add(), base, args[0])
    if isinstance(base, str) and method in {"split", "rsplit"} and len(args) <= 1:
        sep = args[0] if args else None
        if sep is None or (isinstance(sep, str) and sep):
            parts: list[Value] = list(base.split(sep) if method == "split" else base.rsplit(sep))
            return parts
        return None
    if isinstance(base, str) and method in {"partition", "rpartition"} and len(args) == 1:
        sep = args[0]
        # m, _, f = "os__system".partition("__") (branch blindcn)
        return list(getattr(base, method)(sep)) if isinstance(sep, str) and sep else None
    if (
        isinstance(base, str)
        and method in {"removeprefix", "removesuffix"}
        and len(args) == 1
        and isinstance(args[0], str)
    ):
        removed: str = getattr(base, method)(args[0])  # "zzOS".removeprefix("zz") (blind17)
        return removed
    if isinstance(base, str) and method in {"swapcase", "title", "capitalize", "casefold"}:
        return getattr(base, method)() if not args else None
    if isinstance(base, str) and method == "format":
        return _format(base, args)
    if method == "sub" and len(args) == 2 and isinstance(node.func, ast.Attribute):
        # _J = re.compile(r"\|"); _J.sub("", "p|ip"): a compiled pattern's sub (blind31)
        return _regex_sub(_compiled(flow, node.func.value, depth), args[0], args[1])
    if method == "decrypt" and isinstance(args[0] if args else None, bytes | str):
        return _fernet(flow, node, args[0], depth)
    return None


def _compiled(flow: Receiver, receiver: ast.expr, depth: int) -> Value | None:
    """The pattern of ``re.compile(TEXT)`` (no flags), written in place or bound once."""
    receiver = flow.bound_once(receiver)
    if (
        isinstance(receiver, ast.Call)
        and len(receiver.args) == 1
        and not receiver.keywords
        and "re.compile" in flow.resolve(receiver.func)
    ):
        return flow._evaluate(receiver.args[0], depth)
    return None


def _fernet(flow: Receiver, node: ast.Call, token: Value | None, depth: int) -> Value | None:
    """``Fernet(key).decrypt(token)`` with both literal: the plaintext (no code runs)."""
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    if not isinstance(receiver, ast.Call) or len(receiver.args) != 1:
        if isinstance(receiver, ast.Name):
            receiver = flow.bound_once(receiver)
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


#: ``string.Template``'s methods that fill it (``safe_substitute`` leaves a missing field).
_TEMPLATE_FILLS = frozenset({"substitute", "safe_substitute"})


def template_value(
    node: ast.Call,
    args: list[Value | None],
    kwargs: Mapping[str, Value | None],
    *,
    flow: Receiver,
    depth: int,
) -> Value | None:
    """``string.Template("${a}${b}").substitute(a="sub", b="process")``, the template a
    literal or a name bound once to one, its fields given as keywords: the text,
    computed without running anything (blind19, b19-cn-template-substitute-module)."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _TEMPLATE_FILLS:
        return None
    made = func.value
    if isinstance(made, ast.Name):
        bound = flow.bindings.assigned.get(made.id, ())
        made = bound[0] if len(bound) == 1 else made
    if (
        not isinstance(made, ast.Call)
        or len(made.args) != 1
        or made.keywords
        or "string.Template" not in flow.resolve(made.func)
    ):
        return None
    text = flow._evaluate(made.args[0], depth)
    fields = {k: v for k, v in kwargs.items() if isinstance(v, str)}
    if args or not isinstance(text, str) or len(fields) != len(kwargs):
        return None
    # sized before it is built, as replace is: each key's count bounds its fields
    if len(text) + sum(text.count(k) * len(v) for k, v in fields.items()) > _MAX_VALUE:
        return None
    try:
        filled: str = getattr(string.Template(text), func.attr)(fields)
    except (KeyError, ValueError):
        return None
    return filled
