"""`caplet info` shows each hook and whether it runs; `caplet emit` fires an event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from caplet._cli._app import app
from tests.conftest import PluginFactory

runner = CliRunner()

EVENT = "content:afterSave"

SOURCE = """
def create_functions(config):
    def handle(payload):
        return {"seen": payload}

    def boom(payload):
        raise RuntimeError("cannot index " + str(payload["id"]))

    return {"main": {"handle": handle, "boom": boom}}
"""


def run(*args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def subscriber(
    make_plugin: PluginFactory,
    name: str,
    *,
    handler: str = "handle",
    priority: int = 500,
    capability: str | None = None,
) -> None:
    table = f'[hooks."{EVENT}"]\nfunction = "main.{handler}"\npriority = {priority}\n'
    extra = ""
    if capability is not None:
        table += f'capability = "{capability}"\n'
        extra = f'capabilities = ["{capability}"]'
    make_plugin(
        name,
        source=SOURCE,
        extra=extra,
        modules=f'[modules.main]\nfunctions = ["handle", "boom"]\n{table}',
    )


@pytest.fixture
def cli(plugins_dir: Path, state_dir: Path) -> list[str]:
    return ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]


def test_info_shows_each_hook_with_its_state(make_plugin: PluginFactory, cli: list[str]) -> None:
    subscriber(make_plugin, "indexer", priority=20)
    subscriber(make_plugin, "mailer", capability="app:email.send")
    run("approve", "indexer", "--yes", *cli)
    document = run("info", "indexer", *cli)
    assert document["hooks"] == [
        {
            "plugin": "indexer",
            "event": EVENT,
            "target": "main.handle",
            "priority": 20,
            "capability": None,
            "description": "",
            "state": "idle",
            "reason": "not called while the plugin is discovered; called once enabled",
        }
    ]
    (mailer,) = run("info", "mailer", *cli)["hooks"]
    assert (mailer["state"], mailer["capability"], mailer["reason"]) == (
        "unapproved",
        "app:email.send",
        "not called: capability app:email.send not approved",
    )
    human = runner.invoke(app, ["info", "mailer", *cli], env={"COLUMNS": "200"})
    assert human.exit_code == 0, human.output
    assert (
        "hook content:afterSave -> main.handle (priority 500, needs app:email.send): "
        "not called: capability app:email.send not approved" in human.stdout
    )


def test_emit_calls_the_enabled_subscribers_in_order(
    make_plugin: PluginFactory, cli: list[str]
) -> None:
    subscriber(make_plugin, "second", priority=200)
    subscriber(make_plugin, "first", priority=100)
    subscriber(make_plugin, "idle")
    document = run(
        *("emit", EVENT, "--payload", '{"id": 5}', "--yes"),
        *("--enable", "second", "--enable", "first", *cli),
    )
    assert document["ok"] is True
    assert document["error_policy"] == "continue"
    assert [(c["plugin"], c["status"], c["value"]) for c in document["calls"]] == [
        ("first", "ok", {"seen": {"id": 5}}),
        ("second", "ok", {"seen": {"id": 5}}),
    ]
    assert document["subscribed_not_enabled"] == ["idle"]


def test_emit_exits_1_when_a_subscriber_fails_and_abort_stops_the_rest(
    make_plugin: PluginFactory, cli: list[str]
) -> None:
    subscriber(make_plugin, "failing", handler="boom", priority=1)
    subscriber(make_plugin, "fine", priority=2)
    enable = ["--enable", "failing", "--enable", "fine", "--yes"]
    document = run("emit", EVENT, "--payload", '{"id": 9}', *enable, *cli, code=1)
    assert "calls" in document, document  # exit 1 from the emit, not from an --enable
    assert [c["status"] for c in document["calls"]] == ["failed", "ok"]
    assert "cannot index 9" in document["calls"][0]["error"]
    aborted = run("emit", EVENT, "--payload", '{"id": 9}', "--abort", *enable, *cli, code=1)
    assert aborted["aborted_by"] == "failing"
    assert [c["status"] for c in aborted["calls"]] == ["failed", "not-run"]
    human = runner.invoke(app, ["emit", EVENT, "--payload", '{"id": 9}', "--abort", *enable, *cli])
    assert human.exit_code == 1
    assert "aborted by failing" in human.stdout


def test_emit_without_subscribers_suggests_the_event_a_plugin_uses(
    make_plugin: PluginFactory, cli: list[str]
) -> None:
    subscriber(make_plugin, "indexer")
    result = runner.invoke(app, ["emit", "content:aftersave", *cli], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "content:aftersave: no enabled plugin subscribes to it" in result.stdout
    assert (
        "no discovered plugin subscribes to content:aftersave (did you mean "
        "'content:afterSave'?)" in result.stdout
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["afterSave"],
            "invalid event name 'afterSave'; expected '<namespace>:<event>'",
        ),
        (
            [EVENT, "--payload", "{id: 1}"],
            "--payload '{id: 1}' is not JSON (Expecting property name enclosed in double quotes)",
        ),
    ],
)
def test_emit_usage_errors(cli: list[str], args: list[str], message: str) -> None:
    document = run("emit", *args, *cli, code=2)
    assert document["error"]["type"] == "UsageError"
    assert document["error"]["message"].startswith(message)
