"""The data-flow tables (``_scan._sources``): what a decoder is."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind15 (tune b15-ds-quopri-exec, -html-unescape-exec, -unquote-system): the
#: standard library's text codecs outside base64 and binascii's base64 undo an
#: encoding as well as b64decode does, and a command or code hidden in one is run
#: decoded data.
ESCAPED = [
    "import quopri\nexec(quopri.decodestring(Q).decode())\n",
    "import binascii\nexec(binascii.a2b_qp(Q))\n",
    "import html\nexec(html.unescape(H))\n",
    "import os\nfrom urllib.parse import unquote\nos.system(unquote(U))\n",
    "import subprocess, urllib.parse\nsubprocess.Popen(urllib.parse.unquote_plus(U), shell=True)\n",
    "import urllib.parse\nexec(urllib.parse.unquote_to_bytes(U))\n",
]


@pytest.mark.parametrize("source", ESCAPED)
def test_text_codecs_into_a_sink_are_run_decoded_data(source: str) -> None:
    assert "CPL-THR-001" in danger(source)


@pytest.mark.parametrize("source", ESCAPED)
def test_text_codecs_into_a_sink_are_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-001")


@pytest.mark.parametrize(
    "source",
    [
        # a web framework unquoting a path and serving the file it names
        "import subprocess\nfrom urllib.parse import unquote\n"
        "def serve(path):\n    return open(unquote(path)).read()\n"
        "subprocess.run(['git', 'status'])\n",
        # a mail library decoding a quoted-printable body and printing it
        "import quopri\nprint(quopri.decodestring(body).decode())\n",
        # a template engine unescaping entities beside a compiled template it runs
        "import html\ntext = html.unescape(raw)\n"
        "code = compile(TEMPLATE, 'tpl', 'exec')\nexec(code)\n",
        # unquote of a URL's path handed to git as an argument, not as the program
        "import subprocess\nfrom urllib.parse import unquote\n"
        "subprocess.run(['git', 'clone', unquote(url)])\n",
    ],
)
def test_text_codecs_beside_sinks_they_do_not_reach_are_not_threats(source: str) -> None:
    assert "CPL-THR-001" not in danger(source)
