"""`caplet demo`: the main job, end to end, on the bundled example plugins.

The examples are copied into a temporary workspace and, unless a state
directory is given, a temporary state directory is used too: a demo must not
leave approvals behind in the user's real state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.text import Text

from caplet._cli._documents import JSONValue, jsonable
from caplet._cli._render import print_findings, print_plugins, risk_text
from caplet._cli._safe import plain, safe_markup
from caplet._errors import CapletError, PluginCallError
from caplet._host._host import PluginHost
from caplet._host._loading import LoadingRules

__all__ = ["bundled_examples", "run_demo"]


def bundled_examples() -> Path:
    """The example plugins: packaged in the wheel, or beside the source tree."""
    packaged = Path(str(resources.files("caplet"))) / "_examples" / "plugins"
    if packaged.is_dir():
        return packaged
    # Editable installs and source checkouts: src/caplet/_cli/_demo.py -> repo root.
    in_repo = Path(__file__).resolve().parents[3] / "examples" / "plugins"
    if in_repo.is_dir():
        return in_repo
    raise CapletError(
        "the bundled example plugins were not found (looked in the caplet package and the "
        "source tree); reinstall caplet from a complete checkout or wheel"
    )


@contextmanager
def _workspace(state_dir: Path | None) -> Iterator[tuple[Path, Path]]:
    root = Path(tempfile.mkdtemp(prefix="caplet-demo-"))
    try:
        plugins = root / "plugins"
        shutil.copytree(bundled_examples(), plugins, ignore=shutil.ignore_patterns("__pycache__"))
        yield plugins, state_dir if state_dir is not None else root / "state"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_demo(
    console: Console | None, *, state_dir: Path | None = None
) -> tuple[bool, list[JSONValue]]:
    """Run the demo; returns (everything behaved as expected, the steps as JSON)."""
    steps: list[JSONValue] = []

    def say(*parts: object) -> None:
        if console is not None:
            console.print(*parts)

    def step(name: str, ok: bool, **details: object) -> bool:
        steps.append({"step": name, "ok": ok, **{k: jsonable(v) for k, v in details.items()}})
        mark = Text("✓ ", style="green") if ok else Text("✗ ", style="red")
        # Values are results and reasons from plugins (bundled ones, but a copy on disk).
        lines = [name, *(f"    {k}: {v}" for k, v in details.items())]
        say(mark + Text("\n").join(plain(line) for line in lines))
        return ok

    with (
        _workspace(state_dir) as (plugins_dir, state),
        # The demo's plugins live in a private temporary copy, never in a lock
        # file: it runs unlocked even in CI, where locked mode is the default.
        PluginHost(plugins_dir, state_dir=state, loading=LoadingRules()) as host,
    ):
        say(
            f"[bold]caplet demo[/]: plugins copied to {safe_markup(str(plugins_dir))}, "
            f"state in {safe_markup(str(state))}"
        )
        count = host.discover()
        ok = step("discover", count >= 3, plugins=count, isolation=host.isolation)
        if console is not None:
            print_plugins(console, host.list_plugins(), host.manager.broken_plugins())

        # 1. A pure function plugin: audit, approve, enable, call.
        audit = host.audit("hello")
        say("hello audit: ", risk_text(audit))
        ok &= step("approve hello", bool(host.approve("hello")), risk=audit.risk_level.value)
        ok &= step("enable hello", bool(host.enable("hello")))
        answer = host.call("hello", "greet.say", "world")
        ok &= step(
            "call hello greet.say('world')",
            answer == "Hello, world!",
            result=answer,
            worker_pid=host.worker_pid("hello"),
            host_pid=os.getpid(),
        )

        # 2. A plugin with fs.read scoped by configuration.
        notes = plugins_dir.parent / "notes"
        notes.mkdir()
        (notes / "notes.md").write_text("caplet read this through fs-read.\n", encoding="utf-8")
        audit = host.audit("fs-read")
        say("fs-read audit: ", risk_text(audit))
        ok &= step("approve fs-read", bool(host.approve("fs-read")), risk=audit.risk_level.value)
        outcome = host.enable("fs-read", [f"root={notes}"])
        info = host.manager.require_plugin("fs-read")
        ok &= step(
            "enable fs-read root=<notes>",
            bool(outcome),
            capabilities=[str(c) for c in info.capabilities],
        )
        text = host.call("fs-read", "files.read_text", "notes.md")
        ok &= step(
            "call fs-read files.read_text('notes.md')",
            text.startswith("caplet read"),
            result=text.strip(),
        )
        try:
            host.call("fs-read", "files.read_text", "../plugins/hello/plugin.py")
            escaped = True
        except PluginCallError as exc:
            escaped = False
            say(plain(f"    refused by the plugin: {exc}", multiline=True))
        ok &= step("fs-read refuses a path outside its root", not escaped)

        # 3. A plugin the danger gate refuses.
        audit = host.audit("shell-out")
        if console is not None:
            print_findings(console, audit.findings, title="shell-out findings")
        approval = host.approve("shell-out")
        ok &= step("shell-out approval refused", not approval, reason=approval.reason)
        enabled = host.enable("shell-out")
        ok &= step("shell-out enable refused (danger gate)", not enabled, reason=enabled.reason)
        try:
            host.call("shell-out", "shell.run", "id")
            ran = True
        except CapletError:
            ran = False
        ok &= step("shell-out never ran", not ran)
    say("[bold green]demo passed[/]" if ok else "[bold red]demo failed[/]")
    return ok, steps
