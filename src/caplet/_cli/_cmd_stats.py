"""``caplet stats``: per-plugin metrics of the hosts that ran plugins on this machine.

The numbers come from the snapshots hosts write to ``<state dir>/stats``
(:mod:`caplet._host._stats_file` says why files): a running ``caplet mcp``
or ``caplet shell`` rewrites its own every second, a finished command left
its last one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, cast

import typer
from rich.text import Text

from caplet._cli._command import Run, command
from caplet._cli._documents import JSONValue
from caplet._cli._options import Common
from caplet._cli._safe import plain
from caplet._cli._table import print_table
from caplet._host._metrics import LATENCY_BOUNDS_S
from caplet._host._stats_file import HostSnapshot, read_snapshots
from caplet._trust._paths import default_state_dir

__all__: list[str] = []


@command("stats", common=Common.DIRS)
def stats_command(
    run: Run,
    *,
    live: Annotated[
        bool, typer.Option("--live", help="Only hosts whose process is still running.")
    ] = False,
    plugin: Annotated[
        str | None, typer.Option("--plugin", metavar="NAME", help="Only this plugin's rows.")
    ] = None,
) -> None:
    """Show per-plugin metrics: calls, failures, breaker, latency, CPU, memory, budgets.

    Failures are counted by kind; brokered requests and bytes are counted too.

    One section per host process that ran plugins (caplet mcp, caplet shell, an
    application's PluginHost, one-off commands), running ones first; a running
    host's numbers are at most a second old (policy metrics.publish_s).
    docs/metrics.md explains every number.
    """
    state_dir = run.options.state_dir or default_state_dir()
    snapshots = [s for s in read_snapshots(state_dir) if s.live or not live]
    documents: list[JSONValue] = []
    for snapshot in snapshots:
        rows = [p for p in snapshot.plugins if plugin is None or p.get("plugin") == plugin]
        documents.append(cast(JSONValue, {**snapshot.to_json(), "plugins": rows}))
    run.out.emit({"ok": True, "state_dir": str(state_dir), "hosts": documents})
    if run.as_json:
        return
    if not snapshots:
        run.out.say(
            plain(
                f"no metrics in {state_dir / 'stats'}: no host has run plugins with this state "
                "directory yet (or metrics are off: policy metrics.enabled)"
            )
        )
        return
    for snapshot in snapshots:
        _print_host(run, snapshot, plugin)


def _print_host(run: Run, snapshot: HostSnapshot, only: str | None) -> None:
    state = "running" if snapshot.live else "ended"
    title = Text.assemble(
        (f"pid {snapshot.pid} ", "bold"),
        plain(snapshot.command),
        f" ({state}; updated {_ago(snapshot)})",
    )
    rows: list[Sequence[Text | str]] = []
    for entry in snapshot.plugins:
        if only is not None and entry.get("plugin") != only:
            continue
        rows.append(_row(entry))
    if not rows:
        run.out.say(title)
        run.out.say(plain("  no plugin calls"))
        return
    print_table(
        run.out.console,
        title,
        (
            "plugin",
            "calls",
            "failures",
            "breaker",
            "latency p50 / p99",
            "CPU s",
            "peak MiB",
            "broker req (ok/denied)",
            "broker bytes",
            "budget",
        ),
        rows,
    )


def _number(value: object) -> float:
    """A count or an amount from a snapshot; 0 for anything else (a damaged or foreign
    file must not end in a traceback)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0


def _table(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _row(entry: Mapping[str, Any]) -> list[Text | str]:
    """One plugin's cells. Every text from the file goes through ``plain`` (no escape
    sequence reaches the terminal) and every number through :func:`_number`."""
    failures = _table(entry.get("failures"))
    counts = _table(entry.get("latency")).get("counts")
    counts = [int(_number(c)) for c in counts] if isinstance(counts, list) else []
    requests = _table(entry.get("broker_requests"))
    sent = _table(entry.get("broker_bytes"))
    spent = [
        f"{name} {_number(values.get('used')):g}/{_number(values.get('limit')):g}"
        for name, values in _table(entry.get("budget")).items()
        if isinstance(values, Mapping) and _number(values.get("limit"))
    ]
    return [
        plain(str(entry.get("plugin", "?"))),
        f"{_number(entry.get('calls')):.0f}",
        plain(", ".join(f"{kind} {_number(count):.0f}" for kind, count in failures.items()))
        if failures
        else "-",
        plain(str(entry.get("breaker", "?"))),
        f"{_quantile(counts, 0.5)} / {_quantile(counts, 0.99)}",
        f"{_number(entry.get('cpu_s')):.2f}",
        f"{_number(entry.get('peak_memory_bytes')) / 2**20:.1f}",
        f"{_number(requests.get('allowed')):.0f}/{_number(requests.get('denied')):.0f}",
        f"{sum(_number(v) for v in sent.values()):.0f}",
        plain("; ".join(spent)) if spent else "-",
    ]


def _quantile(counts: Sequence[int], q: float) -> str:
    """The bucket bound below which a fraction ``q`` of calls fell (``≤ 250 µs``)."""
    total = sum(counts)
    if not total:
        return "-"
    seen = 0
    for index, count in enumerate(counts):
        seen += count
        if seen >= q * total:
            if index >= len(LATENCY_BOUNDS_S):
                return f"> {LATENCY_BOUNDS_S[-1]:g} s"
            return f"≤ {_duration(LATENCY_BOUNDS_S[index])}"
    return "-"


def _duration(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:g} ms"
    return f"{seconds:g} s"


def _ago(snapshot: HostSnapshot) -> str:
    import time

    seconds = max(time.time() - snapshot.updated_at, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"
