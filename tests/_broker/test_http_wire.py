"""The wire half of the broker: what a response's head costs the plugin's data budget.

Red team round 19: only a response's *body* was charged to the plugin's
data budget (``NetworkPolicy.bytes_per_hour``) and reported in its
decisions (``received_bytes``, which the host's ``broker_bytes`` budget
spends). A server on a plugin's allowed host answered with ~90 KB of
headers (httpcore reads up to 100 KiB of them) and a two-byte body, and the
plugin fetched it again and again: megabytes crossed the wire while the
budget saw a few bytes. Each case is a real TCP server on 127.0.0.1
(tests/_broker/rawkit.py).
"""

from __future__ import annotations

import datetime
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from caplet._broker._model import HttpRequest
from caplet._broker._policy import NetworkPolicy
from caplet._errors import RateLimitError
from tests._broker.conftest import TEST_POLICY, Harness, Pki, grant
from tests._broker.rawkit import RawServer, raw_server

PLUGIN = "fetcher"
#: 90 headers of 1000 bytes: under httpcore's 100 KiB head, far over the budget below.
_FAT_HEAD = b"".join(b"X-Pad-%02d: %s\r\n" % (i, b"p" * 988) for i in range(90))


@pytest.fixture
def raw() -> Iterator[RawServer]:
    with raw_server() as server:
        yield server


def _url(server: RawServer) -> str:
    return f"http://api.example.test:{server.port}"


def _policy(budget: int) -> NetworkPolicy:
    return NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, bytes_per_hour=budget)


def test_huge_response_headers_are_charged_to_the_data_budget(
    harness: Harness, raw: RawServer
) -> None:
    raw.answer(b"HTTP/1.1 200 OK\r\n" + _FAT_HEAD + b"Content-Length: 2\r\n\r\nok")
    broker = harness.broker(_policy(10_000))
    grants = [grant(f"net.http:{_url(raw)}")]
    with pytest.raises(RateLimitError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_url(raw)}/a"))
    assert str(exc.value).startswith(
        f"data budget exhausted: plugin 'fetcher', GET {_url(raw)}/a: the response exceeds the "
    )
    assert "bytes left of the plugin's data budget (10000 per hour)" in str(exc.value)
    (decision,) = harness.decisions
    assert decision.outcome == "data budget exhausted"
    # What crossed the wire is reported (and so spent by the host's broker_bytes budget);
    # the head is read no further than one read past the budget.
    assert 10_000 < decision.received_bytes < len(_FAT_HEAD)
    # The budget is spent: the next request is refused before it is sent.
    with pytest.raises(RateLimitError) as again:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_url(raw)}/b"))
    assert again.value.category == "data budget exhausted"
    assert [head.split(b" ")[1] for head in raw.heads] == [b"/a"]


def test_a_redirects_headers_are_charged_too(harness: Harness, raw: RawServer) -> None:
    # A redirect's body is never read, but its head is: every hop of a chain pays for it.
    raw.answer(
        b"HTTP/1.1 302 Found\r\n" + _FAT_HEAD + b"Location: /next\r\nContent-Length: 0\r\n\r\n"
    )
    broker = harness.broker(_policy(150_000))
    grants = [grant(f"net.http:{_url(raw)}")]
    with pytest.raises(RateLimitError) as exc:
        broker.fetch(PLUGIN, grants, HttpRequest(f"{_url(raw)}/a"))
    assert exc.value.category == "data budget exhausted"
    # The first hop's head fits in 150 000 bytes, the second's does not.
    assert [head.split(b" ")[1] for head in raw.heads] == [b"/a", b"/next"]
    first, second = harness.decisions
    assert first.received_bytes > len(_FAT_HEAD)
    assert first.outcome == "status 302"
    assert second.outcome == "data budget exhausted"


def test_the_request_head_is_charged_as_sent(harness: Harness, raw: RawServer) -> None:
    raw.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    broker = harness.broker()
    grants = [grant(f"net.http:{_url(raw)}")]
    fat = (("X-Big", "q" * 5000),)
    broker.fetch(PLUGIN, grants, HttpRequest(f"{_url(raw)}/a", headers=fat))
    (decision,) = harness.decisions
    assert decision.sent_bytes > 5000


def test_ordinary_heads_fit_a_small_budget(harness: Harness, raw: RawServer) -> None:
    # Near miss: a plain answer with a few headers costs its head plus its body, and
    # a budget of a few kilobytes serves several of them.
    raw.answer(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\ndone")
    broker = harness.broker(_policy(2_000))
    grants = [grant(f"net.http:{_url(raw)}")]
    for _ in range(3):
        assert broker.fetch(PLUGIN, grants, HttpRequest(f"{_url(raw)}/a")).body == b"done"
    received = [d.received_bytes for d in harness.decisions]
    head = len(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\n")
    assert received == [head + 4] * 3


def test_interim_answers_are_charged_and_stopped_at_the_budget(
    harness: Harness, raw: RawServer
) -> None:
    # httpcore reads any number of 1xx answers before the final one and drops them:
    # 200 of ~90 KB each (18 MB) went through a 10 000-byte budget, uncounted.
    hint = b"HTTP/1.1 103 Early Hints\r\n" + _FAT_HEAD + b"\r\n"
    raw.answer(hint * 200 + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    broker = harness.broker(_policy(10_000))
    with pytest.raises(RateLimitError) as exc:
        broker.fetch(PLUGIN, [grant(f"net.http:{_url(raw)}")], HttpRequest(f"{_url(raw)}/a"))
    assert exc.value.category == "data budget exhausted"
    (decision,) = harness.decisions
    # Stopped at the budget: no more than one read past it, far from the 18 MB sent.
    assert 10_000 < decision.received_bytes < 10_000 + 128 * 1024


# -- the TLS layer (attack22) ----------------------------------------------------------------


def _padded_chain(pki: Pki, directory: Path, padding: int) -> ssl.SSLContext:
    """A server context whose certificate message carries ``padding`` bytes nobody needs.

    A chain certificate the client never uses (a self-signed one with a large
    unknown extension) is sent in the handshake all the same: the server decides
    how many bytes the handshake is, up to OpenSSL's certificate-list limit.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "padding")])
    now = datetime.datetime.now(datetime.UTC)
    filler = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.UnrecognizedExtension(
                x509.ObjectIdentifier("1.3.6.1.4.1.55555.1"), b"p" * padding
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    chain = directory / "padded.pem"
    chain.write_bytes(pki.cert_file.read_bytes() + filler.public_bytes(serialization.Encoding.PEM))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain, pki.key_file)
    return context


def _tls_url(server: RawServer) -> str:
    return f"https://api.example.test:{server.port}"


def test_the_tls_handshake_is_charged_to_the_data_budget(
    harness: Harness, pki: Pki, tmp_path: Path
) -> None:
    # The meter counted the plaintext only: the handshake (read by the ssl module
    # before the TLS stream exists) and every record's framing and padding were
    # free. A server on an allowed host sent 60 KB of certificates for a two-byte
    # answer, again and again, through a budget of 10 000 bytes.
    with raw_server(_padded_chain(pki, tmp_path, 60_000)) as server:
        server.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        broker = harness.broker(_policy(10_000))
        grants = [grant(f"net.http:{_tls_url(server)}")]
        with pytest.raises(RateLimitError) as exc:
            broker.fetch(PLUGIN, grants, HttpRequest(f"{_tls_url(server)}/a"))
        assert exc.value.category == "data budget exhausted"
        assert "bytes left of the plugin's data budget (10000 per hour)" in str(exc.value)
        (decision,) = harness.decisions
        assert decision.received_bytes > 60_000
        # Spent: the next request is refused before it connects.
        with pytest.raises(RateLimitError):
            broker.fetch(PLUGIN, grants, HttpRequest(f"{_tls_url(server)}/b"))
        assert len(server.heads) == 1


def test_an_ordinary_tls_exchange_is_charged_what_crossed_the_wire(
    harness: Harness, pki: Pki
) -> None:
    # Near miss: an ordinary handshake and answer fit a small budget, and what is
    # charged is the bytes on the wire: the plaintext and the TLS around it.
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone"
    with raw_server(pki.server_context()) as server:
        server.answer(answer)
        broker = harness.broker(_policy(20_000))
        grants = [grant(f"net.http:{_tls_url(server)}")]
        for _ in range(3):
            assert (
                broker.fetch(PLUGIN, grants, HttpRequest(f"{_tls_url(server)}/a")).body == b"done"
            )
    received = [d.received_bytes for d in harness.decisions]
    assert all(len(answer) < n < 5_000 for n in received), received
