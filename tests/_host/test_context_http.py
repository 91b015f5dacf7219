"""``ctx.http`` in the real sandbox, against a real HTTPS server on 127.0.0.1 (issue 6).

The plugin's worker has no network at all; its fetches go to the host's one
HttpBroker, reached here through an injected resolver (``*.example.test``
names mapped to 127.0.0.1) and the test CA, under a policy that allows the
loopback network -- or the default policy, which refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import NetworkPolicy, PluginCallError, PluginHost, Policy
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._broker.conftest import (
    NAMES,
    TEST_POLICY,
    CountingResolver,
    Pki,
    RunningServer,
    make_pki,
    serve,
)
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki) -> Iterator[RunningServer]:
    yield from serve(pki.server_context())


FETCHER = """
from caplet.plugin import BrokerError

def create_functions(config):
    def get(ctx, url):
        response = ctx.http.get(url, headers={"X-Test": "yes"})
        return {
            "status": response.status,
            "ok": response.ok,
            "json": response.json(),
            "type": response.header("content-type"),
            "url": response.url,
        }

    def post(ctx, url, document):
        return ctx.http.post(url, json=document).json()

    def put(ctx, url, body):
        response = ctx.http.fetch(url, method="PUT", body=body, headers=[("X-A", "1")], timeout=5)
        return response.json()

    def size(ctx, url):
        return len(ctx.http.get(url).body)

    def safe(ctx, url):
        try:
            ctx.http.get(url)
        except BrokerError as exc:
            return [type(exc).__name__, exc.category, str(exc)]
        return None

    def unsafe(ctx, url):
        return ctx.http.get(url).status

    return {"main": {"get": get, "post": post, "put": put, "size": size, "safe": safe,
                     "unsafe": unsafe}}
"""
FUNCTIONS = ("get", "post", "put", "size", "safe", "unsafe")


def _host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    network: NetworkPolicy = TEST_POLICY,
) -> PluginHost:
    return make_host(
        plugins_dir,
        state_dir,
        launcher,
        policy=Policy(network=network),
        resolver=CountingResolver(NAMES),
        ssl_context=pki.client_context(),
    )


def _fetcher(make_plugin: PluginFactory, server: RunningServer, limits: str = "") -> str:
    plugin(
        make_plugin,
        "fetcher",
        FETCHER,
        functions=FUNCTIONS,
        capabilities=(f"net.http:https://api.example.test:{server.port}",),
        limits=limits,
    )
    return f"https://api.example.test:{server.port}"


def test_fetch_through_the_broker_and_the_decision_log(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    server: RunningServer,
    make_plugin: PluginFactory,
) -> None:
    origin = _fetcher(make_plugin, server)
    with _host(plugins_dir, state_dir, launcher, pki) as host:
        enable(host, "fetcher")
        assert host.call("fetcher", "main.get", f"{origin}/json") == {
            "status": 200,
            "ok": True,
            "json": {"ok": True, "n": [1, 2]},
            "type": "application/json",
            "url": f"{origin}/json",
        }
        echoed = host.call("fetcher", "main.post", f"{origin}/echo", {"to": "ann"})
        assert (echoed["method"], echoed["path"], echoed["body"]) == (
            "POST",
            "/echo",
            '{"to": "ann"}',
        )
        assert ["Content-Type", "application/json"] in echoed["headers"]
        put = host.call("fetcher", "main.put", f"{origin}/put", b"\x00raw")
        assert (put["method"], put["body"]) == ("PUT", "\x00raw")
        assert ["X-A", "1"] in put["headers"]
        # Not granted: another host of the same test network.
        refused = host.call("fetcher", "main.safe", f"https://other.example.test:{server.port}/")
        assert refused[:2] == ["BlockedByPolicyError", "blocked by policy"]
        assert refused[2].startswith("blocked by policy: plugin 'fetcher'")
        decisions = host.manager.store.decisions("fetcher")
        http = [(d.target, d.allowed, d.detail) for d in decisions if d.action == "http"]
    capability = f"capability net.http:https://api.example.test:{server.port}"
    assert (f"GET {origin}/json", True, f"status 200; {capability}") in http
    assert (f"POST {origin}/echo", True, f"status 200; {capability}") in http
    refusal = [entry for entry in http if not entry[1]]
    assert len(refusal) == 1
    assert refusal[0][0] == f"GET https://other.example.test:{server.port}/"
    assert refusal[0][2].startswith("blocked by policy; blocked by policy: plugin 'fetcher'")
    assert [s.path for s in server.seen if s.path in ("/json", "/echo")] == ["/json", "/echo"]


def test_the_default_policy_refuses_loopback_without_naming_the_address(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    server: RunningServer,
    make_plugin: PluginFactory,
) -> None:
    origin = _fetcher(make_plugin, server)
    seen = len(server.seen)
    with _host(plugins_dir, state_dir, launcher, pki, network=NetworkPolicy()) as host:
        enable(host, "fetcher")
        error, category, message = host.call("fetcher", "main.safe", f"{origin}/json")
        assert (error, category) == ("BlockedByPolicyError", "blocked by policy")
        assert "loopback" in message
        assert "127.0.0.1" not in message, "a plugin must not learn resolved addresses"
        # Uncaught, the category is what the call's outcome reports.
        with pytest.raises(PluginCallError) as info:
            host.call("fetcher", "main.unsafe", f"{origin}/json")
        assert info.value.exc_type == "BlockedByPolicyError"
        assert "main.unsafe raised BlockedByPolicyError: blocked by policy:" in str(info.value)
        logged = [d for d in host.manager.store.decisions("fetcher") if d.action == "http"]
    assert logged
    assert all(not d.allowed and "127.0.0.1" not in d.detail for d in logged)
    assert len(server.seen) == seen, "nothing was sent"


def test_a_body_larger_than_the_channel_reaches_the_plugin_in_pieces(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    server: RunningServer,
    make_plugin: PluginFactory,
) -> None:
    """Issue 15: the broker allowed 10 MiB and the channel 1 MiB, so a 3 MiB body was
    downloaded whole, then refused (ContextLimitError, counted by the breaker). A body
    within the broker's limit now crosses in pieces, whatever the channel's size."""
    origin = _fetcher(make_plugin, server, limits="max_output_kb = 1")
    with _host(plugins_dir, state_dir, launcher, pki) as host:
        enable(host, "fetcher")
        assert host.call("fetcher", "main.size", f"{origin}/bytes/100") == 100
        assert host.call("fetcher", "main.size", f"{origin}/bytes/5000") == 5000
        pieces = [d for d in host.manager.store.decisions("fetcher") if d.action == "http"]
        assert all(d.allowed for d in pieces)
        assert host.breaker("fetcher").failures == 0


def test_a_body_of_megabytes_crosses_the_default_channel(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    server: RunningServer,
    make_plugin: PluginFactory,
) -> None:
    """3 MiB through a 1 MiB channel (the default policy's max_output_kb)."""
    origin = _fetcher(make_plugin, server)
    with _host(plugins_dir, state_dir, launcher, pki) as host:
        enable(host, "fetcher")
        size = 3 * 1024 * 1024
        assert host.call("fetcher", "main.size", f"{origin}/bytes/{size}") == size


def test_a_size_refusal_never_counts_toward_the_breaker(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    server: RunningServer,
    make_plugin: PluginFactory,
) -> None:
    """Over the broker's limit is a refusal, uncaught or not (issue 15)."""
    origin = _fetcher(make_plugin, server)
    small = NetworkPolicy(allowed_networks=TEST_POLICY.allowed_networks, max_response_bytes=1000)
    with _host(plugins_dir, state_dir, launcher, pki, network=small) as host:
        enable(host, "fetcher")
        for _ in range(5):  # more than the breaker's threshold of 3
            with pytest.raises(PluginCallError) as info:
                host.call("fetcher", "main.size", f"{origin}/bytes/5000")
            assert info.value.exc_type == "SizeLimitError"
        assert host.breaker("fetcher").failures == 0
        assert host.call("fetcher", "main.size", f"{origin}/bytes/10") == 10


HOARDER = """
from caplet._sandbox._protocol import ContextOp


def create_functions(config):
    def fetch_unread(ctx, url):
        # The wire request itself, as a hostile plugin can make it: the answer's first
        # piece and a handle for the rest, which it never asks for.
        answer = ctx.http._transport.request(
            ContextOp.HTTP_FETCH,
            {"url": url, "method": "GET", "headers": [], "body": b"", "timeout": None},
        )
        return {"handle": answer["handle"], "rest": answer["rest"]}

    def read_later(ctx, handle):
        piece = ctx.http._transport.request(ContextOp.HTTP_BODY, {"handle": handle, "offset": 1})
        return len(piece)

    return {"main": {"fetch_unread": fetch_unread, "read_later": read_later}}
"""


def test_a_body_left_unread_is_forgotten_when_its_call_ends(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    server: RunningServer,
    make_plugin: PluginFactory,
) -> None:
    """A body is sent within the call that fetched it. Before, the host kept the four
    newest bodies a plugin never read (up to max_response_bytes each, across calls, per
    plugin): memory a plugin could hold in the host, readable by its next call."""
    plugin(
        make_plugin,
        "hoarder",
        HOARDER,
        functions=("fetch_unread", "read_later"),
        capabilities=(f"net.http:https://api.example.test:{server.port}",),
        limits="max_output_kb = 1",
    )
    origin = f"https://api.example.test:{server.port}"
    with _host(plugins_dir, state_dir, launcher, pki) as host:
        enable(host, "hoarder")
        held = host.call("hoarder", "main.fetch_unread", f"{origin}/bytes/5000")
        assert held["rest"] > 0, "the body did not fit one reply: it was kept for pieces"
        with pytest.raises(PluginCallError) as refused:
            host.call("hoarder", "main.read_later", held["handle"])
        assert (
            f"ctx.http body piece {held['handle']} at 1 is not one the host is sending (a "
            "body is sent once, in order, within the call that fetched it)"
        ) in str(refused.value)
