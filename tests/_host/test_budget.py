"""Budgets: per-plugin CPU and brokered traffic per window, refused with when it reopens."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from caplet import BudgetExceededError, PluginHost, Policy, PolicyError, load_policy
from caplet._broker._model import BrokerDecision
from caplet._host._budget import BudgetLimits, BudgetPolicy, PluginBudget
from caplet._host._metrics import OTHER, MetricsSettings
from tests.conftest import PluginFactory, write_policy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _budget(clock: Clock, **limits: float) -> PluginBudget:
    values = {"window_s": 60.0, "cpu_s": 0.0, "broker_requests": 0, "broker_bytes": 0}
    values.update(limits)
    return PluginBudget(
        "fetch",
        BudgetLimits(
            values["window_s"],
            values["cpu_s"],
            int(values["broker_requests"]),
            int(values["broker_bytes"]),
        ),
        clock=clock,
        wall=lambda: 0.0,
    )


def test_a_spent_budget_refuses_until_its_window_reopens() -> None:
    clock = Clock()
    budget = _budget(clock, broker_requests=3)
    budget.admit()
    assert budget.charge("broker_requests", 2) is None
    budget.admit()
    clock.now += 20
    assert budget.charge("broker_requests", 1) == "broker_requests", "spent: said once"
    assert budget.charge("broker_requests", 1) is None
    with pytest.raises(BudgetExceededError) as refused:
        budget.admit()
    error = refused.value
    assert (error.plugin, error.budget, error.limit, error.window_s) == (
        "fetch",
        "broker_requests",
        3.0,
        60.0,
    )
    assert error.used == 4
    assert error.reopens_in_s == pytest.approx(40.0)
    message = str(error)
    assert message.startswith("plugin 'fetch': its broker_requests budget is spent")
    assert "4 requests used of 3 requests in the current 60 s window" in message
    assert "reopens in 40 s" in message
    assert "budget.plugins.fetch.broker_requests" in message
    clock.now += 40
    budget.admit()  # a new window: everything forgiven
    assert budget.used()["broker_requests"] == 0


def test_each_budget_counts_only_its_own_resource() -> None:
    clock = Clock()
    budget = _budget(clock, cpu_s=1.5, broker_bytes=100)
    budget.charge("broker_requests", 1000)  # no request budget: never spent
    budget.admit()
    budget.charge("cpu_s", 1.0)
    budget.admit()
    assert budget.charge("cpu_s", 0.6) == "cpu_s"
    with pytest.raises(BudgetExceededError, match=r"1\.6 CPU seconds used of 1\.5 CPU seconds"):
        budget.admit()
    assert budget.used()["broker_bytes"] == 0
    assert budget.reopens_in() == pytest.approx(60.0)


def test_budget_policy_overrides_per_plugin() -> None:
    policy = BudgetPolicy(
        cpu_s=5.0,
        window_s=600.0,
        plugins=cast(Any, {"fetch": {"cpu_s": 0.0, "broker_requests": 9}}),  # as TOML has it
    )
    assert policy.limits("other") == BudgetLimits(600.0, 5.0, 0, 0)
    assert policy.limits("fetch") == BudgetLimits(600.0, 0.0, 9, 0)
    assert not BudgetPolicy().limits("any").active
    hash(Policy(budget=policy))  # a policy stays hashable with its overrides


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({"cpu_s": -1}, "budget.cpu_s"),
        ({"window_s": 0}, "budget.window_s"),
        ({"broker_bytes": True}, "budget.broker_bytes"),
        ({"plugins": {"Not A Name": {"cpu_s": 1}}}, "budget.plugins"),
        ({"plugins": {"fetch": {"cpu": 1}}}, "budget.plugins"),
    ],
)
def test_bad_budgets_are_refused_naming_the_field(budget: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError, match=field.replace(".", r"\.")):
        Policy(budget=cast(Any, budget))


def test_a_policy_file_that_loosens_a_budget_says_so(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    write_policy(
        tmp_path / "caplet.toml",
        "[budget]\ncpu_s = 5\nbroker_requests = 100\n"
        "[budget.plugins.fetch]\ncpu_s = 0\nbroker_requests = 500\n"
        "[budget.plugins.tight]\ncpu_s = 1\n",
    )
    effective = load_policy(plugins)
    settings = {s.field: s for s in effective.settings}
    assert settings["budget.plugins.fetch.cpu_s"].source == str(tmp_path / "caplet.toml")
    loosened = {s.field: s.loosens for s in effective.loosened}
    assert loosened == {
        "budget.plugins.fetch.cpu_s": "removes plugin 'fetch''s cpu_s budget (5)",
        "budget.plugins.fetch.broker_requests": (
            "gives plugin 'fetch' a larger broker_requests budget than 100"
        ),
    }, "setting budgets tightens; only removing or raising one for a plugin loosens"


def test_a_host_refuses_calls_once_a_cpu_budget_is_spent(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "burner",
        source=(
            "import time\n"
            "def create_functions(config):\n"
            "    def burn(seconds):\n"
            "        start = time.process_time()\n"
            "        while time.process_time() - start < seconds:\n"
            "            pass\n"
            "        return 'done'\n"
            "    return {'main': {'burn': burn}}\n"
        ),
        modules='[modules.main]\nfunctions = ["burn"]\n',
    )
    clock = Clock()
    with PluginHost(
        plugins_dir,
        state_dir=state_dir,
        policy=Policy(budget=BudgetPolicy(cpu_s=0.2, window_s=100)),
        clock=clock,
        auditor=None,
    ) as host:
        assert host.enable("burner", consent=True)
        assert host.call("burner", "main.burn", 0.1) == "done"
        assert host.call("burner", "main.burn", 0.15) == "done"  # 0.25 of 0.2: now spent
        with pytest.raises(BudgetExceededError) as refused:
            host.call("burner", "main.burn", 0.0)
        assert refused.value.budget == "cpu_s"
        assert "reopens in 100 s" in str(refused.value)
        assert host.breaker("burner").failures == 0, "a budget refusal is not a failure"
        decisions = [(d.action, d.target) for d in host.manager.store.decisions("burner")]
        assert ("budget", "cpu_s") in decisions, "the budget running out is logged"
        assert ("budget", "main.burn") in decisions, "so is each refused call"
        clock.now += 100
        assert host.call("burner", "main.burn", 0.0) == "done", "the window reopened"
        (stats,) = host.observer.stats()
        assert stats.failures == {"budget": 1}
        assert stats.budget["cpu_s"][1] == 0.2


ECHO = (
    "def create_functions(config):\n"
    "    def ok(value):\n"
    "        return value\n"
    "    return {'main': {'ok': ok}}\n"
)


def test_a_plugin_beyond_the_metrics_label_cap_keeps_its_budget(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    # metrics.max_plugins bounds the label set (the rest share "(other)"); it must not
    # take the budgets of the plugins beyond it with it: the budget is the plugin's, the
    # label only how its numbers are reported.
    for name in ("a-first", "b-over"):
        make_plugin(name, source=ECHO, modules='[modules.main]\nfunctions = ["ok"]\n')
    with PluginHost(
        plugins_dir,
        state_dir=state_dir,
        policy=Policy(
            metrics=MetricsSettings(max_plugins=1),
            budget=BudgetPolicy(broker_requests=2, window_s=100),
        ),
        clock=Clock(),
        auditor=None,
    ) as host:
        for name in ("a-first", "b-over"):
            assert host.enable(name, consent=True)
            assert host.call(name, "main.ok", 1) == 1
            for _ in range(2):
                host.observer.http(
                    BrokerDecision(0.0, name, "GET", "https://x.test/", True, "status 200")
                )
            with pytest.raises(BudgetExceededError) as refused:
                host.call(name, "main.ok", 1)
            assert refused.value.plugin == name
        stats = {s.plugin: s for s in host.observer.stats()}
    assert set(stats) == {"a-first", OTHER}, "the label set is still capped"
    assert stats[OTHER].calls == 2, "b-over's call and its refusal, under (other)"
    assert stats[OTHER].failures == {"budget": 1}
    assert stats[OTHER].broker_requests["allowed"] == 2
