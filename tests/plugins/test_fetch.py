"""plugins/fetch in the real sandbox, against a real HTTPS server on 127.0.0.1.

The plugin reaches the test server (tests/_broker/conftest.py) only through
the host's broker, with the test resolver (``*.example.test`` names mapped to
127.0.0.1), the test CA and a policy allowing the loopback network -- or the
default policy, which refuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from caplet import BudgetExceededError, BudgetPolicy, CircuitOpenError, NetworkPolicy, Policy
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
from tests.plugins.conftest import Caller, install, reference_host

Fetch = Callable[..., Caller]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki) -> Iterator[RunningServer]:
    yield from serve(pki.server_context())


@pytest.fixture
def origin(server: RunningServer) -> str:
    return f"https://api.example.test:{server.port}"


@pytest.fixture
def fetch(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    origin: str,
) -> Iterator[Fetch]:
    """Enable fetch for ``origin`` with extra settings (and a network policy); its caller."""
    install(plugins_dir, "fetch")
    with ExitStack() as stack:

        def start(
            *settings: str,
            network: NetworkPolicy = TEST_POLICY,
            budget: BudgetPolicy | None = None,
        ) -> Caller:
            host = stack.enter_context(
                reference_host(
                    plugins_dir,
                    state_dir,
                    launcher,
                    Policy(network=network, budget=budget or BudgetPolicy()),
                    resolver=CountingResolver(NAMES),
                    ssl_context=pki.client_context(),
                )
            )
            host.discover()
            configured = [f"origin={origin}", "allow_post=false", *settings]
            outcome = host.enable("fetch", configured, consent=True)
            assert outcome, outcome.reason
            return Caller(host, "fetch", "fetch", hidden=("127.0.0.1",))

        yield start


def test_the_configured_origin_is_the_capability(fetch: Fetch, origin: str) -> None:
    caller = fetch()
    info = caller.host.manager.require_plugin("fetch")
    assert [str(c) for c in info.capabilities] == [f"net.http:{origin}"]


def test_fetch_json_and_fetch_text(fetch: Fetch, origin: str, server: RunningServer) -> None:
    caller = fetch()
    assert caller("fetch_json", f"{origin}/json") == {"ok": True, "n": [1, 2]}
    assert caller("fetch_text", f"{origin}/latin1") == "café", "the charset is honoured"
    echoed = caller("fetch_json", f"{origin}/echo", {"X-Test": "yes"})
    assert (echoed["method"], echoed["path"]) == ("GET", "/echo")
    assert ["X-Test", "yes"] in echoed["headers"]
    assert caller.message("fetch_json", f"{origin}/latin1", refusal=False).startswith(
        f"ResponseError: invalid response: the body from {origin}/latin1 is not valid JSON"
    ), "a body that is not the JSON asked for is the server failing: it counts"
    assert caller.message("fetch_text", f"{origin}/redirect/404?to=/x&key=s3cret") == (
        f"HttpStatusRefused: http error: fetch_text got status 404 from {origin}/redirect/404?..."
    ), "the query (often an API key) is not repeated"


def test_get_then_read_the_body_in_pieces(fetch: Fetch, origin: str) -> None:
    caller = fetch("read_kb=1")
    url = f"{origin}/bytes/2500"
    assert caller("get", url) == {
        "status": 200,
        "ok": True,
        "url": url,
        "content_type": "text/plain",
        "total_bytes": 2500,
    }
    pieces = []
    while True:
        piece = caller("read", url)
        pieces.append(piece["data"])
        if piece["done"]:
            break
    assert [len(p) for p in pieces] == [1024, 1024, 452]
    assert "".join(pieces) == "x" * 2500
    assert caller.message("read", url).startswith(
        f"NothingToReadRefused: nothing to read: no fetched body for {url} (get or post it first;"
    ), "a body is dropped once read to the end"


def test_post_is_off_unless_allowed(fetch: Fetch, origin: str, server: RunningServer) -> None:
    seen = len(server.seen)
    refused = fetch().message("post", f"{origin}/submit", {"a": 1})
    assert refused == (
        f"BlockedByPolicyRefused: blocked by policy: POST {origin}/submit: this plugin is "
        "configured without POST; enable it with allow_post=true"
    )
    assert len(server.seen) == seen, "nothing was sent"
    caller = fetch("allow_post=true")
    summary = caller("post", f"{origin}/submit", {"a": 1})
    assert (summary["status"], summary["content_type"]) == (200, "application/json")
    echoed = caller("read", f"{origin}/submit")["data"]
    assert '"method": "POST"' in echoed
    assert '"body": "{\\"a\\": 1}"' in echoed
    assert '["Content-Type", "application/json"]' in echoed
    caller("post", f"{origin}/text", "plain body", {"Content-Type": "text/plain"})
    last = server.seen[-1]
    assert (last.method, last.body, last.headers["Content-Type"]) == (
        "POST",
        b"plain body",
        "text/plain",
    )


def test_size_limits(fetch: Fetch, origin: str, server: RunningServer) -> None:
    caller = fetch("max_response_kb=1", "max_request_kb=1", "allow_post=true")
    assert caller("fetch_text", f"{origin}/bytes/1024") == "x" * 1024
    assert caller.message("fetch_text", f"{origin}/bytes/1025") == (
        f"SizeLimitRefused: response too large: GET {origin}/bytes/1025 answered 1025 bytes, "
        "above the 1 KiB this plugin accepts (max_response_kb)"
    )
    assert caller.message("get", f"{origin}/bytes/4000").startswith(
        "SizeLimitRefused: response too large: GET"
    )
    seen = len(server.seen)
    assert caller.message("post", f"{origin}/submit", "y" * 1025) == (
        f"SizeLimitRefused: request too large: POST {origin}/submit: 1025 bytes, above the 1 KiB "
        "this plugin sends (max_request_kb)"
    )
    assert len(server.seen) == seen, "nothing was sent"


def test_broker_errors_reach_the_caller_with_their_category(
    fetch: Fetch, origin: str, server: RunningServer
) -> None:
    caller = fetch()
    seen = len(server.seen)
    other = f"https://other.example.test:{server.port}/json"
    assert caller.message("fetch_json", other).startswith(
        "BlockedByPolicyRefused: blocked by policy: plugin 'fetch'"
    ), "a host outside the allowlist"
    assert caller.message("get", f"http://api.example.test:{server.port}/json").startswith(
        "BlockedByPolicyRefused: blocked by policy:"
    ), "http is another origin"
    assert len(server.seen) == seen, "nothing was sent"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("empty.example.test", "DnsError: DNS resolution failed:"),
        ("api.wrong.test", "TlsError: TLS error:"),
    ],
)
def test_network_failures_pass_through_and_count(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    pki: Pki,
    server: RunningServer,
    name: str,
    expected: str,
) -> None:
    install(plugins_dir, "fetch")
    origin = f"https://{name}:{server.port}"
    with reference_host(
        plugins_dir,
        state_dir,
        launcher,
        Policy(network=TEST_POLICY),
        resolver=CountingResolver(NAMES),
        ssl_context=pki.client_context(),
    ) as host:
        host.discover()
        assert host.enable("fetch", [f"origin={origin}", "allow_post=false"], consent=True)
        caller = Caller(host, "fetch", "fetch", hidden=("127.0.0.1",))
        assert caller.message("fetch_text", f"{origin}/x", refusal=False).startswith(expected), (
            "a failing network is what the breaker is for: it counts"
        )


def test_refusals_in_a_row_leave_the_breaker_closed_and_server_failures_count(
    fetch: Fetch, origin: str, server: RunningServer
) -> None:
    caller = fetch("max_response_kb=1")
    other = f"https://other.example.test:{server.port}/json"
    refusals = [
        ("BlockedByPolicyRefused", "fetch_json", (other,)),
        ("BlockedByPolicyRefused", "get", (f"http://api.example.test:{server.port}/json",)),
        ("BlockedByPolicyRefused", "post", (f"{origin}/submit", {"a": 1})),
        ("InvalidUrlRefused", "get", (f"https://user:pw@api.example.test:{server.port}/",)),
        ("HttpStatusRefused", "fetch_text", (f"{origin}/redirect/404?to=/x",)),
        ("HttpStatusRefused", "fetch_json", (f"{origin}/redirect/403?to=/x",)),
        ("SizeLimitRefused", "fetch_text", (f"{origin}/bytes/2000",)),
        ("NothingToReadRefused", "read", (f"{origin}/never-fetched",)),
    ]
    assert len(refusals) > Policy().failure_threshold
    for _ in range(2):
        for exc_type, function, args in refusals:
            assert caller.refused(function, *args).exc_type == exc_type, (function, args)
    breaker = caller.host.breaker("fetch")
    assert (breaker.failures, breaker.closed) == (0, True)
    assert caller("fetch_json", f"{origin}/json") == {"ok": True, "n": [1, 2]}
    # 5xx, 429 (too many requests) and 408 (request timeout): the server failing or asking
    # for less, which the breaker exists to stop hammering. Three in a row open it.
    for status in (503, 429, 408):
        assert caller.message("fetch_text", f"{origin}/redirect/{status}?to=/x", refusal=False) == (
            f"ResponseError: http error: fetch_text got status {status} from "
            f"{origin}/redirect/{status}?..."
        )
    assert not breaker.closed
    with pytest.raises(CircuitOpenError):
        caller("fetch_json", f"{origin}/json")


def test_the_policys_rate_limit_is_a_refusal(fetch: Fetch, origin: str) -> None:
    caller = fetch(network=replace(TEST_POLICY, requests_per_hour=1))
    assert caller("fetch_json", f"{origin}/json") == {"ok": True, "n": [1, 2]}
    for _ in range(4):
        assert caller.message("fetch_json", f"{origin}/json").startswith(
            "RateLimitRefused: rate limited: plugin 'fetch' made 1 requests in the last hour"
        ), "the broker already holds the requests back: counting them too would quarantine"


def test_the_default_policy_refuses_loopback(
    fetch: Fetch, origin: str, server: RunningServer
) -> None:
    seen = len(server.seen)
    caller = fetch(network=NetworkPolicy())
    message = caller.message("fetch_json", f"{origin}/json")
    assert message.startswith("BlockedByPolicyRefused: blocked by policy:")
    assert "loopback" in message
    assert len(server.seen) == seen, "nothing was sent"


def test_a_response_up_to_its_documented_8192_kib_reaches_the_plugin(
    fetch: Fetch, origin: str
) -> None:
    """Issue 15: max_response_kb up to 8192 is documented, but a body over the 1 MiB
    channel was refused after the download (and counted by the breaker)."""
    caller = fetch("max_response_kb=8192", "read_kb=512")
    size = 3 * 1024 * 1024
    url = f"{origin}/bytes/{size}"
    assert caller("get", url)["total_bytes"] == size
    received = 0
    while True:
        piece = caller("read", url)
        received += len(piece["data"])
        if piece["done"]:
            break
    assert received == size
    assert caller.host.breaker("fetch").failures == 0


# -- metrics and budgets of real brokered requests (issue 17, points 2 and 3) -------------------


def test_brokered_requests_and_bytes_are_counted_by_decision(
    fetch: Fetch, origin: str, server: RunningServer
) -> None:
    caller = fetch()
    assert caller("fetch_json", f"{origin}/json") == {"ok": True, "n": [1, 2]}
    caller.refused("fetch_json", "https://elsewhere.example.test/json")
    [stats] = [s for s in caller.host.observer.stats() if s.plugin == "fetch"]
    assert stats.broker_requests == {"allowed": 1, "denied": 1}
    received = len(b'{"ok": true, "n": [1, 2]}')
    assert stats.broker_bytes["allowed"] >= received, "the answer's body at least"
    assert stats.broker_bytes["denied"] == 0, "a refused request sends and receives nothing"


def test_a_spent_request_budget_refuses_the_next_call_and_says_when_it_reopens(
    fetch: Fetch, origin: str, server: RunningServer
) -> None:
    caller = fetch(budget=BudgetPolicy(broker_requests=1, window_s=600.0))
    assert caller("fetch_json", f"{origin}/json") == {"ok": True, "n": [1, 2]}
    before = len(server.seen)
    with pytest.raises(BudgetExceededError) as refused:
        caller("fetch_json", f"{origin}/json")
    assert refused.value.budget == "broker_requests"
    message = str(refused.value)
    assert message.startswith(
        "plugin 'fetch': its broker_requests budget is spent: 1 requests used of 1 requests "
        "in the current 600 s window; calls are refused until the window reopens in "
    ), message
    assert message.endswith(
        "raise budget.broker_requests (or budget.plugins.fetch."
        "broker_requests) in the policy, or wait"
    ), message
    assert len(server.seen) == before, "the refused call never reached the server"
