"""Real HTTP(S) servers on 127.0.0.1 for the broker tests, with a test CA made at run time.

The plain helpers (:func:`make_pki`, :func:`serve`, :data:`NAMES`,
:data:`TEST_POLICY`) are also used by the host's ``ctx.http`` tests
(tests/_host/test_context_http.py), which build their own fixtures from them.

Every test reaches the servers through host names under ``.test`` (RFC 6761:
never resolvable on the internet) mapped to 127.0.0.1 by a counting
resolver, with a policy that allows exactly that loopback network. The
leaf certificate covers ``example.test``, ``*.example.test`` and the IP
127.0.0.1, so ``api.wrong.test`` makes a TLS hostname mismatch.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from caplet._broker._addresses import IPAddress
from caplet._broker._http import HttpBroker
from caplet._broker._model import BrokerDecision
from caplet._broker._policy import NetworkPolicy
from caplet._broker._static_resolver import StaticResolver
from caplet._capabilities._model import NetHttpCapability
from caplet._capabilities._parse import parse_capability

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
#: The policy of most tests: the default one plus the loopback network.
TEST_POLICY = NetworkPolicy(allowed_networks=(LOOPBACK,))

#: Names the test resolver answers, and with what.
NAMES: dict[str, tuple[str, ...]] = {
    "api.example.test": ("127.0.0.1",),
    "other.example.test": ("127.0.0.1",),
    "a.example.test": ("127.0.0.1",),
    "example.test": ("127.0.0.1",),
    "xn--bcher-kva.example.test": ("127.0.0.1",),
    "api.wrong.test": ("127.0.0.1",),
    "mixed.example.test": ("127.0.0.1", "10.0.0.1"),
    "meta.example.test": ("169.254.169.254",),
    "empty.example.test": (),
    "fallback.example.test": ("127.0.0.2", "127.0.0.1"),
}


# -- certificates -----------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    """A test CA and a server certificate signed by it."""

    ca_pem: str
    cert_file: Path
    key_file: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def make_pki(directory: Path) -> Pki:
    """A fresh test CA and server certificate, written into ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("caplet test CA"))
        .issuer_name(_name("caplet test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("example.test"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("example.test"),
                    x509.DNSName("*.example.test"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_file = directory / "server.pem"
    key_file = directory / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    return Pki(ca_pem, cert_file, key_file)


# -- the server -----------------------------------------------------------------------------


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ServerState:
    """What the handler shares with the test: received requests and the release switch."""

    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests assert on what the server saw instead."""

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.do_handshake()
            except (ssl.SSLError, OSError):
                return  # the client refused our certificate: expected in TLS tests
        try:
            super().handle()
        except OSError:
            return  # the client went away (a timeout or size-limit test)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        state = self.server.state
        with state.lock:
            state.seen.append(Seen(self.command, self.path, dict(self.headers.items()), body))
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        segments = path.strip("/").split("/")
        if segments[0] == "redirect":
            self._redirect(int(segments[1]), query["to"][0])
        elif segments[0] == "chain":
            left = int(segments[1])
            if left:
                self._redirect(302, f"/chain/{left - 1}")
            else:
                self._send(200, b"done")
        elif path == "/loop":
            self._redirect(302, "/loop")
        elif path == "/ping":
            self._redirect(302, "/pong")
        elif path == "/pong":
            self._redirect(302, "/ping")
        elif segments[0] == "bytes":
            self._send(200, b"x" * int(segments[1]))
        elif segments[0] == "stream":
            self._stream(int(segments[1]))
        elif path == "/slow":
            state.release.wait(30)
            self._send(200, b"late")
        elif path == "/slowbody":
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.wfile.write(b"12345")
            self.wfile.flush()
            state.release.wait(30)
            self.wfile.write(b"67890")
        elif path == "/json":
            self._send(200, b'{"ok": true, "n": [1, 2]}', "application/json")
        elif path == "/latin1":
            self._send(200, "café".encode("latin-1"), "text/plain; charset=ISO-8859-1")
        else:
            self._echo(body)

    def _echo(self, body: bytes) -> None:
        document = {
            "method": self.command,
            "path": self.path,
            "headers": [[name, value] for name, value in self.headers.items()],
            "body": body.decode("latin-1"),
        }
        self._send(200, json.dumps(document).encode(), "application/json")

    def _redirect(self, status: int, location: str) -> None:
        self.send_response(status)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _stream(self, size: int) -> None:
        """A chunked body of ``size`` bytes that declares no length."""
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        left = size
        while left > 0:
            piece = min(left, 1000)
            self.wfile.write(f"{piece:x}\r\n".encode() + b"y" * piece + b"\r\n")
            left -= piece
        self.wfile.write(b"0\r\n\r\n")


class _Server(ThreadingHTTPServer):
    # Handler threads are joined by server_close(), so no thread outlives a test.
    daemon_threads = False

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.state = ServerState()
        self.context = context
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        if self.context is None:
            return sock, address
        # The handshake runs in the handler thread, so a client that hangs
        # or refuses our certificate never blocks the accept loop.
        return self.context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        ), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that disconnect early are part of the tests; stay quiet."""


@dataclass
class RunningServer:
    server: _Server
    port: int

    @property
    def seen(self) -> list[Seen]:
        return self.server.state.seen

    def release(self) -> None:
        self.server.state.release.set()


def serve(context: ssl.SSLContext | None) -> Iterator[RunningServer]:
    """Run a test server (TLS with ``context``) until the generator is closed."""
    server = _Server(context)
    # A short poll interval: shutdown() waits for the next poll (0.5 s by default).
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield RunningServer(server, server.server_address[1])
    finally:
        server.state.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def https_server(pki: Pki) -> Iterator[RunningServer]:
    yield from serve(pki.server_context())


@pytest.fixture
def http_server() -> Iterator[RunningServer]:
    yield from serve(None)


# -- resolver, clock, broker ---------------------------------------------------------------


class CountingResolver(StaticResolver):
    """The static test table, counting lookups (to prove there is no second one)."""

    def __init__(self, table: Mapping[str, tuple[str, ...]]) -> None:
        super().__init__(table)
        self.lookups: list[str] = []

    def resolve(self, host: str, port: int, *, timeout_s: float) -> tuple[IPAddress, ...]:
        self.lookups.append(host)
        return super().resolve(host, port, timeout_s=timeout_s)


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    """A broker wired to the test resolver, CA, clock and a decision list."""

    pki: Pki
    resolver: CountingResolver = field(default_factory=lambda: CountingResolver(NAMES))
    clock: FakeClock = field(default_factory=FakeClock)
    decisions: list[BrokerDecision] = field(default_factory=list)

    def broker(self, policy: NetworkPolicy = TEST_POLICY) -> HttpBroker:
        return HttpBroker(
            policy,
            resolver=self.resolver,
            ssl_context=self.pki.client_context(),
            clock=self.clock,
            wall_clock=lambda: 1_700_000_000.0,
            on_decision=self.decisions.append,
        )


@pytest.fixture
def harness(pki: Pki) -> Harness:
    return Harness(pki)


def grant(text: str) -> NetHttpCapability:
    capability = parse_capability(text)
    assert isinstance(capability, NetHttpCapability)
    return capability
