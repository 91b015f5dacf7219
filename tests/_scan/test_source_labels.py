"""What a read carries, by what it reads (caplet._scan._source_labels)."""

from __future__ import annotations

import pytest

from caplet._scan._source_labels import downloads, env_read, file_labels, public_ip
from caplet._scan._sources import Source


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
