"""Commands about one plugin's lifecycle: list, info, approve, unapprove, enable, disable,
release, new, demo."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.text import Text

from caplet._audit._model import STATIC_ONLY
from caplet._capabilities._lint import lint_composition
from caplet._cli._arguments import usable_text
from caplet._cli._command import EXIT_REFUSED, Out, Run, command
from caplet._cli._documents import (
    JSONValue,
    approved_review,
    audit_json,
    broken_json,
    globs_json,
    jsonable,
    plugin_json,
    when,
)
from caplet._cli._enabling import enable_plugin
from caplet._cli._options import Common, ConsentFlag, Name, StaticOnlyFlag
from caplet._cli._render import (
    default_glob,
    glob_lines,
    grant_summary,
    print_audit,
    print_findings,
    print_hook_statuses,
    print_plugins,
    risk_text,
    trust_text,
)
from caplet._cli._safe import plain, print_entries, print_wrapped
from caplet._display import listed, safe_line
from caplet._errors import ManifestError
from caplet._host._agent_text import shown_agent_text
from caplet._host._consent import changed_while_shown
from caplet._host._defaults import default_reach
from caplet._host._program_reach import default_program_reach
from caplet._host._records import Outcome, PluginInfo
from caplet._manifest._model import Manifest

__all__: list[str] = []


@command("list")
def list_command(run: Run) -> None:
    """List discovered plugins, their state, approval, risk and trust tier."""
    out = run.out
    host = run.host()
    plugins = host.list_plugins()
    broken = host.manager.broken_plugins()
    out.emit(
        {
            "ok": True,
            "plugins_dir": str(run.options.plugins_dir),
            "locked": host.manager.locked,
            "plugins": [{**plugin_json(p), "quarantine": jsonable(p.quarantine)} for p in plugins],
            "skipped": [broken_json(b) for b in broken],
        }
    )
    if run.as_json:
        return
    print_plugins(out.console, plugins, [])
    for info in plugins:
        if info.inert_reason:
            out.console.print(plain(info.inert_reason, multiline=True))
        if info.quarantine is not None:
            out.console.print(
                plain(
                    f"{info.name} quarantined since {when(info.quarantine.since)}: "
                    f"{info.quarantine.reason} (release it with "
                    f"`caplet release {info.name}`)",
                    multiline=True,
                )
            )


@command("info")
def info_command(run: Run, *, name: Name) -> None:
    """Show one plugin: manifest, capabilities, config schema, trust state."""
    out = run.out
    host = run.host()
    info = host.manager.require_plugin(name)
    document = plugin_json(info, detail=True)
    lint = lint_composition(info.manifest.capabilities)
    document["composition"] = [jsonable(f) for f in lint]
    programs = default_program_reach(info.manifest)
    document["programs"] = list(programs)
    document["isolation"] = host.isolation
    hooks = host.hook_status(name)
    document["hooks"] = [jsonable(status) for status in hooks]
    out.emit({"ok": True, **document})
    if run.as_json:
        return
    # Every value below is the manifest author's (or derived from the folder they
    # shipped): plain() escapes it and keeps it from being read as markup.
    m = info.manifest
    out.say(plain(m.name, "bold") + plain(f" {m.version}: {m.description}"))
    out.say(plain(f"  path:      {info.path}"))
    out.say(f"  hash:      {info.content_hash}")
    out.say(plain(f"  source:    {info.source}"))
    out.say("  trust:     ", trust_text(info))
    out.say(plain(f"  signature: {info.signature.detail}"))
    out.say(plain(f"  approved:  {_approved_words(info)}"))
    if info.inert_reason:
        out.say(plain(f"  inert:     {info.inert_reason}", "red", multiline=True))
    if info.audit:
        out.say("  audit:    ", risk_text(info.audit))
    for module in m.modules:
        out.say(plain(f"  module host.{module.name}: {', '.join(module.function_names)}"))
    _say_agent_text(out, m)
    print_hook_statuses(out.console, hooks)
    declared = listed(c.declared for c in m.capabilities) or "none"
    out.say(plain(f"  capabilities: {declared}"))
    _say_programs(out, programs)
    for field in m.config:
        default = "******" if field.secret and field.default is not None else field.default
        flags = " (always asked)" if field.always_prompt else ""
        about = f": {field.description}" if field.description else ""
        out.say(
            plain(f"  config {field.name}: {field.type.value}, default {default!r}{flags}{about}")
        )
    if lint:
        print_findings(out.console, lint, title="Capability composition")
    out.say(f"  isolation: {host.isolation}")


# -- approve / unapprove ---------------------------------------------------------------------------


@command("approve", common=Common.DIRS)
def approve_command(
    run: Run,
    *,
    name: Name,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    static_only: StaticOnlyFlag = False,
) -> None:
    """Show the audit, its canary status and the capabilities, then approve this content.

    --static-only approves on a static-only audit chosen for this run, when the
    configured model fails or is not wanted.
    """
    out = run.out
    host = run.host()
    host.manager.require_plugin(name)
    if static_only:
        audit = host.audit(name, static_only=True)
    else:
        audit = host.manager.get_cached_audit(name) or host.audit(name)
    # The manifest of the audited content: what is shown is what gets approved, or
    # nothing (content_hash and manifest below; red-team round 4). Not the plugin's view:
    # while enabled that is the content it runs, which need not be the folder's (steer31).
    manifest = host.manager.reviewed_manifest(name, audit.content_hash)
    if manifest is None:
        run.refused(Outcome(False, changed_while_shown(name, audit.content_hash)), {"name": name})
    lint = lint_composition(manifest.capabilities)
    # Approved only while they bring what is shown (attack21), as the content (round 4).
    programs = default_program_reach(manifest)
    if not run.as_json:
        out.say(plain(f"Approve {name} {manifest.version}", "bold"))
        print_audit(out.console, audit)
        _say_agent_text(out, manifest, whole=True)
        # The grant last, right above the question: the agent text is the plugin's, up to
        # a hundred lines and more on a terminal, and it pushed the capabilities (in the
        # audit report) off the screen the question was asked on (steer22).
        granted = listed(c.declared for c in manifest.capabilities)
        print_wrapped(out.console, f"  it will be granted:    {granted or 'none'}", "bold")
        # What a glob is granted as: said with the grant (steer31, glob32).
        for line in glob_lines(manifest.capabilities):
            print_wrapped(out.console, f"  which reaches:         {line}", "bold")
        # What the approval records for a templated capability (red-team finding 8).
        for declared, reach in default_reach(manifest):
            # Quoted when it holds a blank: "/tmp/x (read-only)" is one folder's name.
            shown = (
                "nothing until the operator sets a value"
                if reach is None
                else listed([reach]) + default_glob(reach, declared)
            )
            print_wrapped(out.console, f"  by default:            {declared} -> {shown}")
        _say_programs(out, programs)
        if summary := grant_summary(manifest.capabilities):
            # Last: a line per glob, template and program above pushed the count that
            # names the rare capability off the screen (steer32).
            print_wrapped(out.console, f"  {summary}", "bold")
    if not yes:
        if run.as_json or not sys.stdin.isatty():
            run.usage(
                "approving needs confirmation; pass --yes (with --json, or when stdin is not "
                "a terminal)"
            )
        # click writes the question as it is: escaped here.
        question = f"Approve {safe_line(name)} with these capabilities?"
        if not typer.confirm(question, default=False):
            raise typer.Exit(EXIT_REFUSED)
    outcome = host.approve(
        name, content_hash=audit.content_hash, programs=programs, manifest=manifest
    )
    document: dict[str, JSONValue] = {
        "name": name,
        "audit": audit_json(audit),
        "composition": [jsonable(f) for f in lint],
        "globs": globs_json(manifest.capabilities),
    }
    if not outcome:
        run.refused(outcome, document)
    document.update({"ok": True, "approval": jsonable(host.get_approval_record(name))})
    out.emit(document)
    out.say(Text("approved ", style="green") + plain(f"{name}: {outcome.reason}", multiline=True))


def _approved_words(info: PluginInfo) -> str:
    """Whether the content is approved and, if so, what reviewed it: a later version
    carries the approval over only on that review (steer33, steer35), so the operator
    is told which it is (steer37)."""
    if not info.approved:
        return "no"
    review = approved_review(info)
    if review is None:
        return "yes (what reviewed it was not recorded: caplet asks again for its next version)"
    if review == STATIC_ONLY:
        return "yes, on a static-only audit (no model read it)"
    return f"yes, on {review}'s audit"


def _say_programs(out: Out, programs: Sequence[str]) -> None:
    """The files each proc.exec program brings on this host, which the approval pins: a
    script's #! interpreter runs with it, and the plugin may run it too (round 19)."""
    for line in programs:
        if not out.as_json:
            print_wrapped(out.console, f"  runs:                  {line}")


def _say_agent_text(out: Out, manifest: Manifest, *, whole: bool = False) -> None:
    """What the approval vouches for that the agent reads (hints, descriptions, schemas):
    all of it, each entry whole, where the approval is given (``whole``, steer32)."""
    out.say(plain("  the agent reads (an approval pins it; a change needs consent):"))
    if not out.as_json:
        print_entries(out.console, shown_agent_text(manifest, whole=whole))


@command("unapprove", common=Common.DIRS)
def unapprove_command(run: Run, *, name: Name) -> None:
    """Remove a plugin's approval (it must be audited and approved again)."""
    run.finish(run.host().unapprove(name), name)


# -- enable / disable / release --------------------------------------------------------------------


@command("enable")
def enable_command(
    run: Run,
    *,
    name: Name,
    config: Annotated[
        list[str] | None, typer.Argument(help="key=value configuration entries.")
    ] = None,
    yes: ConsentFlag = False,
) -> None:
    """Configure and enable a plugin, starting its worker (enablement lasts for this process).

    Use it to check that a plugin enables with a given configuration; to call
    it in the same process use `caplet call --enable NAME k=v MODULE.FUNCTION`.
    A plugin that is not approved is enabled only with consent: its audit is
    shown and asked about on a terminal, or --yes; without either, exit 2.
    """
    host = run.host()
    enable_plugin(run, host, name, config or [], yes=yes)
    info = host.manager.require_plugin(name)
    run.out.emit(
        {"ok": True, "plugin": plugin_json(info, detail=True), "isolation": host.isolation}
    )
    run.out.say(
        Text("enabled ", style="green")
        + plain(f"{name} {info.version} (isolation: {host.isolation})")
    )


@command("disable", common=Common.DIRS)
def disable_command(run: Run, *, name: Name) -> None:
    """Disable a plugin and the plugins that require it (within this process).

    Enablement lasts for one process, so a plugin this command finds is never
    enabled: it says so and exits 0. Disabling matters inside one process:
    `caplet shell` (/plugin disable) and PluginHost.disable.
    """
    host = run.host()
    info = host.manager.require_plugin(name)
    if info.enabled:
        run.finish(host.disable(name), name)
        return
    reason = (
        f"plugin {name!r} is not enabled: enablement lasts for one process (caplet call, exec "
        "and emit take --enable), so there is nothing to disable between commands"
    )
    run.out.emit({"ok": True, "name": name, "enabled": False, "reason": reason})
    run.out.say(plain(reason))


@command("release", common=Common.DIRS)
def release_command(run: Run, *, name: Name) -> None:
    """Lift a plugin's quarantine (it stays disabled until enabled again).

    A plugin is quarantined when its circuit breaker trips too often; fix
    the cause first. Exits 1 when the plugin was not quarantined.
    """
    run.finish(run.host().release(name), name)


# -- demo / new ------------------------------------------------------------------------------------


@command("demo", common=Common.STATE_DIR | Common.JSON)
def demo_command(run: Run) -> None:
    """Run the whole job on the bundled example plugins: discover, scan, approve, enable, call."""
    from caplet._cli._demo import run_demo

    out = run.out
    ok, steps = run_demo(out.console if not run.as_json else None, state_dir=run.options.state_dir)
    out.emit({"ok": ok, "steps": steps}, failure="a step of the demo failed (see steps)")
    if not ok:
        raise typer.Exit(EXIT_REFUSED)


@command("new", common=Common.PLUGINS_DIR | Common.JSON)
def new_command(
    run: Run,
    *,
    name: Annotated[str, typer.Argument(help="Plugin name (kebab-case).", callback=usable_text)],
    example: Annotated[
        bool,
        typer.Option(
            "--example",
            help="Copy the plugin NAME caplet ships instead (fs-read, fs-write, fetch; hello, "
            "shell-out): to use as it is or to learn from.",
        ),
    ] = False,
) -> None:
    """Scaffold a new plugin folder that validates, scans clean and can be called.

    With --example, copy one of the plugins caplet ships into the plugins
    directory instead (the reference plugins fs-read, fs-write and fetch, and
    the examples of caplet demo).
    """
    from caplet._cli._scaffold import copy_bundled, scaffold

    plugins_dir = run.options.plugins_dir
    try:
        path = copy_bundled(plugins_dir, name) if example else scaffold(plugins_dir, name)
    except ManifestError as exc:
        if exc.field == "name":
            run.usage(str(exc))
        raise
    if example:
        run.out.emit({"ok": True, "name": name, "path": str(path)})
        run.out.say(plain(f"copied {name} to {path}; its README says how to use it"))
        return
    run.out.emit({"ok": True, "name": name, "path": str(path)})
    run.out.say(
        plain(
            f"created {path}; try: caplet call --plugins-dir {plugins_dir} "
            f"--enable {name} {name.replace('-', '_')}.hello '\"world\"'"
        )
    )
