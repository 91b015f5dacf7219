"""The values the constant evaluator computes, and the pure operations on them.

``+``, ``*``, ``^``, slices, ``str.join``, ``%`` and ``str.format`` of literals, ``chr``, and
the builtins and decoders a dropper hides a name or a payload with (base64, hex, zlib with
an output cap, rot13): only operations on values, nothing of the scanned code runs, and no
value grows past 4 MiB. :mod:`caplet._scan._evaluate` decides what is applied to what.
"""

from __future__ import annotations

import ast
import base64
import binascii
import builtins
import codecs
import json
import re
import string
import struct
import unicodedata
import warnings
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence

import re2

from caplet._marks import parse

__all__ = [
    "MAX_LOOP",
    "MAX_VALUE",
    "OPERATOR_ADDS",
    "PRINTABLE_BUILTINS",
    "PURE_BUILTINS",
    "TEXT_CODECS",
    "Value",
    "binop",
    "call_pure",
    "chr_of",
    "format_fields",
    "formatted",
    "has_parameters",
    "in_place_reorders",
    "join_strings",
    "json_entry",
    "literal_object",
    "percent",
    "percent_mapping",
    "positional",
    "regex_sub",
    "reorder",
    "subscript",
]


Value = str | bytes | int | list["Value"]


#: Largest value the evaluator builds (a decoded payload), in characters or bytes.
MAX_VALUE = 4 << 20

#: ``operator``'s functions that add two sequences: ``add(a, b)`` is ``a + b`` for text
#: (``iadd`` returns the sum of two strings too; recall12: ``iadd`` was not read).
OPERATOR_ADDS = frozenset(
    f"operator.{name}"
    for name in (
        "add",
        "concat",
        "iadd",
        "iconcat",
        "__add__",
        "__concat__",
        "__iadd__",
        "__iconcat__",
    )
)


#: Items a comprehension is evaluated over at most (a name is a few characters).
MAX_LOOP = 4096


#: Builtins whose ``str()`` the evaluator may take: real objects of this interpreter.
PRINTABLE_BUILTINS = frozenset(
    name
    for name, value in vars(builtins).items()
    if callable(value) and not name.startswith("_") and not isinstance(value, type(builtins))
) | {"copyright", "credits", "license", "Ellipsis", "NotImplemented"}
# (Ellipsis, NotImplemented: singletons whose text is fixed; str(Ellipsis) spells "pip",
# str(NotImplemented) "main" (blind32))


#: Builtins whose result depends on their arguments only (no input, no files, no state).
PURE_BUILTINS = (
    frozenset(
        {
            "str",
            "repr",
            "chr",
            "ord",
            "bytes",
            "bytearray",
            "hex",
            "oct",
            "bin",
            "int",
            "len",
            "list",
            "tuple",
            "reversed",
            "sorted",
            "map",
            "type",
            "format",
            "dir",
            "vars",
            "slice",
            "range",
            "zip",
            "sum",
            "abs",
            "min",
            "max",
            "next",
            "filter",
            "enumerate",
            "iter",
            "all",
            "any",
        }
    )
    | PRINTABLE_BUILTINS
) - {"input", "open", "getattr", "globals", "locals", "breakpoint", "eval", "exec", "compile"}


TEXT_CODECS = frozenset({"utf-8", "utf8", "ascii", "latin-1", "latin1", "iso-8859-1", "cp1252"})


def has_parameters(fn: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = fn.args
    return bool(a.posonlyargs or a.args or a.kwonlyargs or a.vararg or a.kwarg)


def positional(fn: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in fn.args.args]


def literal_object(node: ast.AST) -> object | None:
    """``True``, ``None``, ``1.5``, ``{}``, ``[]``: literals the evaluator has no value for."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict) and not node.keys:
        return {}
    if isinstance(node, ast.List | ast.Tuple | ast.Set) and not node.elts:
        return {ast.List: [], ast.Tuple: (), ast.Set: set()}[type(node)]
    return None


def join_strings(sep: Value | None, items: list[Value] | None) -> Value | None:
    """``sep.join(items)`` of strings only."""
    if isinstance(sep, str) and items is not None and all(isinstance(i, str) for i in items):
        strings = [i for i in items if isinstance(i, str)]
        # sized before it is built: "s.join(s)" of a 100 kB string is 10 GB (scanfuzz)
        size = sum(map(len, strings)) + len(sep) * max(len(strings) - 1, 0)
        return sep.join(strings) if size <= MAX_VALUE else None
    return None


def chr_of(code: Value) -> str:
    return chr(code) if isinstance(code, int) and 0 <= code < 0x110000 else "\ufffd"


def binop(op: ast.operator, left: Value | None, right: Value | None) -> Value | None:
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
        if isinstance(left, int) and isinstance(right, str | bytes):
            left, right = right, left  # 2 * '%s' is '%s' * 2 (recall12)
        if (
            isinstance(left, str | bytes)
            and isinstance(right, int)
            and len(left) * right <= MAX_VALUE
        ):
            return left * right
        return left * right if isinstance(left, int) and isinstance(right, int) else None
    if isinstance(op, ast.BitXor) and isinstance(left, int) and isinstance(right, int):
        return left ^ right
    if isinstance(op, ast.Sub) and isinstance(left, int) and isinstance(right, int):
        return left - right
    if isinstance(left, int) and isinstance(right, int):
        # i % 2, c & 0x7F, c >> 4, c << 1: index and code-point arithmetic (blindcn)
        if isinstance(op, ast.Mod | ast.FloorDiv) and right:
            return left % right if isinstance(op, ast.Mod) else left // right
        if isinstance(op, ast.BitAnd | ast.BitOr):
            return left & right if isinstance(op, ast.BitAnd) else left | right
        if isinstance(op, ast.RShift | ast.LShift) and 0 <= right <= 64:
            return left >> right if isinstance(op, ast.RShift) else left << right
    return None


def subscript(
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


def percent(template: str, items: Sequence[Value | None]) -> Value | None:
    """``"%s%s" % ("ev", "al")``: only ``%s``, ``%d``, ``%i``, ``%r``, ``%c`` and ``%%``, no flags,
    widths or mapping keys (anything else is left unevaluated)."""
    pieces: list[str] = []
    position = 0
    used = 0
    size = 0
    while (found := template.find("%", position)) >= 0:
        pieces.append(template[position:found])
        kind = template[found + 1 : found + 2]
        position = found + 2
        if kind == "%":
            pieces.append("%")
            continue
        if kind not in {"s", "d", "i", "r", "c"} or used >= len(items):
            return None
        item = items[used]
        used += 1
        if not isinstance(item, str | int) or (kind in {"d", "i"} and isinstance(item, str)):
            return None
        if kind == "c":
            # "%c%c" % (101, 120): a code point, or a string of one character
            if isinstance(item, str) and len(item) != 1:
                return None
            pieces.append(chr_of(item) if isinstance(item, int) else item)
            continue
        pieces.append(repr(item) if kind == "r" else str(item))
        size += len(pieces[-1])
        if size > MAX_VALUE:  # "%s" * 100 of a 4 MiB string: stopped as it grows (scanfuzz)
            return None
    if used != len(items):
        return None
    pieces.append(template[position:])
    out = "".join(pieces)
    return out if len(out) <= MAX_VALUE else None


#: A format spec that cannot grow a value: alignment, sign, ``#``, ``0``, a width and a
#: precision of three digits at most, a grouping option, and a type (``{x:>8}``, ``{n:02x}``).
_SMALL_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?#?0?\d{0,3}[,_]?(?:\.\d{1,3})?[sdxXobc]?")


def formatted(item: Value | None, spec: str) -> str | None:
    """``format(item, spec)`` for a string or an integer and a small spec; ``None`` otherwise."""
    if not isinstance(item, str | int) or not _SMALL_SPEC.fullmatch(spec):
        return None
    try:
        return format(item, spec)
    except (ValueError, TypeError, OverflowError):
        return None


def format_fields(
    template: str, args: Sequence[Value | None], kwargs: Mapping[str, Value | None] | None = None
) -> Value | None:
    """``"{}{}".format("ex", "ec")``, ``"{a}{b}".format(a="ex", b="ec")``: positional and
    named fields, a small spec (:func:`formatted`), no conversion (an attribute or item of
    a field is never looked up)."""
    pieces: list[str] = []
    automatic = 0
    size = 0
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return None
    for literal, field, spec, conversion in fields:
        pieces.append(literal)
        if field is None:
            continue
        if conversion is not None:
            return None
        item: Value | None
        if field == "":
            index = automatic
            automatic += 1
            item = args[index] if index < len(args) else None
        elif field.isdecimal():
            # isdigit() took '²', which int() refuses, and int() refuses 4300 digits:
            # either raised out of the scan (attack11); no argument list is that long
            index = int(field) if len(field) <= 6 else len(args)
            item = args[index] if index < len(args) else None
        elif kwargs is not None and field.isidentifier():
            item = kwargs.get(field)
        else:
            return None
        text = formatted(item, spec or "")
        if text is None:
            return None
        pieces.append(text)
        size += len(text)
        if size > MAX_VALUE:  # "{0}" * 10**6 of a 4 MiB string: stopped as it grows (scanfuzz)
            return None
    out = "".join(pieces)
    return out if len(out) <= MAX_VALUE else None


#: One field of a ``%`` template with a mapping: ``%(key)s`` (``d``, ``i``, ``r``) or ``%%``.
_MAPPING_FIELD = re.compile(r"%(?:\(([^)]*)\)([sdir])|%)")


def percent_mapping(template: str, mapping: Mapping[str, Value | None]) -> Value | None:
    """``"%(a)s%(b)s" % {"a": "ex", "b": "ec"}``: ``%(key)s``/``d``/``i``/``r`` and ``%%``
    only (anything else is left unevaluated)."""
    out: list[str] = []
    position = 0
    size = 0
    for found in _MAPPING_FIELD.finditer(template):
        literal = template[position : found.start()]
        if "%" in literal:
            return None  # a field of another form (%5s, %c, a positional %s)
        out.append(literal)
        position = found.end()
        key, kind = found.group(1), found.group(2)
        if kind is None:
            out.append("%")
            continue
        item = mapping.get(key)
        if not isinstance(item, str | int) or (kind in {"d", "i"} and isinstance(item, str)):
            return None
        out.append(repr(item) if kind == "r" else str(item))
        size += len(literal) + len(out[-1])
        if size > MAX_VALUE:  # "%(a)s" * 10**5 of a 4 MiB string: stopped as it grows
            return None
    rest = template[position:]
    if "%" in rest:
        return None
    out.append(rest)
    text = "".join(out)
    return text if len(text) <= MAX_VALUE else None


def call_pure(name: str, values: list[Value | None]) -> Value | None:
    """Pure builtins and decoders applied to evaluated arguments (never anything else)."""
    if not values:
        return "" if name == "builtins.str" else None  # str().join(pieces)
    if any(v is None for v in values):
        return None
    first = values[0]
    try:
        if name == "builtins.range" and all(isinstance(v, int) for v in values):
            bounds = [v for v in values if isinstance(v, int)]
            span = range(*bounds) if len(bounds) <= 3 else range(0)
            return list(span) if len(span) <= MAX_LOOP else None
        if name in {"builtins.bytes.decode", "builtins.bytearray.decode"} and isinstance(
            first, bytes
        ):
            codec = values[1] if len(values) == 2 else "utf-8"
            if isinstance(codec, str) and codec.lower() in TEXT_CODECS:
                return codecs.decode(first, codec)
            return None
        if name == "re.sub" and len(values) == 3:
            # re.sub(r"[|]", "", "p|ip"): separators taken out of a name (blind31)
            pattern, repl, text = values
            return regex_sub(pattern, repl, text)
        if name == "builtins.str.join" and len(values) == 2:
            items = values[1]
            return join_strings(first, list(items) if isinstance(items, str | list) else None)
        if name == "builtins.divmod" and len(values) == 2:
            # n, r = divmod(n, 36): a name unpacked from an integer, digit by digit (recall17)
            right = values[1]
            if isinstance(first, int) and isinstance(right, int) and right:
                return list(divmod(first, right))
            return None
        if name == "builtins.int" and len(values) == 2 and isinstance(first, str):
            base = values[1]
            return int(first, base) if isinstance(base, int) and len(first) <= 64 else None
        if name == "builtins.len" and len(values) == 1 and isinstance(first, str | list):
            return len(first)
        if name == "builtins.chr" and isinstance(first, int):
            return chr_of(first)
        if name in {"builtins.hex", "builtins.oct", "builtins.bin"} and isinstance(first, int):
            return {"builtins.hex": hex, "builtins.oct": oct, "builtins.bin": bin}[name](first)
        if name == "builtins.ord" and isinstance(first, str) and len(first) == 1:
            return ord(first)
        if name == "builtins.str" and len(values) == 2 and isinstance(first, bytes):
            # str(b"exec", "utf-8"): bytes decoded
            codec = values[1]
            if isinstance(codec, str) and codec.lower() in TEXT_CODECS:
                return codecs.decode(first, codec)
            return None
        if name in {"builtins.bytes", "builtins.bytearray"} and isinstance(first, bytes):
            return first if len(values) == 1 else None
        if name in {"builtins.bytes", "builtins.bytearray"} and isinstance(first, str):
            codec = values[1] if len(values) == 2 else None
            if isinstance(codec, str) and codec.lower() in TEXT_CODECS:
                return first.encode(codec)
            return None
        if name in {"builtins.str", "builtins.repr"} and isinstance(first, str | int):
            return str(first) if name == "builtins.str" else repr(first)
        if name in {"builtins.bytes", "builtins.bytearray"} and isinstance(first, list):
            codes = [i for i in first if isinstance(i, int) and 0 <= i < 256]
            return bytes(codes) if len(codes) == len(first) else None
        if name in {"builtins.list", "builtins.tuple"} and isinstance(first, str | bytes | list):
            # list(b"ssecorpbus"): a list of byte values, reordered and made bytes again
            return list(first)
        if name == "builtins.bytes.fromhex" and isinstance(first, str):
            return bytes.fromhex(first)
        if name == "ast.literal_eval" and isinstance(first, str):
            return literal_text(first)
        if name == "struct.pack" and isinstance(first, str) and struct.calcsize(first) <= 4096:
            # struct.pack(">3H", 0x7379, 0x7374, 0x656D): a name packed into integers (blind17)
            return struct.pack(first, *values[1:])
        if name == "unicodedata.lookup" and isinstance(first, str) and len(first) <= 100:
            # lookup("LATIN SMALL LETTER E"): a letter by its Unicode name (blind17)
            return unicodedata.lookup(first)
        data = first.encode("latin-1") if isinstance(first, str) else first
        if not isinstance(data, bytes):
            return None
        if name in {"base64.b64decode", "base64.decodebytes", "base64.standard_b64decode"}:
            return base64.b64decode(data + b"=" * (-len(data) % 4))
        if name == "base64.urlsafe_b64decode":
            return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))
        if name == "base64.b32decode":
            return base64.b32decode(data + b"=" * (-len(data) % 8))
        if name == "base64.b32hexdecode":
            return base64.b32hexdecode(data + b"=" * (-len(data) % 8))
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
        if name == "codecs.escape_decode":
            # a (bytes, length) pair; an unknown escape only warns (blind35)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return [codecs.escape_decode(data)[0], len(data)]
        if name in {"zlib.decompress", "gzip.decompress"}:
            inflater = zlib.decompressobj(47)  # zlib or gzip header, detected
            out = inflater.decompress(data, MAX_VALUE)
            return out if not inflater.unconsumed_tail else None
        if (
            name in {"codecs.decode", "codecs.encode"}
            and len(values) == 2
            and isinstance(values[1], str)
        ):
            codec = values[1].lower().replace("-", "_")
            if codec in {"rot13", "rot_13"} and isinstance(first, str):
                return codecs.decode(first, "rot13")  # its own inverse: encode is decode
            if name == "codecs.encode":
                return None
            if codec in {"hex", "base64"}:
                return codecs.decode(data, codec)
    except (
        ValueError,
        TypeError,
        KeyError,
        OverflowError,
        binascii.Error,
        zlib.error,
        struct.error,
    ):
        return None
    return None


#: The longest text :func:`literal_text` parses (a stage of a few kilobytes, a name).
_MAX_LITERAL = 256 * 1024


def literal_text(text: str) -> Value | None:
    """``ast.literal_eval(text)`` when ``text`` is one string or bytes literal of at most
    :data:`_MAX_LITERAL` characters: ``"b'\\x69\\x6d...'"`` is the bytes its escapes spell
    (blind32: a stage kept as the source of a literal, unwrapped and run). Anything else
    (containers, numbers, expressions) is not evaluated: only one parse, no nesting."""
    if len(text) > _MAX_LITERAL:
        return None
    try:
        # through the marks' bound, as every parse of a package's text (a long run of
        # combining marks makes a parse quadratic: the seventeenth session)
        tree = parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # LongMarkRunError too
        return None
    body = tree.body
    if isinstance(body, ast.Constant) and isinstance(body.value, str | bytes):
        return body.value
    return None


#: The longest JSON document the evaluator parses for an entry (names, a small table).
_MAX_JSON = 64 * 1024


def json_entry(document: Value | None, key: Value | None) -> Value | None:
    """``json.loads(document)[key]`` when ``document`` is a JSON object of at most
    :data:`_MAX_JSON` characters and the entry is text, a number or a list of texts."""
    if not isinstance(document, str | bytes) or len(document) > _MAX_JSON:
        return None
    try:
        table = json.loads(document)
    except (ValueError, RecursionError):
        return None
    value = table.get(key) if isinstance(table, dict) and isinstance(key, str) else None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return value if isinstance(value, str | int) else None


def reorder(value: Value | None, methods: Iterable[str]) -> Value | None:
    """``value`` (a bytearray's bytes or a list) after in-place ``reverse()``/``sort()``
    calls, in order; text and numbers have no such methods and are returned as they are."""
    for method in list(methods)[:64]:
        if not isinstance(value, bytes | list):
            return value
        if method == "reverse":
            value = value[::-1]
        elif isinstance(value, bytes):
            value = bytes(sorted(value))
        elif all(isinstance(v, str) for v in value):
            value = sorted(v for v in value if isinstance(v, str))
        else:
            return None
    return value


def regex_sub(pattern: Value | None, repl: Value | None, text: Value | None) -> Value | None:
    """``re.sub(pattern, repl, text)`` of texts the file writes, through RE2 (linear time,
    whatever the pattern); ``None`` for a pattern RE2 does not take, a replacement with
    escapes or group references, or a result past :data:`MAX_VALUE`."""
    if not (isinstance(pattern, str) and isinstance(repl, str) and isinstance(text, str)):
        return None
    if len(pattern) > 256 or "\\" in repl or len(text) * (len(repl) + 1) > MAX_VALUE:
        return None
    try:
        result: str = re2.sub(pattern, repl, text)
    except re2.error:
        return None
    return result


def in_place_reorders(calls: Iterable[ast.Call]) -> dict[str, list[str]]:
    """By name, the ``name.reverse()``/``name.sort()`` calls (no arguments) among
    ``calls``, in their order: what :func:`reorder` applies to the name's value."""
    found: dict[str, list[str]] = {}
    for call in calls:
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in {"reverse", "sort"}
            and isinstance(func.value, ast.Name)
            and not (call.args or call.keywords)
        ):
            found.setdefault(func.value.id, []).append(func.attr)
    return found
