"""``caplet policy``: the effective policy, where each value came from, and what loosens."""

from __future__ import annotations

import enum
from typing import Annotated

import typer
from rich.text import Text

from caplet._cli._command import Run, command
from caplet._cli._documents import JSONValue, jsonable
from caplet._cli._options import Common
from caplet._cli._safe import plain
from caplet._cli._table import Cell, print_table
from caplet._host._policy_file import PolicySetting

__all__: list[str] = []


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return ", ".join(_shown(v) for v in value) or "(none)"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if value is None:
        return "(unset)"
    return str(value)


def _setting_json(setting: PolicySetting) -> JSONValue:
    return {
        "field": setting.field,
        "value": jsonable(setting.value),
        "default": jsonable(setting.default),
        "source": setting.source,
        "loosens": setting.loosens or None,
    }


@command("policy", common=Common.PLUGINS_DIR | Common.POLICY | Common.POLICY_FLAGS | Common.JSON)
def policy_command(
    run: Run,
    *,
    changed: Annotated[
        bool, typer.Option("--changed", help="Only the values that are not the defaults.")
    ] = False,
) -> None:
    """Show the effective policy: each value, where it came from, and what loosens the defaults.

    The policy is caplet.toml (or pyproject.toml's [tool.caplet]) beside the
    plugins directory, or the file --policy or CAPLET_POLICY names, with the
    policy flags of this command line on top (--allow-network, --set ...).
    Every value that allows more than the default is marked and explained;
    a host started on such a policy logs the same lines.
    """
    effective = run.policy()
    settings = [s for s in effective.settings if not changed or s.value != s.default]
    loosened = effective.loosened
    run.out.emit(
        {
            "ok": True,
            "file": None if effective.file is None else str(effective.file),
            "settings": [_setting_json(s) for s in settings],
            "loosened": [_setting_json(s) for s in loosened],
        }
    )
    if run.as_json:
        return
    source = (
        plain(f"from {effective.file}")
        if effective.file is not None
        else Text(
            "no policy file: the defaults (caplet.toml beside the plugins directory, or "
            "--policy, sets it)"
        )
    )
    rows: list[list[Cell]] = [
        [
            plain(s.field),
            plain(_shown(s.value)),
            plain(s.source),
            plain(f"loosens: {s.loosens}", "yellow") if s.loosens else "",
        ]
        for s in settings
    ]
    print_table(
        run.out.console,
        Text.assemble("Policy ", source),
        ("field", "value", "source", "note"),
        rows,
    )
    if loosened:
        run.out.say(
            Text(
                f"{len(loosened)} value(s) loosen the defaults; each is logged when a host "
                "starts on this policy",
                style="bold yellow",
            )
        )
    else:
        run.out.say(Text("nothing loosens the defaults", style="green"))
