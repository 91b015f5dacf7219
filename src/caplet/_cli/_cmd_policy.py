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
from caplet._host._policy_file import PolicySetting, withheld_warning

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
    allow: Annotated[
        bool,
        typer.Option(
            "--allow",
            help="Allow the policy file found beside the plugins directory, as it is now, to "
            "loosen the defaults (read it first; a change needs allowing again).",
        ),
    ] = False,
) -> None:
    """Show the effective policy: each value, where it came from, and what loosens the defaults.

    The policy is caplet.toml (or pyproject.toml's [tool.caplet]) beside the
    plugins directory, or the file --policy or CAPLET_POLICY names, with the
    policy flags of this command line on top (--allow-network, --set ...).
    Every value that allows more than the default is marked and explained;
    a host started on such a policy logs the same lines. A file found beside the
    plugins directory (a project's, not named by you) that loosens anything is
    not applied until you allow its content with --allow.
    """
    if allow:
        from caplet._host._policy_file import allow_found_policy

        path, record = allow_found_policy(run.options.plugins_dir, file=run.options.policy)
        run.out.emit({"ok": True, "allowed": str(path), "record": str(record)})
        run.out.say(
            plain(
                f"allowed {path} as it is now: its loosenings apply; a change to it needs "
                "allowing again",
                "green",
            )
        )
        return
    effective = run.policy()
    settings = [s for s in effective.settings if not changed or s.value != s.default]
    loosened = effective.loosened
    run.out.emit(
        {
            "ok": True,
            "file": None if effective.file is None else str(effective.file),
            "settings": [_setting_json(s) for s in settings],
            "loosened": [_setting_json(s) for s in loosened],
            "withheld": None
            if effective.withheld is None
            else {
                "file": str(effective.withheld[0]),
                "loosens": [_setting_json(s) for s in effective.withheld[1]],
            },
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
    if effective.withheld is not None:
        run.out.say(plain(withheld_warning(effective.withheld), "bold yellow"))
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
