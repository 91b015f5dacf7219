"""One policy from a file (issue 15): where it is found, what wins, and what loosens."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
from pathlib import Path

import pytest

from caplet._errors import PolicyError
from caplet._findings import RiskLevel
from caplet._host._host import PluginHost
from caplet._host._loading import LoadingRules
from caplet._host._policy import Isolation, Policy
from caplet._host._policy_file import (
    POLICY_LOG_NAME,
    EffectivePolicy,
    PolicyOverride,
    load_policy,
    project_store,
)
from caplet._sandbox._subprocess import SubprocessLauncher
from caplet._trust._store import Decision
from tests.conftest import PluginFactory, write_policy

LOOSE = """\
isolation = "best-effort"
max_risk_level = "high"
memory_mb = 256

[network]
allowed_networks = ["127.0.0.0/8"]

[guest]
pool_size = 0
"""


def test_without_a_file_the_defaults_hold_and_nothing_is_configured(plugins_dir: Path) -> None:
    effective = load_policy(plugins_dir, environ={})
    assert effective.policy == Policy()
    assert effective.file is None
    assert not effective.configured
    assert not effective.loosened
    assert {s.source for s in effective.settings} == {"default"}


def test_caplet_toml_beside_the_plugins_directory_is_read(plugins_dir: Path) -> None:
    write_policy(plugins_dir.parent / "caplet.toml", LOOSE)
    effective = load_policy(plugins_dir, environ={})
    policy = effective.policy
    assert policy.isolation is Isolation.BEST_EFFORT
    assert policy.max_risk_level is RiskLevel.HIGH
    assert policy.network.allowed_networks == (ipaddress.ip_network("127.0.0.0/8"),)
    assert policy.guest.pool_size == 0
    assert effective.file == plugins_dir.parent / "caplet.toml"
    sources = {s.field: s.source for s in effective.settings}
    assert sources["memory_mb"] == str(plugins_dir.parent / "caplet.toml")
    assert sources["guest.pool_size"] == str(plugins_dir.parent / "caplet.toml")
    assert sources["cpu_s"] == "default"
    # A lower memory limit tightens; a smaller warm pool changes no decision.
    assert {s.field for s in effective.loosened} == {
        "isolation",
        "max_risk_level",
        "network.allowed_networks",
    }


def test_pyproject_tool_table_is_read_and_caplet_toml_wins_over_it(plugins_dir: Path) -> None:
    pyproject = plugins_dir.parent / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "app"\n\n[tool.caplet]\nmemory_mb = 100\n\n[tool.caplet.guest]\n'
        "pool_size = 1\n",
        encoding="utf-8",
    )
    effective = load_policy(plugins_dir, environ={})
    assert effective.policy.memory_mb == 100
    assert effective.policy.guest.pool_size == 1
    assert {s.source for s in effective.settings if s.field == "memory_mb"} == {
        f"{pyproject} [tool.caplet]"
    }
    write_policy(plugins_dir.parent / "caplet.toml", "memory_mb = 200\n")
    assert load_policy(plugins_dir, environ={}).policy.memory_mb == 200


def test_a_pyproject_without_caplet_is_someone_elses(plugins_dir: Path) -> None:
    write_policy(plugins_dir.parent / "pyproject.toml", '[project]\nname = "x"\n', "utf-8")
    assert load_policy(plugins_dir, environ={}).file is None
    # Broken, but never mentioning caplet: not caplet's to judge.
    write_policy(plugins_dir.parent / "pyproject.toml", "[[[ not toml", "utf-8")
    assert load_policy(plugins_dir, environ={}).file is None


def test_a_broken_pyproject_that_may_hold_the_policy_is_an_error_not_the_defaults(
    plugins_dir: Path,
) -> None:
    """The safe answer: a policy that cannot be read might have tightened something."""
    write_policy(plugins_dir.parent / "pyproject.toml", "[tool.caplet]\nmemory_mb = = 5\n", "utf-8")
    with pytest.raises(PolicyError, match=r"pyproject.toml: not valid TOML: .*line 2"):
        load_policy(plugins_dir, environ={})


def test_caplet_policy_names_the_file_and_an_explicit_file_wins(
    plugins_dir: Path, tmp_path: Path
) -> None:
    write_policy(plugins_dir.parent / "caplet.toml", "memory_mb = 100\n")
    named = tmp_path / "team-policy.toml"
    named.write_text("memory_mb = 300\n", encoding="utf-8")
    chosen = tmp_path / "chosen.toml"
    chosen.write_text("memory_mb = 400\n", encoding="utf-8")
    from_env = load_policy(plugins_dir, environ={"CAPLET_POLICY": str(named)})
    assert from_env.policy.memory_mb == 300
    assert from_env.settings[2].source == f"{named} (CAPLET_POLICY)"
    explicit = load_policy(plugins_dir, file=chosen, environ={"CAPLET_POLICY": str(named)})
    assert explicit.policy.memory_mb == 400


def test_a_named_file_that_does_not_exist_is_an_error(plugins_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(PolicyError, match=r"policy file .*nope.toml: no such file; create it"):
        load_policy(plugins_dir, file=missing, environ={})
    with pytest.raises(PolicyError, match="no such file"):
        load_policy(plugins_dir, environ={"CAPLET_POLICY": str(missing)})


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"memory_mb = \n", r"not valid TOML: .*\(at line 1, column 13\); fix the syntax"),
        (b"memory_mb = '\xff'\n", r"not UTF-8 \(invalid start byte at byte 13\); save it as UTF-8"),
        (
            b"memroy_mb = 5\n",
            r"caplet.toml: memroy_mb: unknown field \(did you mean 'memory_mb'\?\)",
        ),
        (b"[network]\nallowed_networks = ['x']\n", r"caplet.toml: network.allowed_networks\[0\]"),
        (b"memory_mb = true\n", r"caplet.toml: memory_mb: True is not valid: expected a whole"),
        (b"[guest]\npool_size = -3\n", r"caplet.toml: guest.pool_size: -3 is not valid"),
        (b"guest = 5\n", r"caplet.toml: guest: 5 is not valid: expected a table"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_field(
    plugins_dir: Path, content: bytes, expected: str
) -> None:
    (plugins_dir.parent / "caplet.toml").write_bytes(content)
    with pytest.raises(PolicyError, match=expected):
        load_policy(plugins_dir, environ={})


def test_a_file_far_larger_than_any_policy_is_refused(plugins_dir: Path) -> None:
    (plugins_dir.parent / "caplet.toml").write_bytes(b"#" * (1024 * 1024 + 1))
    with pytest.raises(PolicyError, match="larger than 1048576 bytes"):
        load_policy(plugins_dir, environ={})


def test_flags_go_on_top_and_say_so(plugins_dir: Path) -> None:
    write_policy(
        plugins_dir.parent / "caplet.toml",
        '[network]\nallowed_networks = ["10.0.0.0/8"]\n',
        encoding="utf-8",
    )
    effective = load_policy(
        plugins_dir,
        environ={},
        overrides=(
            PolicyOverride(
                "network.allowed_networks", "127.0.0.0/8", "--allow-network", appended=True
            ),
            PolicyOverride("guest.timeout_ms", 9000, "--set guest.timeout_ms"),
            PolicyOverride("isolation", "best-effort", "--isolation"),
        ),
    )
    assert [str(n) for n in effective.policy.network.allowed_networks] == [
        "10.0.0.0/8",
        "127.0.0.0/8",
    ]
    sources = {s.field: s.source for s in effective.settings}
    assert sources["network.allowed_networks"].endswith("caplet.toml + --allow-network")
    assert sources["guest.timeout_ms"] == "--set guest.timeout_ms"
    assert sources["isolation"] == "--isolation"
    # Without a file, an appended network starts from the default (none).
    alone = load_policy(
        plugins_dir.parent / "elsewhere" / "plugins",
        environ={},
        overrides=(
            PolicyOverride(
                "network.allowed_networks", "127.0.0.0/8", "--allow-network", appended=True
            ),
        ),
    )
    assert [str(n) for n in alone.policy.network.allowed_networks] == ["127.0.0.0/8"]
    assert alone.configured


def test_a_bad_flag_value_is_refused_naming_the_flag(plugins_dir: Path) -> None:
    with pytest.raises(PolicyError, match=r"--max-risk: max_risk_level: 'EXTREME' is not valid"):
        load_policy(
            plugins_dir,
            environ={},
            overrides=(PolicyOverride("max_risk_level", "extreme", "--max-risk"),),
        )


def _host(plugins_dir: Path, state_dir: Path, **kwargs: object) -> PluginHost:
    return PluginHost(
        plugins_dir,
        state_dir=state_dir,
        launcher=SubprocessLauncher(),
        discover=False,
        auditor=None,
        loading=LoadingRules(),
        **kwargs,  # type: ignore[arg-type]
    )


def test_plugin_host_reads_the_same_file(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    write_policy(plugins_dir.parent / "caplet.toml", "memory_mb = 100\n")
    with _host(plugins_dir, state_dir) as host:
        assert host.policy.memory_mb == 100
        assert host.effective_policy.file == plugins_dir.parent / "caplet.toml"
    other = tmp_path / "other.toml"
    other.write_text("memory_mb = 64\n", encoding="utf-8")
    with _host(plugins_dir, state_dir, policy=other) as host:
        assert host.policy.memory_mb == 64
    # A Policy object is the application's own decision: the file is not read.
    with _host(plugins_dir, state_dir, policy=Policy(memory_mb=32)) as host:
        assert host.policy.memory_mb == 32
        assert host.effective_policy.file is None
        assert not host.effective_policy.configured


def test_a_host_refuses_to_start_on_a_bad_policy_file(plugins_dir: Path, state_dir: Path) -> None:
    write_policy(plugins_dir.parent / "caplet.toml", "isolation = 'loose'\n")
    with pytest.raises(PolicyError, match=r"caplet.toml: isolation: 'loose' is not valid"):
        _host(plugins_dir, state_dir)


def _policy_rows(host: PluginHost) -> list[str]:
    return [d.detail for d in host.manager.store.decisions(POLICY_LOG_NAME, 100)]


def test_a_loosening_file_is_logged_and_recorded_once_per_change(
    plugins_dir: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy_file = plugins_dir.parent / "caplet.toml"
    write_policy(policy_file, '[network]\nallowed_networks = ["127.0.0.0/8"]\n')
    with caplog.at_level(logging.WARNING, logger="caplet"), _host(plugins_dir, state_dir) as host:
        rows = _policy_rows(host)
    assert len(rows) == 1
    assert rows[0].startswith("loosens: network.allowed_networks = [127.0.0.0/8] (")
    assert "loopback: services on this machine" in rows[0]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(w.startswith("policy loosens network.allowed_networks") for w in warnings)
    # The same policy again: warned again, recorded once.
    with _host(plugins_dir, state_dir) as host:
        assert len(_policy_rows(host)) == 1
    write_policy(policy_file, 'isolation = "best-effort"\n')
    with _host(plugins_dir, state_dir) as host:
        rows = _policy_rows(host)
    assert len(rows) == 2
    assert rows[0].startswith("loosens: isolation = best-effort")


def test_an_application_policy_object_is_not_logged(
    plugins_dir: Path, state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loose = Policy(isolation=Isolation.BEST_EFFORT)
    assert EffectivePolicy.of(loose).loosened  # shown by `caplet policy`-like callers
    with (
        caplog.at_level(logging.WARNING, logger="caplet"),
        _host(plugins_dir, state_dir, policy=loose) as host,
    ):
        assert _policy_rows(host) == []
    assert not [r for r in caplog.records if "policy loosens" in r.getMessage()]


def test_the_store_key_chooses_the_store_and_never_shows_a_password(
    plugins_dir: Path, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAPLET_STORE", raising=False)
    shared = tmp_path / "shared-state"
    write_policy(
        plugins_dir.parent / "caplet.toml", f'store = "sqlite://{shared}"\n', encoding="utf-8"
    )
    with _host(plugins_dir, state_dir) as host:
        assert host.policy.store == f"sqlite://{shared}"
        host.manager.store.log_decision(_decision("via-file"))
    assert (shared / "caplet.db").exists()
    assert not (state_dir / "caplet.db").exists()
    # CAPLET_STORE wins over the file (one node pointed elsewhere for a migration).
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("CAPLET_STORE", str(elsewhere))
    with _host(plugins_dir, state_dir) as host:
        host.manager.store.log_decision(_decision("via-env"))
    assert (elsewhere / "caplet.db").exists()

    write_policy(
        plugins_dir.parent / "caplet.toml",
        'store = "postgresql://caplet:hunter2@db.internal/caplet"\n',
        encoding="utf-8",
    )
    effective = load_policy(plugins_dir, environ={})
    (setting,) = [s for s in effective.settings if s.field == "store"]
    assert setting.value == "postgresql://caplet:***@db.internal/caplet"
    assert "a plugin approved there is approved here" in setting.loosens
    assert "hunter2" not in repr(effective.policy)


def test_a_store_of_an_unknown_kind_is_refused_naming_the_file(plugins_dir: Path) -> None:
    write_policy(
        plugins_dir.parent / "caplet.toml",
        'store = "mysql://root:hunter2@db/caplet"\n',
        encoding="utf-8",
    )
    with pytest.raises(PolicyError) as info:
        load_policy(plugins_dir, environ={})
    message = str(info.value)
    assert "caplet.toml: store:" in message
    assert "caplet has no store of kind 'mysql'" in message
    assert "hunter2" not in message


def _decision(plugin: str) -> Decision:
    return Decision(at=1.0, plugin=plugin, action="call", target="", allowed=True)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "pyproject.toml",
            "[tool.caplet]\nmemory_mb = 100\nx = " + "[" * 5000 + "]" * 5000 + "\n",
            r"pyproject.toml: arrays or inline tables nested too deeply",
        ),
        (
            "caplet.toml",
            "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
            r"caplet.toml: arrays or inline tables nested too deeply",
        ),
        (
            "caplet.toml",
            "[" + ".".join(["t"] * 100) + "]\n",
            r"caplet.toml: line 1 has more than 64 dots outside strings",
        ),
    ],
)
def test_hostile_toml_in_a_project_is_a_policy_error_not_a_traceback(
    plugins_dir: Path, name: str, content: str, expected: str
) -> None:
    """Red-team round 3: a project checkout's pyproject.toml (or caplet.toml) nested
    deeply raised RecursionError out of PluginHost and `caplet` (exit 70); a dotted key
    of many parts made tomllib quadratic (tests/test_toml.py)."""
    (plugins_dir.parent / name).write_text(content, encoding="utf-8")
    with pytest.raises(PolicyError, match=expected):
        load_policy(plugins_dir, environ={})


def test_a_policy_link_whose_target_went_away_is_an_error_not_the_defaults(
    plugins_dir: Path, tmp_path: Path
) -> None:
    """Red-team round 3: ``caplet.toml`` linked to a shared file that is gone (deleted by
    whoever can write there) silently gave the defaults: every tightening the operator
    wrote (require_signature, a lower max_risk_level, untrusted tiers) dropped unseen."""
    shared = tmp_path / "shared.toml"
    shared.write_text("require_signature = true\n", encoding="utf-8")
    (plugins_dir.parent / "caplet.toml").symlink_to(shared)
    assert load_policy(plugins_dir, environ={}).policy.require_signature
    shared.unlink()
    with pytest.raises(PolicyError, match=r"caplet.toml: no such file"):
        load_policy(plugins_dir, environ={})


def test_a_policy_file_that_is_no_regular_file_never_hangs_the_host(
    plugins_dir: Path, tmp_path: Path
) -> None:
    """Red-team round 3: a FIFO as the policy file blocked open(2) until a writer came:
    every caplet command on that project hung."""
    fifo = plugins_dir.parent / "caplet.toml"
    os.mkfifo(fifo)
    with pytest.raises(PolicyError, match=r"caplet.toml: not a regular file"):
        load_policy(plugins_dir, environ={})


def test_a_store_only_a_project_file_names_is_told_apart_from_the_operators(
    plugins_dir: Path, tmp_path: Path
) -> None:
    """decide14: which stores vouch. Found beside the plugins directory, a caplet.toml's
    (or pyproject's [tool.caplet]) `store` is the project's; named by the operator (a
    file they name, a flag, CAPLET_STORE) it is theirs."""
    project = plugins_dir.parent / "caplet.toml"
    write_policy(project, 'store = "approvals"\n')
    found = load_policy(plugins_dir, environ={})
    assert project_store(found, {}) == f"store = approvals ({project})"
    assert project_store(found, {"CAPLET_STORE": "/srv/state"}) == ""
    assert project_store(load_policy(plugins_dir, file=project, environ={}), {}) == ""
    assert (
        project_store(load_policy(plugins_dir, environ={"CAPLET_POLICY": str(project)}), {}) == ""
    )
    flagged = load_policy(
        plugins_dir, environ={}, overrides=[PolicyOverride("store", "approvals", "--set store")]
    )
    assert project_store(flagged, {}) == "", "a flag is the operator's"
    write_policy(project, 'store = "sqlite"\n')
    assert project_store(load_policy(plugins_dir, environ={}), {}) == "", "this machine's own"
    write_policy(project, 'store = "postgresql://u:secret@db/caplet"\n')
    shown = project_store(load_policy(plugins_dir, environ={}), {})
    assert shown.startswith("store = postgresql://u:")
    assert "secret" not in shown, "never the password"


def test_a_project_stores_cached_audit_is_never_shown_as_the_audit(
    plugins_dir: Path, tmp_path: Path, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """decide14: the audits cached in a store only a project file names are its author's
    rows: consent shows an audit this process ran, never a forged one."""
    make_plugin("p")
    monkeypatch.chdir(plugins_dir.parent)  # `store = "approvals"` is read from the cwd
    project = plugins_dir.parent / "caplet.toml"
    write_policy(project, 'store = "approvals"\n')
    options = {"state_dir": tmp_path / "state", "auditor": None, "loading": LoadingRules()}
    # The author, in their project (naming the file: their store), forges the cached audit.
    with PluginHost(plugins_dir, policy=project, **options) as author:  # type: ignore[arg-type]
        assert not author.manager.unvouched_store
        real = author.audit("p")
        forged = dataclasses.replace(real, summary="forged: reviewed by the author, all clean")
        author.manager.store.put_audit(forged)
    with PluginHost(plugins_dir, **options) as host:  # type: ignore[arg-type]
        assert host.manager.unvouched_store
        request = host.manager.consent_request("p")
        assert request is not None
        assert request.audit.summary == real.summary
        assert host.enable("p", consent=True)
        enabled = host.manager.require_plugin("p").audit
        assert enabled is not None
        assert enabled.summary == real.summary, "enabled on an audit this process ran"
