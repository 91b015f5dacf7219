"""The spellings of a lookup by name, as prefilter patterns (issue 16 class 1): getattr
and its kin, a namespace indexed or asked with ``.get``, the pieces a hidden name is built
from, a key built from literals, a module found by a name not written out, a namespace
copied into a dict.

Apart from :mod:`caplet._scan._prefilter_patterns`, which pairs them with what makes them
a threat, because they are one concern, reviewed together when a new spelling of a lookup
is found (and that module had grown past 600 lines); :mod:`caplet._scan._glued_forms`
reads :data:`LOOKUP_ANY_NAME` too.
"""

from __future__ import annotations

import builtins
from typing import Final

__all__ = [
    "BUILT_KEY",
    "DEFAULT_LOOKUP",
    "JOINED_KEY",
    "KEYWORD_NAMED",
    "LOOKUP",
    "LOOKUP_ANY_NAME",
    "LOOKUP_BY_HELPER",
    "LOOKUP_BY_VARIABLE",
    "LOOKUP_NAME",
    "LOOKUP_PIECES",
    "MEMBERS_OF_BUILTINS",
    "NAMESPACE_BY_NAME",
    "NAMESPACE_FILLED",
    "PIECES",
    "SENSITIVE_LOOKUP",
    "SPEC_BY_NAME",
    "STRONG_PIECES",
]

#: A lookup by name: getattr and its kin, a namespace indexed or asked with .get.
LOOKUP = (
    r"(?:\b(?:getattr|__import__|import_module|attrgetter|methodcaller|__getattribute__)\s*\(|"
    r"(?:^|[^.\w])eval\s*\(|\b__builtins__\s*\.\s*get\s*\(|\b__getitem__\s*\(|"
    r"(?:__dict__|\bvars\([^)\n]*\)|\bmodules|\bglobals\(\s*\)|\bf_builtins)\s*(?:\[|\.\s*get\s*\())"
)
#: The same lookups by a bare name (getattr(os, name)): the name is built elsewhere.
LOOKUP_BY_VARIABLE = (
    r"\b(?:getattr|__getattribute__)\s*\([^,\n]*,\s*[A-Za-z_]\w*\s*[,)]|"
    # a literal glued to a variable (getattr(_o, "p" + _n): blind32)
    r"\b(?:getattr|__getattribute__)\s*\([^,\n]*,\s*[rbuRBU]?['\"][^'\"\n]*['\"]\s*\+\s*"
    r"[A-Za-z_]\w*\s*[,)]|"
    r"\b(?:__import__|import_module|attrgetter)\s*\(\s*[A-Za-z_]\w*\s*[,)]|"
    r"(?:__dict__|\bvars\([^)\n]*\)|\bmodules|\bglobals\(\s*\))\s*"
    r"(?:\[\s*[A-Za-z_]\w*\s*\]|\.\s*get\s*\(\s*[A-Za-z_]\w*\s*[,)])"
)
#: What a file that looks names up contains.
LOOKUP_NAME = (
    r"\b(?:getattr|__import__|import_module|attrgetter|methodcaller|__getattribute__|__dict__|"
    r"vars|modules|globals|eval|__builtins__|__getitem__|f_builtins)\b"
)
#: The ways to build a name from literals: concatenated, joined, sliced, reversed, from
#: code points, a list of byte values or a builtin's repr, decoded, a literal formatted,
#: an integer literal unpacked into bytes.
PIECES = (
    r"['\"]\s*\+\s*[rbuRBUfF]{0,2}['\"]|\.join\(|['\"]\s*\[\s*:*\s*:\s*-\s*1\s*\]|\bchr\s*\(|"
    r"\bbytes\(\s*\[|\bmap\(\s*chr\b|\breversed\(|\bstr\(\s*(?:oct|hex|bin|copyright|credits|"
    r"license)\s*\)|\b(?:b64decode|b32(?:hex)?decode|b16decode|unhexlify|fromhex|rot_?13)\b|"
    r"\bcodecs\.decode\b|['\"]\s*\.\s*format\(\s*[rbuRBU]?['\"]|['\"]\s*%\s*\(?\s*[rbuRBU]?['\"]|"
    r"\b0[xX][0-9a-fA-F]+\s*\)\s*\.\s*to_bytes\(|"
    # a literal operated on (sliced, multiplied, a method called on it), bytes of a list,
    # str of bytes, an integer unpacked, a lambda's value, identifiers outside ASCII (the
    # CJK family), code points formatted with %c, an f-string of literals
    r"[rbuRBU]?['\"][^'\"\n]*['\"]\s*(?:\[|\*|\.\s*\w+\s*\()|\bbytearray\(\s*\[|"
    r"\bstr\(\s*[bB]['\"]|\bto_bytes\(|\bbytes\s*\.\s*decode\(|\blambda\b|[^\x00-\x7f]|"
    r"['\"]\s*%\s*\(\s*\d|\b[fF][rR]?['\"][^'\"\n]*\{\s*[rbuRBU]?['\"]"
)
#: A lookup whose name is not written out: anything but a quote after getattr's comma,
#: an importer's or a namespace subscript's parenthesis (a variable, an attribute, a
#: call). A name written out is spelled in the text (every table's tokens match
#: ``"system"`` too); a literal operated on is :data:`LOOKUP_PIECES`.
LOOKUP_ANY_NAME = (
    r"\b(?:getattr|__getattribute__)\s*\([^,\n]*,\s*[^'\"\s]|"
    r"\b(?:__import__|import_module|attrgetter|methodcaller|__getitem__)\s*\(\s*[^'\"\s)]|"
    r"(?:__dict__|\bvars\([^)\n]*\)|\bmodules|\bglobals\(\s*\)|\bf_builtins|__globals__|"
    r"__builtins__)\s*(?:\[\s*[^'\"\s]|\.\s*get\s*\(\s*[^'\"\s])"
)
#: A lookup with a name built from literals on its own line (the first pattern of pair 1).
LOOKUP_PIECES = LOOKUP + r"[^\n]*(?:" + PIECES + r")"

#: The text of a builtin function or singleton (``repr(open)`` is "<built-in function
#: open>", ``str(Ellipsis)``, ``str(type(None))``): letters a hidden name is sliced from
#: (blind32; ``str(oct)``'s family, written with other builtins). Lower-case callables only:
#: ``str(ValueError)`` is an error message's everyday spelling.
BUILTIN_TEXT = (
    r"\b(?:str|repr|format)\(\s*(?:type\(\s*None\s*\)|Ellipsis|NotImplemented|"
    + "|".join(
        sorted(
            name
            for name, value in vars(builtins).items()
            if callable(value) and name.islower() and not name.startswith("_")
        )
    )
    + r")\s*\)"
)

#: Pieces that hardly ever build anything but a hidden name: code points joined, a
#: literal reversed, slices of a builtin's repr, a list of byte values, rot13 (a literal
#: formatted is everywhere: "{}: {}".format("x", y), so not here; on the lookup's own
#: line it is the first pair's).
STRONG_PIECES = (
    r"\b(?:map|join)\(\s*chr\b|\bchr\(\s*\d+\s*\)\s*\+|['\"]\s*\[\s*:*\s*:\s*-\s*1\s*\]|"
    r"\breversed\(\s*['\"]|\bstr\(\s*(?:oct|hex|bin|copyright|credits|license)\s*\)|"
    r"\bbytes\(\s*\[\s*\d|\brot_?13\b|"
    # a literal's case flipped or an affix cut off ("zzOS".removeprefix("zz").swapcase()), a
    # name packed into integers or spelled from Unicode character names (blind17)
    r"['\"]\s*\.\s*(?:swapcase|removeprefix|removesuffix)\s*\(|\bstruct\s*\.\s*pack\s*\(|"
    r"\bunicodedata\s*\.\s*lookup\b|"
    # two strings interleaved ("".join(a + b for a, b in zip("sbrcs", "upoes"))) or a
    # name's letters picked out of padding by a selector list (compress("qeyx", [0, 1,
    # ...])) (blind37)
    r"\bjoin\(\s*\w+\s*\+\s*\w+\s+for\s+\w+\s*,\s*\w+\s+in\s+zip\(|"
    r"\bcompress\(\s*[rbuRBU]?['\"]|" + BUILTIN_TEXT
)
#: getattr of a module worth hiding by anything but a plain literal (a variable, an
#: expression, a literal operated on): getattr(os, name), getattr(os, "X".lower()).
SENSITIVE_LOOKUP = (
    r"\bgetattr\(\s*(?:os|posix|nt|subprocess|sys|shutil|socket|importlib|ctypes|pty|builtins|"
    r"__builtins__|marshal|base64|codecs|pip)\s*,\s*(?:[^'\"\s]|[rbuRBU]?(?:'[^'\n]*'|"
    r"\"[^\"\n]*\")\s*[^,)\s])"
)
#: A subscript or .get whose key is built from literals only ("lo" + "ad", "lave"[::-1],
#: "".join(["ex", "ec"]), "{}".format("ex"...), "%s" % "x", "ev" "al"), or from code
#: points, bytes or a builtin's repr (a list literal is not a subscript).
BUILT_KEY = (
    r"(?:[\w\])]\s*\[|\.\s*get\s*\()\s*(?:[rbuRBU]?['\"][^'\"\n]*['\"]\s*"
    r"(?:\+\s*[rbuRBU]?['\"]|\[\s*:|\.\s*join\(\s*[\[(]\s*['\"]|\.\s*format\(\s*['\"]|"
    r"%\s*\(?\s*['\"]|[rbuRBU]?['\"])|(?:chr|map|reversed)\s*\(|bytes\(\s*\[|"
    r"str\(\s*(?:oct|hex|bin|copyright|credits|license)\b)"
)

#: A lookup by what a call given literals returns (blindcn): getattr's name, an importer's
#: or attrgetter's argument a call whose first argument is a literal or a number.
LOOKUP_BY_HELPER = (
    r"(?:\b(?:getattr|__getattribute__)\s*\([^,\n]*,|"
    r"\b(?:__import__|import_module|attrgetter|methodcaller)\s*\()"
    r"\s*[A-Za-z_][\w.]*\s*\(\s*(?:[rbuRBU]?['\"]|-?\d)"
)
#: A subscript or ``.get`` keyed by code points joined (blindcn): ``ns["".join(chr(``.
JOINED_KEY = r"(?:[\w\])]\s*\[|\.\s*get\s*\()\s*[rbuRBU]?['\"]['\"]\s*\.\s*join\(\s*(?:chr|map)\b"

#: getattr or __import__ as a parameter's default under another name (blindcn): RE2 has no
#: lookahead, so the name is any of another length than the builtin's own
#: (``getattr=getattr`` makes a builtin local for speed and hides nothing).
DEFAULT_LOOKUP = (
    r"[(,]\s*(?:[A-Za-z_]\w{0,5}|[A-Za-z_]\w{7,})\s*=\s*(?:builtins\s*\.\s*)?getattr\s*[,):]|"
    r"[(,]\s*(?:[A-Za-z_]\w{0,8}|[A-Za-z_]\w{10,})\s*=\s*(?:builtins\s*\.\s*)?__import__\s*[,):]"
)

#: A module found by a name not written out (``importlib.util.find_spec(name)``).
SPEC_BY_NAME: Final = (
    r"\bfind_spec\s*\(\s*(?:[^'\"\s)]|[rbuRBU]?(?:'[^'\n]*'|\"[^\"\n]*\")\s*[+\[.%])"
)
#: Builtins' namespace listed (``dict(inspect.getmembers(builtins))[n]``).
MEMBERS_OF_BUILTINS: Final = r"\bgetmembers\s*\(\s*(?:builtins|__builtins__)\b"

#: attack9: a decoded name looked up in a namespace (CPL-THR-003 in the whole-file pass,
#: never parsed in package mode): ``vars(os)[k]``, ``importlib.import_module("builtins")
#: .__dict__[k]``, or the namespace bound to a name first (``ns = vars(os)``, then
#: ``ns[k](...)``), beside a decoder.
NAMESPACE_BY_NAME: Final = (
    r"(?:__dict__|\bvars\([^)\n]*\)|\bmodules|\bglobals\(\s*\)|__builtins__)\s*"
    r"(?:\[\s*[^'\"\s]|\.\s*get\s*\(\s*[^'\"\s])|"
    r"\b[A-Za-z_]\w*\s*=\s*(?:vars\([^)\n]*\)|[\w.]*\.__dict__|(?:sys\.)?modules|"
    r"globals\(\s*\))\s*(?:[;#\n]|$)"
)

#: recall10: a dict of the file filled with a namespace (``d.update(vars(builtins))``,
#: ``d.update(os.__dict__)``, ``d |= vars(os)``) and looked up by a decoded key
#: (``d[b64decode(k).decode()](...)``), beside a decoder: the lookup's line names no
#: namespace at all. A copy by a spread or a chain (``{**vars(os)}``, ``ChainMap({},
#: os.__dict__)``) is the same copy (attack11).
NAMESPACE_FILLED: Final = (
    r"(?:\.\s*update\s*\(|\|=|\*\*|\bChainMap\s*\([^)\n]*?)\s*(?:vars\(|[\w.]*\.__dict__\b|"
    r"(?:sys\s*\.\s*)?modules\b|"
    r"globals\(\s*\))"
)

#: blind18 (tune b18-cn-kwargs-key-name): a lookup given what a call with a keyword argument
#: returns (``import_module(_key(subprocess=None))``), beside a function of the file that
#: takes ``**kwargs`` (whose keys it returns: the keyword's name is the name looked up).
KEYWORD_NAMED: Final = (
    r"\b(?:(?:getattr|__getattribute__)\s*\([^,\n]*,|(?:__import__|import_module|attrgetter)\s*\()"
    r"\s*[A-Za-z_][\w.]*\(\s*[A-Za-z_]\w*\s*=",
    r"\bdef\s+\w+\s*\([^)]*\*\*\w+\s*\)",
)
