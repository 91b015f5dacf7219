"""Hosts sharing one store (issue 18): approvals, quarantine, the log and ctx.kv are one truth.

Each "node" is a host with a state directory of its own (its run directory,
snapshots and workers stay there) and the same store: PostgreSQL, as a
fleet runs it, and SQLite named by path, as several processes of one
machine share it. Real processes where the issue asks for processes, a
real PostgreSQL server (tests/pgserver.py), real workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from caplet import CircuitOpenError, LifecycleError, PluginCallError, PluginHost, Policy
from caplet._errors import StoreError
from caplet._host._log_limits import LogLimits
from caplet._host._records import PluginState
from caplet._trust._postgres import PostgresStore
from tests.conftest import PluginFactory, write_policy
from tests.crashkit import caplet
from tests.pgserver import PgServer, running_server

KV_SOURCE = """
def create_functions(config):
    def put(ctx, key, value):
        ctx.kv.set(key, value)
        return True

    def get(ctx, key):
        return ctx.kv.get(key)

    def run():
        return "ran"

    return {"main": {"put": put, "get": get, "run": run}}
"""
KV_MODULES = '[modules.main]\nfunctions = ["put", "get", "run"]\n'


class Clock:
    """The host clock a test moves by hand (breakers and the state refresh read it)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["postgres", "sqlite"])
def store_address(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One store two nodes share: a PostgreSQL database, or an SQLite state directory."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        return url
    return str(tmp_path / "shared-state")


def node(root: Path, name: str = "p") -> Path:
    """A node's own plugins directory holding the same plugin (the same content hash)."""
    PluginFactory(root / "plugins")(name, source=KV_SOURCE, modules=KV_MODULES)
    return root / "plugins"


def test_a_quarantine_elsewhere_stops_calls_here_within_the_refresh_bound(
    tmp_path: Path, store_address: str
) -> None:
    clock = Clock()
    with (
        PluginHost(
            node(tmp_path / "a"), state_dir=tmp_path / "a" / "state", store=store_address
        ) as a,
        PluginHost(
            node(tmp_path / "b"),
            state_dir=tmp_path / "b" / "state",
            store=store_address,
            clock=clock,
        ) as b,
    ):
        assert b.enable("p", consent=True)
        assert b.call("p", "main.run") == "ran"
        worker = b.worker_pid("p")
        assert worker is not None
        assert a.quarantine("p", "stopped on node a")
        clock.now += b.policy.state_refresh_s
        with pytest.raises(LifecycleError, match=r"quarantined \(stopped on node a\)"):
            b.call("p", "main.run")
        # Followed here as on node a: worker stopped, plugin disabled.
        assert b.worker_pid("p") is None
        assert b.manager.enabled_hash("p") is None
        info = b.manager.get_plugin("p")
        assert info is not None
        assert info.state is PluginState.QUARANTINED
        assert a.release("p")
        info = b.manager.get_plugin("p")
        assert info is not None
        assert info.state is PluginState.DISABLED, "a release leaves it disabled everywhere"


def test_approval_audit_log_and_kv_are_shared(tmp_path: Path, store_address: str) -> None:
    # ctx.kv belongs to the plugin's name and place (decide14): the nodes keep the plugins
    # directory at the same path (one folder here), as docs/fleet.md asks.
    plugins = node(tmp_path / "fleet")
    with PluginHost(plugins, state_dir=tmp_path / "a" / "state", store=store_address) as a:
        a.manager.audit("p")
        assert a.manager.approve("p")
        assert a.enable("p")
        assert a.call("p", "main.put", "k", {"from": "a"}) is True
    with PluginHost(plugins, state_dir=tmp_path / "b" / "state", store=store_address) as b:
        info = b.manager.get_plugin("p")
        assert info is not None
        assert info.approved, "approved once, on node a"
        assert b.enable("p"), "no consent asked: the shared approval covers it"
        assert b.call("p", "main.get", "k") == {"from": "a"}
        actions = [(d.action, d.allowed) for d in b.manager.store.decisions("p")]
        assert ("approve", True) in actions
        assert actions.count(("enable", True)) == 2, "both nodes' enables in one log"
    with PluginHost(
        node(tmp_path / "elsewhere"), state_dir=tmp_path / "c" / "state", store=store_address
    ) as c:
        assert c.enable("p"), "the same content: the shared approval covers it"
        assert c.call("p", "main.get", "k") is None, "a plugin at another path is another's kv"
    # The nodes' own state directories hold no database: the store is elsewhere.
    assert not (tmp_path / "a" / "state" / "caplet.db").exists()
    assert not (tmp_path / "b" / "state" / "caplet.db").exists()


FAILING = """
def create_functions(config):
    def fail():
        raise RuntimeError("asked to fail")

    return {"main": {"fail": fail}}
"""


def test_a_trip_on_one_node_is_in_every_nodes_log_at_once(
    tmp_path: Path, store_address: str
) -> None:
    """Trips are shared as log rows (docs/fleet.md, "Trips"); the breaker stays per node.

    The plugin first spends its refusal budget of the log: the trip's row is
    written at once all the same (before, a refused ``circuit`` row waited
    for the next minute like an HTTP refusal).
    """
    for root in ("a", "b"):
        PluginFactory(tmp_path / root / "plugins")(
            "f", source=FAILING, modules='[modules.main]\nfunctions = ["fail"]\n'
        )
    policy = Policy(failure_threshold=2, log=LogLimits(denials_per_minute=1))
    with (
        PluginHost(
            tmp_path / "a" / "plugins",
            state_dir=tmp_path / "a" / "state",
            store=store_address,
            policy=policy,
        ) as a,
        PluginHost(
            tmp_path / "b" / "plugins", state_dir=tmp_path / "b" / "state", store=store_address
        ) as b,
    ):
        assert a.enable("f", consent=True)
        a.manager.log_decision("f", "http", "https://flood.test/", False, "not granted")
        a.manager.log_decision("f", "http", "https://flood.test/2", False, "not granted")
        for _ in range(2):
            with pytest.raises(PluginCallError, match="asked to fail"):
                a.call("f", "main.fail")
        with pytest.raises(CircuitOpenError):
            a.call("f", "main.fail")
        seen = [d for d in b.manager.store.decisions("f") if d.action == "circuit"]
        assert len(seen) == 1, "node a's trip, read on node b"
        assert not seen[0].allowed
        assert "after 2 consecutive failures" in seen[0].detail
        assert b.breaker("f").closed, "the breaker itself is node-local"


# -- real processes ---------------------------------------------------------------------------


def run_python(code: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        check=False,
    )


def test_two_host_processes_share_approvals_and_quarantine(tmp_path: Path, pg_url: str) -> None:
    env = {"CAPLET_STORE": pg_url}
    a, b = tmp_path / "a", tmp_path / "b"
    node(a, "hello")
    node(b, "hello")

    def on(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return caplet(
            [*args, "--plugins-dir", str(root / "plugins"), "--state-dir", str(root / "state")],
            env=env,
        )

    approved = on(a, "approve", "hello", "--yes", "--json")
    assert approved.returncode == 0, approved.stderr
    called = on(b, "call", "--enable", "hello", "main.run", "--json")
    assert called.returncode == 0, called.stdout + called.stderr  # no consent question on node b
    assert json.loads(called.stdout)["result"] == "ran"

    quarantined = run_python(
        f"""
        from caplet import PluginHost
        with PluginHost({str(a / "plugins")!r}, state_dir={str(a / "state")!r}) as host:
            assert host.quarantine("hello", "node a saw it misbehave")
        """,
        env,
    )
    assert quarantined.returncode == 0, quarantined.stderr
    refused = on(b, "call", "--enable", "hello", "main.run")
    assert refused.returncode != 0
    assert "quarantined (node a saw it misbehave)" in refused.stdout + refused.stderr
    listed = json.loads(on(b, "list", "--json").stdout)
    (entry,) = listed["plugins"]
    assert entry["quarantine"]["reason"] == "node a saw it misbehave"

    released = on(b, "release", "hello")
    assert released.returncode == 0, released.stderr
    listed = json.loads(on(a, "list", "--json").stdout)
    assert listed["plugins"][0]["quarantine"] is None
    # Each node's state directory holds no database: the store is the server's.
    assert not (a / "state" / "caplet.db").exists()
    assert not (b / "state" / "caplet.db").exists()


CHURN = """
import sys
from caplet import PluginManager
from caplet._host._loading import LoadingRules

own, rounds = sys.argv[1], int(sys.argv[2])
with PluginManager(sys.argv[3], state_dir=sys.argv[4], loading=LoadingRules()) as manager:
    manager.discover()
    manager.audit(own)
    manager.audit("shared")
    sys.stdin.read(1)  # everyone starts together: the parent closes the pipe
    done = {"own": 0, "shared": 0}
    for _ in range(rounds):
        for name, key in ((own, "own"), ("shared", "shared")):
            assert manager.approve(name), name
            if manager.unapprove(name):
                done[key] += 1
    assert manager.approve(own) and manager.approve("shared")
    print(done["own"], done["shared"])
"""


@pytest.mark.slow
def test_eight_processes_approving_and_unapproving_lose_nothing(
    tmp_path: Path, pg_url: str
) -> None:
    rounds = 10
    processes = []
    # One pipe is every child's stdin: closing its write end starts them all at once.
    start_read, start_write = os.pipe()
    for index in range(8):
        root = tmp_path / f"n{index}"
        node(root, f"own-{index}")
        node(root, "shared")
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    CHURN,
                    f"own-{index}",
                    str(rounds),
                    str(root / "plugins"),
                    str(root / "state"),
                ],
                stdin=start_read,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "CAPLET_STORE": pg_url},
            )
        )
    os.close(start_read)
    os.close(start_write)
    outputs = [process.communicate(timeout=600) for process in processes]
    assert [p.returncode for p in processes] == [0] * 8, [err for _, err in outputs]
    unapproved = [tuple(int(n) for n in out.split()) for out, _ in outputs]
    with PostgresStore(pg_url) as store:
        names = sorted(a.name for a in store.list_approvals())
        assert names == sorted([*(f"own-{i}" for i in range(8)), "shared"])
        log = store.decisions(limit=100_000)

    def count(plugin: str, action: str) -> int:
        return sum(1 for d in log if d.plugin == plugin and d.action == action and d.allowed)

    for index in range(8):
        assert count(f"own-{index}", "approve") == rounds + 1
        assert count(f"own-{index}", "unapprove") == rounds == unapproved[index][0]
    # On the shared plugin the processes interleave: every approval and every
    # unapproval that deleted one is in the log exactly once.
    assert count("shared", "approve") == 8 * (rounds + 1)
    assert count("shared", "unapprove") == sum(shared for _, shared in unapproved)
    assert len({d.id for d in log}) == len(log)


# -- the server restarted mid-run ---------------------------------------------------------------


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    with running_server() as server:
        yield server


def test_server_restart_mid_run(tmp_path: Path, own_server: PgServer) -> None:
    url = own_server.new_database()
    clock = Clock()
    with PluginHost(node(tmp_path), state_dir=tmp_path / "state", store=url, clock=clock) as host:
        assert host.enable("p", consent=True)
        assert host.call("p", "main.put", "before", 1) is True
        own_server.restart()
        # Reconnected on first use: the ctx.kv write goes through.
        assert host.call("p", "main.put", "after-restart", 2) is True

        own_server.stop(mode="immediate")
        clock.now += host.policy.state_refresh_s  # the next call re-reads the shared state
        with pytest.raises(StoreError) as info:
            host.call("p", "main.run")
        message = str(info.value)
        assert f"PostgreSQL store {url} cannot be reached" in message
        assert "pg_isready" in message
        assert "caplet reconnects by itself" in message

        own_server.start()
        assert host.call("p", "main.get", "before") == 1
        assert host.call("p", "main.get", "after-restart") == 2
        assert host.call("p", "main.run") == "ran"


def test_cli_against_a_stopped_server_says_what_to_do(tmp_path: Path, own_server: PgServer) -> None:
    url = own_server.new_database()
    node(tmp_path)
    own_server.stop()
    result = caplet(
        ["list", "--plugins-dir", str(tmp_path / "plugins"), "--state-dir", str(tmp_path / "s")],
        env={"CAPLET_STORE": url},
    )
    assert result.returncode not in (0, 70), result.stderr
    assert "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())  # the console wraps long lines
    assert f"PostgreSQL store {url} cannot be reached while opening" in said
    assert "pg_isready" in said


@pytest.mark.security
def test_a_shared_store_vouches_when_the_operator_names_it_not_when_a_project_does(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """decide14: a cloned project's caplet.toml naming a PostgreSQL store (its author's)
    made that store's approvals consent here. Found beside the plugins directory, it
    vouches for nothing: the approval is shown and consent is asked. A fleet names its
    store itself (CAPLET_STORE, --policy/CAPLET_POLICY, PluginHost(policy=PATH)), and
    then the shared approval covers every node as before."""
    monkeypatch.delenv("CAPLET_STORE", raising=False)
    monkeypatch.delenv("CAPLET_POLICY", raising=False)
    plugins = node(tmp_path / "project")
    policy = tmp_path / "project" / "caplet.toml"
    # Allowed (a person read it): a found file that loosens applies only then.
    write_policy(policy, f"store = {json.dumps(pg_url)}\n")
    with PluginHost(plugins, state_dir=tmp_path / "a" / "state", policy=policy) as a:
        a.manager.audit("p")
        assert a.manager.approve("p")
    with PluginHost(plugins, state_dir=tmp_path / "b" / "state") as b:
        refused = b.enable("p")
        assert not refused, "the project's store vouched"
        assert "plugin 'p' has an approval of this content only in the store a project" in (
            refused.reason
        )
        request = b.manager.consent_request("p")
        assert request is not None
        assert request.approval is not None, "the approval is shown"
        assert b.enable("p", consent=True), "a person's consent is a decision"
    with PluginHost(plugins, state_dir=tmp_path / "c" / "state", policy=policy) as c:
        assert c.enable("p"), "named by the operator: the fleet's approval covers it"
    monkeypatch.setenv("CAPLET_POLICY", str(policy))
    with PluginHost(plugins, state_dir=tmp_path / "d" / "state") as d:
        assert d.enable("p"), "CAPLET_POLICY names it too"
