"""A sink kept in a container and called out of it (caplet._scan._container_stores, recall11).

Issue 16 point 1: ``exec`` (or ``os.system``, ``subprocess.Popen``, a builtin looked
up with ``getattr``) put into a list, a dict or onto an object after the container's
literal, then called by index, key, attribute or a loop on a decoded payload, was no
CPL-THR-001 in either mode; the resolver read a list as its literal, so it even
answered ``print`` for ``gs = [print]; gs[0] = exec; gs[0](...)``.
"""

from __future__ import annotations

import ast
import base64
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._container_stores import container_stores
from caplet._scan._flow import Flow
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from caplet._scan._syntax import Survey, survey

from .prefilterkit import found_in_a_package

_STAGE = base64.b64encode(b"import os; os.system('id')").decode()
_HEAD = f"import base64, zlib, os, subprocess, builtins, types, argparse\np = {_STAGE!r}\n"

#: Each attack: the store, then the call on a decoded payload.
ATTACKS = {
    "list-append": "xs = []\nxs.append(exec)\nxs[0](base64.b64decode(p))\n",
    "list-setitem": "xs = [None]\nxs[0] = exec\nxs[0](base64.b64decode(p))\n",
    "list-insert": "xs = []\nxs.insert(0, exec)\nxs[0](base64.b64decode(p))\n",
    "list-iadd": "xs = []\nxs += [exec]\nxs[0](base64.b64decode(p))\n",
    "list-extend": "xs = []\nxs.extend([exec])\nxs[-1](base64.b64decode(p))\n",
    "dict-setitem": "d = {}\nd['k'] = exec\nd['k'](zlib.decompress(base64.b64decode(p)))\n",
    "dict-update": "d = {}\nd.update(k=exec)\nd['k'](base64.b64decode(p))\n",
    "dict-update-literal": "d = {}\nd.update({'k': exec})\nd.get('k')(base64.b64decode(p))\n",
    "dict-setdefault": "d = {}\nd.setdefault('k', exec)\nd['k'](base64.b64decode(p))\n",
    "dict-constructor": "d = dict(k=exec)\nd['k'](base64.b64decode(p))\n",
    "object-attribute": "class O:\n    pass\no = O()\no.f = exec\no.f(base64.b64decode(p))\n",
    "setattr": "class O:\n    pass\no = O()\nsetattr(o, 'f', exec)\no.f(base64.b64decode(p))\n",
    "namespace": "o = types.SimpleNamespace(f=exec)\no.f(base64.b64decode(p))\n",
    "argparse-namespace": "o = argparse.Namespace(f=exec)\no.f(base64.b64decode(p))\n",
    "self-attribute": (
        "class R:\n    def __init__(self):\n        self.run = exec\n"
        "    def go(self, data):\n        self.run(base64.b64decode(data))\n"
        "R().go(p)\n"
    ),
    "self-list": (
        "class R:\n    def __init__(self):\n        self.fs = []\n        self.fs.append(exec)\n"
        "    def go(self):\n        self.fs[0](base64.b64decode(p))\n"
    ),
    "loop": "xs = []\nxs.append(exec)\nfor f in xs:\n    f(base64.b64decode(p))\n",
    "loop-values": "d = {}\nd['a'] = exec\nfor f in d.values():\n    f(base64.b64decode(p))\n",
    "alias": "xs = []\nys = xs\nys.append(exec)\nxs[0](base64.b64decode(p))\n",
    "os-system": "xs = []\nxs.append(os.system)\nxs[0](base64.b64decode(p).decode())\n",
    "popen": (
        "d = {}\nd['r'] = subprocess.Popen\nd['r'](base64.b64decode(p).decode(), shell=True)\n"
    ),
    "getattr-builtins": (
        "xs = []\nxs.append(getattr(builtins, 'exec'))\nxs[0](base64.b64decode(p))\n"
    ),
    # a function of the file calls out of the list before the module fills it: the
    # table is the whole file's, not what the walk had seen when it reached the call
    "filled-after-use": (
        "def run(data):\n    H[0](base64.b64decode(data))\n\nH = []\nH.append(exec)\nrun(p)\n"
    ),
    # a registry filled through a parameter of the file's own function
    "registered-parameter": (
        "HOOKS = []\ndef register(hook):\n    HOOKS.append(hook)\n    return hook\n\n"
        "register(exec)\nHOOKS[0](base64.b64decode(p))\n"
    ),
    # the wrong answer: a list read as its literal after an element was replaced
    "replaced-element": "gs = [print]\ngs[0] = exec\ngs[0](base64.b64decode(p))\n",
    "reordered": "gs = [exec, print]\ngs.reverse()\ngs[1](base64.b64decode(p))\n",
    # recall12 (recall11's open row): a value taken back out by pop or an iterator
    "list-pop": "xs = [exec]\nf = xs.pop()\nf(base64.b64decode(p))\n",
    "list-pop-appended": "xs = []\nxs.append(exec)\nxs.pop(0)(base64.b64decode(p))\n",
    "dict-pop": "d = {'k': os.system}\nd.pop('k')(base64.b64decode(p).decode())\n",
    "dict-pop-stored": "d = {}\nd['k'] = exec\nd.pop('k', None)(base64.b64decode(p))\n",
    "next-iter": "xs = [exec]\nnext(iter(xs))(base64.b64decode(p))\n",
    "next-iter-values": (
        "d = {}\nd['k'] = exec\nf = next(iter(d.values()))\nf(base64.b64decode(p))\n"
    ),
    "next-iterator-name": "it = iter([exec])\nf = next(it)\nf(base64.b64decode(p))\n",
    "iterator-dunder-next": "xs = [exec]\niter(xs).__next__()(base64.b64decode(p))\n",
    "deque-popleft": (
        "import collections\nq = collections.deque([print, exec])\nq.rotate()\n"
        "q.popleft()(base64.b64decode(p))\n"
    ),
    "next-generator": (
        "f = next(g for g in [print, exec] if g.__name__ == 'exec')\nf(base64.b64decode(p))\n"
    ),
    "loop-over-a-copy": (
        "xs = []\nxs.append(exec)\nfor f in list(xs):\n    f(base64.b64decode(p))\n"
    ),
    # recall14 (recall12's open rows): keys unknown both at the store and at the lookup
    "unknown-keys": (
        "d = {}\nk = os.environ.get('N', 'r')\nd[k] = exec\nj = os.environ.get('N', 'r')\n"
        "d[j](base64.b64decode(p))\n"
    ),
    "unknown-key-get": (
        "d = {}\nd.setdefault(os.getenv('N'), exec)\nd.get(os.getenv('M'))(base64.b64decode(p))\n"
    ),
    # picked out of a container by a call
    "popitem-indexed": "d = {'a': exec}\nd.popitem()[1](base64.b64decode(p))\n",
    "popitem-unpacked": "d = {}\nd['a'] = exec\nk, f = d.popitem()\nf(base64.b64decode(p))\n",
    "min-of-list": "fs = [exec]\nmin(fs, key=id)(base64.b64decode(p))\n",
    "max-of-arguments": "max(print, exec, key=id)(base64.b64decode(p))\n",
    "sorted-first": "fs = {eval}\nsorted(fs, key=repr)[0](base64.b64decode(p).decode())\n",
    "random-choice": "import random\nrandom.choice([exec])(base64.b64decode(p))\n",
}


def _danger(root: Path, mode: ScanMode) -> set[tuple[str, Severity]]:
    report = scan_tree(root, mode=mode)
    return {(f.rule_id, f.severity) for f in report.findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE], ids=lambda m: m.value)
@pytest.mark.parametrize("body", ATTACKS.values(), ids=ATTACKS.keys())
def test_a_sink_kept_in_a_container_and_called_from_it_is_a_threat(
    tmp_path: Path, body: str, mode: ScanMode
) -> None:
    (tmp_path / "mod.py").write_text(_HEAD + body, encoding="utf-8")
    assert ("CPL-THR-001", Severity.DANGER) in _danger(tmp_path, mode)


@pytest.mark.parametrize("body", ATTACKS.values(), ids=ATTACKS.keys())
def test_the_prefilter_sends_a_sink_kept_in_a_container_to_the_parser(
    tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, _HEAD + body, "CPL-THR-001")


@pytest.mark.parametrize("body", ATTACKS.values(), ids=ATTACKS.keys())
def test_a_sink_kept_in_a_container_is_found_in_a_large_file(
    tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a large file is visited around its hits only: the store and the call apart from them
    padding = "".join(f"def helper_{i}(value):\n    return value + {i}\n\n" for i in range(900))
    found_in_a_package(tmp_path, monkeypatch, _HEAD + padding + body, "CPL-THR-001")


def _resolved(source: str, expression: str) -> tuple[str, ...]:
    """What the last line's ``expression`` resolves to in ``source``."""
    tree = ast.parse(source)
    result = survey(tree, 200, 100_000)
    assert isinstance(result, Survey)
    flow = Flow(result.bindings, result.nodes, result.scopes)
    last = max(
        (n for n in ast.walk(tree) if isinstance(n, ast.expr) and ast.unparse(n) == expression),
        key=lambda n: n.lineno,
    )
    return flow.resolve(last)


def test_a_list_changed_after_its_literal_is_not_read_as_its_literal() -> None:
    assert _resolved("gs = [print]\ngs[0] = exec\ngs[0]\n", "gs[0]") == (
        "builtins.print",
        "builtins.exec",
    )
    # reordered without an addition: any element may be at any place
    assert set(_resolved("gs = [exec, print]\ngs.reverse()\ngs[1]\n", "gs[1]")) == {
        "builtins.exec",
        "builtins.print",
    }
    # handed to a call that may change it: the same
    assert set(_resolved("gs = [exec, print]\nshuffle(gs)\ngs[1]\n", "gs[1]")) == {
        "builtins.exec",
        "builtins.print",
    }
    # left alone, the literal is read as written (as before)
    assert _resolved("gs = [exec, print]\nlen(gs)\ngs[1]\n", "gs[1]") == ("builtins.print",)


def test_the_table_records_what_each_spelling_adds() -> None:
    source = (
        "xs.append(a)\nxs.insert(0, b)\nxs.extend([c, d])\nxs += (e,)\nxs[1] = f\n"
        "d.update({'k': g}, j=h)\nd.setdefault('m', i)\no.x = k\nsetattr(o, 'y', m)\n"
        "xs.sort()\nys = xs\n"
    )
    tree = ast.parse(source)
    result = survey(tree, 200, 100_000)
    assert isinstance(result, Survey)
    flow = Flow(result.bindings, result.nodes, result.scopes)
    stores = container_stores(flow.of_kind)
    added = {n: sorted(ast.unparse(v) for _, v in stores.entries_of(n)) for n in ("xs", "d")}
    assert added == {"xs": list("abcdef"), "d": ["g", "h", "i"]}
    assert [ast.unparse(v) for v in stores.attributes["o.x"]] == ["k"]
    assert [ast.unparse(v) for v in stores.attributes["o.y"]] == ["m"]
    assert stores.changed("ys")
    assert stores.changed("xs")
    assert not stores.changed("zs")
    keys = [None if k is None else ast.unparse(k) for k, _ in stores.entries_of("d")]
    assert keys == ["'k'", "'j'", "'m'"]


NEAR_MISSES = {
    # benign code keeps print or a logger in a list and calls it
    "print-list": (
        "import logging, base64\nlog = logging.getLogger(__name__)\nouts = []\n"
        "outs.append(print)\nouts.append(log.info)\n"
        "for out in outs:\n    out(base64.b64decode(data))\n"
    ),
    "print-replaced": (
        "import base64\nouts = [len]\nouts[0] = print\nouts[0](base64.b64decode(x))\n"
    ),
    # a dispatch dict of ordinary functions called with decoded JSON
    "dispatch-json": (
        "import json, base64\n"
        "def create(p):\n    return p\n\ndef delete(p):\n    return None\n\n"
        "HANDLERS = {}\nHANDLERS['create'] = create\nHANDLERS.update(delete=delete)\n"
        "msg = json.loads(base64.b64decode(body))\nHANDLERS[msg['op']](msg)\n"
        "HANDLERS['create'](json.loads(base64.b64decode(body)))\n"
    ),
    "namespace-of-functions": (
        "import types, base64\nns = types.SimpleNamespace(show=print)\n"
        "ns.show(base64.b64decode(x))\n"
    ),
    # recall12: print taken back out by pop or an iterator; a kwargs entry popped
    "print-popped": (
        "import base64\nouts = [print]\nouts.pop()(base64.b64decode(x))\n"
        "next(iter(outs))(base64.b64decode(x))\nd = {'k': len}\nd.pop('k')(base64.b64decode(x))\n"
    ),
    "kwargs-popped": (
        "import base64\ndef f(**kwargs):\n    cb = kwargs.pop('cb', print)\n"
        "    cb(base64.b64decode(kwargs.pop('data')))\n"
    ),
    # recall14: ordinary values picked by min/max/sorted/popitem, a lookup by an unknown key
    "picked-ordinary": (
        "import base64\nfs = {'a': print}\nfs.popitem()[1](base64.b64decode(x))\n"
        "min([len, str], key=id)(base64.b64decode(x))\nsorted([1, 2])[0]\n"
        "max(3, 4)\nopts = {'p': print}\nopts[input()](base64.b64decode(x))\n"
    ),
    "self-callback": (
        "import base64\nclass C:\n    def __init__(self, cb):\n        self.cb = cb\n"
        "    def go(self, x):\n        self.cb(base64.b64decode(x))\n"
    ),
}


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE], ids=lambda m: m.value)
@pytest.mark.parametrize("source", NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
def test_ordinary_callables_kept_in_a_container_stay_clean(
    tmp_path: Path, source: str, mode: ScanMode
) -> None:
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    assert _danger(tmp_path, mode) == set()


def test_containers_spread_into_each_other_are_read_once(tmp_path: Path) -> None:
    # Attack on the defence (found on the benign corpus): forty dicts each updated from
    # two others, a cycle; every read walked every path between them down to the depth
    # bound (2**48 reads), so the scan never ended. Read once per container and key.
    n = 40
    source = (
        _HEAD
        + "".join(f"d{i} = {{}}\n" for i in range(n))
        + "".join(f"d{i}.update(d{(i + 1) % n})\nd{i}.update(d{(i + 7) % n})\n" for i in range(n))
        + "d0['k'] = exec\nfor f in d5.values():\n    f(base64.b64decode(p))\n"
    )
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    for mode in (ScanMode.PLUGIN, ScanMode.PACKAGE):
        assert ("CPL-THR-001", Severity.DANGER) in _danger(tmp_path, mode)
