"""PluginManager lifecycle: the behaviours issue 2 asks to keep from seed 000, and its fixes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import (
    PluginManager,
    PluginNotFoundError,
    PluginState,
    Policy,
    RiskLevel,
)
from caplet._audit._model import CanaryStatus
from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._config._schema import ConfigField, ConfigValue
from caplet._errors import AuditConfigError, ConfigError, HostError
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Manifest
from caplet._sandbox._identity import WorkerIdentity, worker_identity
from tests._audit.llm_server import LLMServer, Reply, obedient, serve
from tests.conftest import PluginFactory

CONFIGURED = """
[config.root]
type = "string"
description = "where"
prompt = true

[config.limit]
type = "integer"
default = 5

[config.verbose]
type = "boolean"
default = false
"""

# fs.read + net.http is an exfiltration path: the composition lint makes it MEDIUM.
EXFIL = 'capabilities = ["fs.read:/srv/in", "net.http:https://api.example.com"]'


@pytest.fixture
def manager(plugins_dir: Path, state_dir: Path) -> Iterator[PluginManager]:
    m = PluginManager(plugins_dir, state_dir=state_dir)
    yield m
    m.close()


def _reopen(plugins_dir: Path, state_dir: Path, policy: Policy | None = None) -> PluginManager:
    m = PluginManager(plugins_dir, state_dir=state_dir, policy=policy)
    m.discover()
    return m


# -- discovery -------------------------------------------------------------------------------


def test_missing_plugins_directory_gives_zero(tmp_path: Path, state_dir: Path) -> None:
    m = PluginManager(tmp_path / "nope", state_dir=state_dir)
    assert m.discover() == 0
    assert m.list_plugins() == []
    m.close()


def test_a_plugins_directory_the_system_cannot_take_is_a_host_error(
    tmp_path: Path, state_dir: Path
) -> None:
    """A name longer than the file system's limit made is_dir() raise OSError (issue 13)."""
    plugins = tmp_path / ("n" * 300)
    m = PluginManager(plugins, state_dir=state_dir)
    with pytest.raises(HostError) as caught:
        m.discover()
    m.close()
    assert str(caught.value) == (
        f"plugins directory {str(plugins)[:200]!r} cannot be read (File name too long); pass "
        "a directory caplet can list (--plugins-dir or CAPLET_PLUGINS_DIR)"
    )


def test_discovery_skips_broken_plugins_with_a_warning_and_keeps_going(
    manager: PluginManager, make_plugin: PluginFactory, caplog: pytest.LogCaptureFixture
) -> None:
    make_plugin("good")
    make_plugin("bad", manifest='name = "bad"\nversion = "v1.0"\n')
    with caplog.at_level(logging.WARNING, logger="caplet"):
        assert manager.discover() == 1
    assert [p.name for p in manager.list_plugins()] == ["good"]
    broken = manager.broken_plugins()
    assert [b.directory.name for b in broken] == ["bad"]
    assert "use a bare version" in broken[0].error
    assert "skipping plugin bad" in caplog.text


def test_rediscovery_keeps_state_and_config(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("keep", extra=CONFIGURED)
    manager.discover()
    manager.apply_inline_config("keep", ["root=/srv/data"])
    assert manager.enable("keep", consent=True)
    assert manager.discover() == 1
    info = manager.require_plugin("keep")
    assert info.state is PluginState.ENABLED
    assert info.config["root"] == "/srv/data"


def test_unknown_plugin_name_suggests_the_closest(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("hello")
    manager.discover()
    with pytest.raises(PluginNotFoundError, match=r"did you mean 'hello'\?") as info:
        manager.approve("helo")
    assert info.value.suggestion == "hello"
    assert manager.get_plugin("helo") is None


# -- audit and approval ---------------------------------------------------------------------------
def test_load_source_reads_the_entry_as_python_decodes_it(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    plugin = make_plugin("latin")
    (plugin / "plugin.py").write_bytes(b"# -*- coding: latin-1 -*-\nNAME = '\xe9'\n")
    manager.discover()
    assert manager.load_source("latin") == "# -*- coding: latin-1 -*-\nNAME = '\xe9'\n"


def test_load_source_never_follows_an_entry_replaced_by_a_link(
    manager: PluginManager, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    """Attack: after discovery the entry becomes a link to a host file; the
    application that asks for the plugin's source (to show it, or to send it to a
    hosted model) got the host file."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    plugin = make_plugin("linked")
    manager.discover()
    entry = plugin / "plugin.py"
    entry.unlink()
    entry.symlink_to(secret)
    assert manager.load_source("linked") is None


def test_approve_requires_an_audit(manager: PluginManager, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    manager.discover()
    outcome = manager.approve("p")
    assert not outcome
    assert "no audit of its current content" in outcome.reason
    assert "caplet audit p" in outcome.reason


def test_approve_requires_an_audit_of_the_current_hash(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    directory = make_plugin("p")
    manager.discover()
    audit = manager.audit("p")
    (directory / "helper.py").write_text("X = 1\n", encoding="utf-8")
    outcome = manager.approve("p")
    assert not outcome, "an audit of older content must not allow approval (the seed's gap)"
    assert audit.content_hash not in outcome.reason
    assert manager.get_cached_audit("p") is None
    assert manager.get_cached_audit("p", audit.content_hash) == audit


def test_any_change_to_any_file_voids_approval(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    directory = make_plugin("p", files={"data/notes.txt": "a"})
    manager.discover()
    manager.audit("p")
    assert manager.approve("p")
    assert manager.is_approved("p")
    (directory / "data" / "notes.txt").write_text("b", encoding="utf-8")
    assert not manager.is_approved("p")
    record = manager.get_approval_record("p")
    assert record is not None
    assert record.content_hash != manager.current_hash("p")


def test_approval_persists_across_processes_but_enablement_does_not(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    first = _reopen(plugins_dir, state_dir)
    first.audit("p")
    assert first.approve("p")
    assert first.enable("p", consent=True)
    first.close()
    second = _reopen(plugins_dir, state_dir)
    info = second.require_plugin("p")
    assert info.approved
    assert info.state is not PluginState.ENABLED
    assert second.get_enabled_plugins() == []
    second.close()


def test_unapprove(manager: PluginManager, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    manager.discover()
    not_approved = manager.unapprove("p")
    assert not not_approved
    assert "is not approved" in not_approved.reason
    manager.audit("p")
    manager.approve("p")
    assert manager.unapprove("p")
    assert not manager.is_approved("p")


def test_max_risk_level_refuses_approval(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("reader", extra=EXFIL)
    strict = _reopen(plugins_dir, state_dir, Policy(max_risk_level=RiskLevel.LOW))
    audit = strict.audit("reader")
    assert audit.risk_level is RiskLevel.MEDIUM
    outcome = strict.approve("reader")
    assert not outcome
    assert f"{audit.risk_level.value} risk, above the policy's max_risk_level LOW" in outcome.reason
    strict.close()


def test_fast_path_rechecks_stored_risk_after_restart(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("writer", extra=EXFIL)
    lenient = _reopen(plugins_dir, state_dir, Policy(max_risk_level=RiskLevel.HIGH))
    lenient.audit("writer")
    assert lenient.approve("writer")
    record = lenient.get_approval_record("writer")
    assert record is not None
    lenient.close()
    assert record.risk_level is RiskLevel.MEDIUM
    strict = _reopen(plugins_dir, state_dir, Policy(max_risk_level=RiskLevel.LOW))
    assert strict.is_approved("writer")
    outcome = strict.enable("writer", consent=True)
    assert not outcome
    assert "approval no longer satisfies policy" in outcome.reason
    strict.close()


def test_danger_gate_refuses_enable_and_approval(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "shell",
        source="""
            import subprocess
            def create_functions(config):
                return {"main": {"run": lambda c: subprocess.run(c, shell=True)}}
        """,
    )
    manager.discover()
    manager.audit("shell")
    for outcome in (manager.approve("shell"), manager.enable("shell", consent=True)):
        assert not outcome
        assert "danger finding" in outcome.reason
    assert manager.require_plugin("shell").state is not PluginState.ENABLED


@pytest.mark.parametrize(
    ("padding", "says"),
    [
        # Past the scanner's size limit (2 MiB): the file was skipped with a warning.
        ("PAD = 0\n" * 300_000, "CPL-SCAN-001 not scanned: too large"),
        # An expression deeper than the scanner walks, though Python compiles it.
        ("x = " + "+".join(["1"] * 800) + "\n", "CPL-SCAN-002 not scanned: too complex"),
    ],
)
def test_code_the_scanner_could_not_read_is_refused_not_waved_through(
    manager: PluginManager, make_plugin: PluginFactory, padding: str, says: str
) -> None:
    # The attack: `import ctypes` (refused by the danger gate) in a file the
    # scanner gives up on. It used to be a warning, and the plugin ran ctypes.
    make_plugin(
        "padded",
        source="import ctypes\n"
        "def create_functions(config):\n"
        "    return {'main': {'run': lambda: ctypes.sizeof(ctypes.c_int)}}\n" + padding,
    )
    manager.discover()
    outcome = manager.enable("padded", consent=True)
    assert not outcome, "unscanned code passed the danger gate"
    assert says in outcome.reason
    assert "a plugin's code that was not scanned is refused" in outcome.reason
    assert manager.require_plugin("padded").state is not PluginState.ENABLED


@pytest.mark.parametrize(
    "text",
    [
        'P = "/\\ud800"\n',  # re2 raised UnicodeEncodeError
        '_s = {}\n_s = {_s["k"].get("n", 0): _s}\n',  # the resolver raised RecursionError
    ],
)
def test_text_that_crashed_the_scanner_is_an_outcome_not_an_exception(
    manager: PluginManager, make_plugin: PluginFactory, text: str
) -> None:
    make_plugin(
        "odd",
        source=text + "def create_functions(config):\n    return {'main': {'run': lambda: 1}}\n",
    )
    manager.discover()
    outcome = manager.enable("odd", consent=True)
    assert outcome, outcome.reason


# -- configuration


class Scripted:
    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def ask(self, plugin: str, field: ConfigField, current: ConfigValue | None) -> str:
        self.asked.append(field.name)
        return self.answers[field.name]


def test_inline_config_reports_unknown_keys(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra=CONFIGURED)
    manager.discover()
    result = manager.apply_inline_config("c", ["limit = 7", "lmit=3", "=x", "verbose=YES"])
    assert result.applied == ("limit", "verbose")
    assert result.unknown == ("lmit",)
    config = manager.require_plugin("c").config
    assert config == {"limit": 7, "verbose": True}


def test_invalid_inline_value_names_plugin_and_field(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra=CONFIGURED)
    manager.discover()
    with pytest.raises(ConfigError, match=r"'c'.*'limit'"):
        manager.apply_inline_config("c", ["limit=many"])
    assert manager.require_plugin("c").config == {}


def test_prompt_config_asks_prompt_fields_and_fields_without_default(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra=CONFIGURED)
    manager.discover()
    prompter = Scripted({"root": "/srv/x"})
    assert manager.prompt_config(prompter, "c")
    assert prompter.asked == ["root"]
    assert manager.require_plugin("c").state is PluginState.CONFIGURED
    skipped = Scripted({})
    manager.prompt_config(skipped, "c", skip_keys=["root"])
    assert skipped.asked == []


def test_enable_applies_defaults_only_to_unset_keys(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra=CONFIGURED)
    manager.discover()
    manager.apply_inline_config("c", ["root=/srv/a", "limit=9"])
    assert manager.enable("c", consent=True)
    assert manager.require_plugin("c").config == {"root": "/srv/a", "limit": 9, "verbose": False}


def test_enable_refuses_missing_required_config(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra=CONFIGURED)
    manager.discover()
    outcome = manager.enable("c", consent=True)
    assert not outcome
    assert "root" in outcome.reason
    assert "root=..." in outcome.reason


def test_set_config_refuses_unknown_keys(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra=CONFIGURED)
    manager.discover()
    outcome = manager.set_config("c", {"rot": "/x"})
    assert not outcome
    assert "did you mean 'root'" in outcome.reason
    assert manager.set_config("c", {"root": "/x", "limit": 3})


def test_capabilities_are_substituted_on_enable(
    manager: PluginManager, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    make_plugin("c", extra='capabilities = ["fs.read:${config.root}"]\n' + CONFIGURED)
    manager.discover()
    manager.apply_inline_config("c", [f"root={tmp_path}/data/"])
    assert manager.enable("c", consent=True)
    capabilities = [str(c) for c in manager.require_plugin("c").capabilities]
    assert capabilities == [f"fs.read:{tmp_path}/data"]


def test_enable_refuses_config_that_makes_a_broad_capability(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra='capabilities = ["fs.read:${config.root}"]\n' + CONFIGURED)
    manager.discover()
    manager.apply_inline_config("c", ["root=/"])
    outcome = manager.enable("c", consent=True)
    assert not outcome
    assert "fs.read" in outcome.reason


# -- enable / disable / dirty flags


def test_disable_of_a_plugin_that_is_not_enabled(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    manager.discover()
    outcome = manager.disable("p")
    assert not outcome
    assert outcome.reason == "plugin 'p' is not enabled (state: discovered)"


def test_dirty_flags_are_set_by_enable_and_disable_and_consumed_once(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    manager.discover()
    assert not manager.is_dirty().sandbox
    assert manager.enable("p", consent=True)
    flags = manager.is_dirty()
    assert flags.sandbox
    assert flags.session
    assert manager.consume_sandbox_dirty() is True
    assert manager.consume_sandbox_dirty() is False
    assert manager.consume_session_dirty() is True
    assert manager.consume_session_dirty() is False
    assert manager.disable("p")
    assert manager.consume_sandbox_dirty() is True
    assert manager.consume_session_dirty() is True


def test_system_message_additions_come_from_enabled_plugins(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "hinted",
        extra=(
            '[hints]\noverview = "Use host.main.run."\ncritical_rules = ["Never pass secrets."]\n'
        ),
    )
    make_plugin("quiet")
    manager.discover()
    assert manager.get_system_message_additions() == []
    manager.enable("hinted", consent=True)
    (text,) = manager.get_system_message_additions()
    assert "hinted" in text
    assert "Use host.main.run." in text
    assert "- Never pass secrets." in text
    assert "host.main: run" in text


# -- requires


def test_requires_loads_in_topological_order(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("a-app", extra='requires = ["z-lib>=1.0"]')
    make_plugin("z-lib")
    manager.discover()
    assert manager.names() == ["z-lib", "a-app"]


def test_requires_cycle_is_refused_with_the_cycle_named(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("one", extra='requires = ["two"]')
    make_plugin("two", extra='requires = ["one"]')
    make_plugin("free")
    assert manager.discover() == 1
    errors = [b.error for b in manager.broken_plugins()]
    assert len(errors) == 2
    assert all("requires cycle" in e for e in errors)
    assert any("one -> two -> one" in e or "two -> one -> two" in e for e in errors)


def test_enable_refuses_when_a_requirement_is_not_enabled(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("app", extra='requires = ["lib"]')
    make_plugin("lib")
    manager.discover()
    outcome = manager.enable("app", consent=True)
    assert not outcome
    assert "requires 'lib', which is not enabled" in outcome.reason
    assert manager.enable("lib", consent=True)
    assert manager.enable("app", consent=True)


def test_enable_refuses_a_requirement_of_the_wrong_version(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("app", extra='requires = ["lib>=2"]')
    make_plugin("lib")
    manager.discover()
    manager.enable("lib", consent=True)
    outcome = manager.enable("app", consent=True)
    assert not outcome
    assert "lib>=2" in outcome.reason
    assert "version 1.0.0" in outcome.reason


def test_disable_cascades_to_dependants_and_names_them(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("base")
    make_plugin("mid", extra='requires = ["base"]')
    make_plugin("top", extra='requires = ["mid"]')
    manager.discover()
    for name in ("base", "mid", "top"):
        assert manager.enable(name, consent=True), name
    outcome = manager.disable("base")
    assert outcome
    assert set(outcome.affected) == {"mid", "top"}
    assert outcome.affected[0] == "top", "dependants are disabled outermost first"
    assert manager.get_enabled_plugins() == []


# -- quarantine and the decision log


def test_quarantine_blocks_enable_until_released(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("q")
    manager.discover()
    manager.enable("q", consent=True)
    manager.quarantine("q", "crashed 3 times")
    info = manager.require_plugin("q")
    assert info.state is PluginState.QUARANTINED
    outcome = manager.enable("q", consent=True)
    assert not outcome
    assert "quarantined (crashed 3 times)" in outcome.reason
    assert manager.release("q")
    assert manager.enable("q", consent=True)


def test_decisions_are_logged(manager: PluginManager, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    manager.discover()
    manager.approve("p")
    manager.audit("p")
    manager.approve("p")
    actions = [(d.action, d.allowed) for d in manager.store.decisions("p")]
    assert ("approve", False) in actions
    assert ("approve", True) in actions
    assert ("audit", True) in actions


# -- the LLM auditor (issue 5) -------------------------------------------------------------------

CLEAN_SOURCE = """
def create_functions(config):
    def run(name):
        return "hi " + name
    return {"main": {"run": run}}
"""


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    yield from serve()


@pytest.fixture
def llm_env(llm: LLMServer, monkeypatch: pytest.MonkeyPatch) -> LLMServer:
    """CAPLET_LLM_* pointing at the scripted server (an OpenAI-compatible one)."""
    monkeypatch.setenv("CAPLET_LLM_PROVIDER", "openai")
    monkeypatch.setenv("CAPLET_LLM_BASE_URL", llm.url)
    monkeypatch.setenv("CAPLET_LLM_MODEL", "scripted")
    return llm


def test_no_llm_settings_means_static_only(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    make_plugin("p", source=CLEAN_SOURCE)
    manager.discover()
    assert manager.auditor is None
    assert manager.auditor_id() == ""
    assert manager.audit("p").static_only


def test_deep_audit_from_the_environment_is_cached_per_model(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory, llm_env: LLMServer
) -> None:
    make_plugin("p", source=CLEAN_SOURCE)
    deep = _reopen(plugins_dir, state_dir)
    assert deep.auditor_id() == "openai:scripted"
    result = deep.audit("p")
    assert result.model_id == "openai:scripted"
    assert result.canary_status is CanaryStatus.OK
    assert deep.audit("p") == result
    assert len(llm_env.exchanges) == 1, "the cached audit is used"
    fresh = deep.audit("p", fresh=True)
    assert len(llm_env.exchanges) == 2
    assert fresh.model_id == "openai:scripted"
    assert deep.get_cached_audit("p") == fresh
    assert deep.get_plugin("p").audit == fresh  # type: ignore[union-attr]
    [logged, *_] = deep.store.decisions("p")
    assert (logged.action, logged.detail) == ("audit", "risk LOW (openai:scripted, canaries OK)")
    deep.close()
    # Another auditor (here: none) never reuses this model's audit, and vice versa.
    static = PluginManager(plugins_dir, state_dir=state_dir, auditor=None)
    static.discover()
    assert static.get_cached_audit("p") is None
    assert static.audit("p").static_only
    static.close()
    again = _reopen(plugins_dir, state_dir)
    assert again.get_cached_audit("p") == fresh
    again.close()


def test_a_failed_model_is_used_for_now_but_not_cached(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory, llm_env: LLMServer
) -> None:
    make_plugin("p", source=CLEAN_SOURCE)
    llm_env.script(*(Reply(status=503) for _ in range(4)))
    first = PluginManager(
        plugins_dir,
        state_dir=state_dir,
        auditor=OpenAIProvider(
            ProviderSettings(kind=ProviderKind.OPENAI, model="scripted", base_url=llm_env.url),
            sleep=lambda _: None,
        ),
    )
    first.discover()
    result = first.audit("p")
    assert result.static_only
    assert "HTTP 503" in result.fallback_reason
    assert first.get_plugin("p").audit == result  # type: ignore[union-attr]
    assert first.get_cached_audit("p") is None
    # It fails closed: HIGH is above the default policy, and the refusal says what to do.
    refused = first.approve("p")
    assert not refused
    assert "HIGH risk, above the policy's max_risk_level MEDIUM" in refused.reason
    assert "the LLM auditor failed" in refused.reason
    assert "`caplet approve p --static-only`" in refused.reason
    # The operator can choose a static-only audit for this one approval.
    chosen = first.audit("p", static_only=True)
    assert chosen.static_only
    assert chosen.risk_level is RiskLevel.LOW
    assert chosen.summary.startswith("static-only by choice (openai:scripted not consulted)")
    assert first.approve("p")
    assert first.get_cached_audit("p") is None, "a chosen static-only audit is not cached"
    first.close()
    second = _reopen(plugins_dir, state_dir)
    assert second.get_plugin("p").audit is None  # type: ignore[union-attr]
    assert second.audit("p").canary_status is CanaryStatus.OK, "the model is asked again"
    second.close()


def test_compromised_audit_refuses_approval_and_says_why(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory, llm_env: LLMServer
) -> None:
    make_plugin("p", source=CLEAN_SOURCE)
    llm_env.script(obedient)
    m = _reopen(plugins_dir, state_dir)
    assert m.audit("p").risk_level is RiskLevel.CRITICAL
    outcome = m.approve("p")
    assert not outcome
    assert "AUDITOR COMPROMISED" in outcome.reason
    assert "CRITICAL risk, above the policy's max_risk_level MEDIUM" in outcome.reason
    assert "review the audit report (`caplet audit p --verbose`)" in outcome.reason
    assert "declare the capability" not in outcome.reason
    enabled = m.enable("p", consent=True)
    assert not enabled
    assert "AUDITOR COMPROMISED" in enabled.reason
    m.close()


def test_enable_runs_the_deep_audit_when_none_is_cached(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory, llm_env: LLMServer
) -> None:
    make_plugin("p", source=CLEAN_SOURCE)
    m = _reopen(plugins_dir, state_dir)
    assert m.enable("p", consent=True)
    assert len(llm_env.exchanges) == 1
    assert m.get_plugin("p").audit.model_id == "openai:scripted"  # type: ignore[union-attr]
    m.close()


def test_bad_llm_settings_do_not_break_discovery_but_stop_audits(
    manager: PluginManager, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_plugin("p", source=CLEAN_SOURCE)
    monkeypatch.setenv("CAPLET_LLM_PROVIDER", "gemini")
    assert manager.discover() == 1
    with pytest.raises(AuditConfigError, match="CAPLET_LLM_PROVIDER='gemini' is not a provider"):
        manager.audit("p")


def test_a_passed_auditor_is_used_and_left_open(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory, llm: LLMServer
) -> None:
    make_plugin("p", source=CLEAN_SOURCE)
    provider = OpenAIProvider(
        ProviderSettings(kind=ProviderKind.OPENAI, model="own", base_url=llm.url)
    )
    m = PluginManager(plugins_dir, state_dir=state_dir, auditor=provider)
    m.discover()
    assert m.auditor is provider
    assert m.audit("p").model_id == "openai:own"
    m.close()
    llm.script(Reply("still open"))
    assert provider.complete("s", "u") == "still open"
    provider.close()


def test_a_skipped_plugin_is_named_with_why_it_was_skipped(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    """Issue 15: approving a plugin whose folder failed to load said only "no plugin named"."""
    folder = make_plugin("noentry")
    (folder / "plugin.py").unlink()
    with PluginManager(plugins_dir, state_dir=state_dir) as manager:
        manager.discover()
        with pytest.raises(PluginNotFoundError) as caught:
            manager.require_plugin("noentry")
    assert str(caught.value).startswith("plugin 'noentry' was skipped: ")
    assert "entry: 'plugin.py' does not exist in" in str(caught.value)


def test_enabling_the_same_content_again_reads_its_manifest_once(
    manager: PluginManager, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_plugin("p")
    manager.discover()
    reads: list[Path] = []

    def spy(plugin_dir: Path, *, allow_broad: bool = False) -> Manifest:
        reads.append(plugin_dir)
        return load_manifest(plugin_dir, allow_broad=allow_broad)

    monkeypatch.setattr("caplet._host._manager_state.load_manifest", spy)
    for _ in range(3):
        assert manager.enable("p", consent=True)
        manager.disable("p")
    assert len(reads) == 1


def test_a_changed_manifest_is_read_again_from_the_new_snapshot(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    # The parsed manifest is kept by the snapshot's hash: a changed
    # plugin.toml is a new hash, never the manifest read before.
    directory = make_plugin("p")
    manager.discover()
    assert manager.enable("p", consent=True)
    manager.disable("p")
    manifest = directory / "plugin.toml"
    manifest.write_text(manifest.read_text().replace("Test plugin p.", "Changed."))
    assert manager.enable("p", consent=True)
    assert manager.require_plugin("p").manifest.description == "Changed."


def test_the_worker_identity_is_looked_up_once_per_policy(
    manager: PluginManager, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_plugin("p")
    manager.discover()
    lookups: list[tuple[int | None, int | None]] = []

    def spy(uid: int | None = None, gid: int | None = None) -> WorkerIdentity:
        lookups.append((uid, gid))
        return worker_identity(uid, gid)

    monkeypatch.setattr("caplet._host._manager_state.worker_identity", spy)
    for _ in range(3):
        assert manager.enable("p", consent=True)
        manager.disable("p")
    assert lookups == [(manager.policy.worker_uid, manager.policy.worker_gid)]


def test_approve_refuses_content_other_than_the_one_shown(
    manager: PluginManager, make_plugin: PluginFactory
) -> None:
    """Red-team round 4: what a person was shown is what gets approved, or nothing."""
    directory = make_plugin("swapper")
    manager.discover()
    shown = manager.audit("swapper").content_hash
    (directory / "plugin.toml").write_text(
        (directory / "plugin.toml").read_text().replace('"1.0.0"', '"1.0.1"')
    )
    swapped = manager.audit("swapper").content_hash  # its audit is cached, as after `audit`
    assert swapped != shown
    refused = manager.approve("swapper", content_hash=shown)
    assert not refused
    assert refused.reason == (
        f"plugin 'swapper' changed since its audit was shown (of {shown}); nothing was "
        "approved: review it again once nothing writes its folder (caplet approve swapper)"
    )
    assert not manager.is_approved("swapper")
    assert manager.approve("swapper", content_hash=swapped)
    assert manager.is_approved("swapper")
