"""The shell's ``/plugin enable|disable|approve|unapprove|audit`` flows.

Seed 000's flows on caplet's host (the shell's module docstring tells them
in full): the approved fast path re-checked rather than trusted, the full
flow's audit, consent request and confirmation, configuration, and the
separate, persistent approval. Kept apart from the REPL loop
(:mod:`caplet._cli._shell`), which parses a command and hands it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rich.console import Console
from rich.text import Text

from caplet._audit._model import AuditResult, Verdict
from caplet._cli._render import (
    default_glob,
    glob_lines,
    grant_summary,
    print_audit,
    risk_text,
    show_consent,
    trust_text,
)
from caplet._cli._safe import plain, print_entries, print_wrapped
from caplet._config._coerce import parse_inline
from caplet._config._prompt import Prompter
from caplet._display import listed, safe_line
from caplet._findings import RiskLevel
from caplet._host._agent_text import shown_agent_text
from caplet._host._consent import Consent, changed_while_shown
from caplet._host._defaults import configured_reach, default_reach
from caplet._host._host import PluginHost
from caplet._host._policy import TrustTier
from caplet._host._program_reach import default_program_reach
from caplet._host._records import PluginInfo
from caplet._suggest import did_you_mean

__all__ = ["Confirm", "PluginFlows", "ShellUsageError"]


class Confirm(Protocol):
    """Asks the person a yes/no question (``yes`` answers it without asking)."""

    def __call__(self, question: str, *, yes: bool) -> bool: ...


class ShellUsageError(Exception):
    """A command typed wrongly: the shell prints it and carries on."""


class PluginFlows:
    """What ``/plugin`` does to the plugins of one host.

    ``confirm(question, yes=...)`` asks the person (the shell's own prompt,
    never recorded in its history); ``prompter`` asks for configuration.
    """

    def __init__(
        self,
        host: PluginHost,
        console: Console,
        err: Console,
        *,
        prompter: Prompter | None,
        confirm: Confirm,
    ) -> None:
        self.host = host
        self.console = console
        self.err = err
        self.prompter = prompter
        self._confirm = confirm

    # -- /plugin enable -----------------------------------------------------------------------

    def enable(self, name: str, entries: Sequence[str], *, yes: bool) -> bool:
        # Seed step 1: re-discover, in case the folder was just created.
        self.host.discover()
        info = self._resolve(name)
        refusal = self._blocked(info)
        if refusal:
            return self._refused(refusal)
        if info.enabled:
            self._say(f"{name} is already enabled: reconfiguring it")
            return self._configure_and_enable(info, entries)
        fast, why = self._fast_path(info)
        if fast:
            self._say(why, "green")
            return self._configure_and_enable(info, entries)
        if why:
            self._say(why, "yellow")
        consent: bool | Consent = False
        audit = self._audit(info)
        request = self.host.consent_request(name)
        if request is not None:
            # Not approved: the confirmation below is the consent (issue 14), for
            # exactly the content shown.
            # The entries are applied after the question: the reach shown counts them.
            given = {**info.config, **dict(parse_inline(entries))}
            show_consent(self.console, request, configured_reach(info.manifest, given))
            audit = request.audit
            shown = request.content_hash
            consent = lambda asked: asked.content_hash == shown  # noqa: E731
        else:
            print_audit(self.console, audit)
        if audit.risk_level.order >= RiskLevel.HIGH.order or audit.verdict is Verdict.REJECT:
            self._say(
                f"warning: {name} was audited {audit.risk_level.value} risk "
                f"(recommendation {audit.verdict.value}); review the findings above",
                "bold red",
            )
        if not self._confirm(f"Enable {name} {info.version} for this session?", yes=yes):
            self._say(f"{name} was not enabled")
            return False
        return self._configure_and_enable(info, entries, consent=consent)

    def _blocked(self, info: PluginInfo) -> str:
        """Why ``info`` cannot be enabled whatever is answered ("" when it can)."""
        inert = self.host.manager.inert_reason(info.name)
        if inert:
            return inert
        if info.quarantine is not None:
            return (
                f"plugin {info.name!r} is quarantined ({info.quarantine.reason}); release it "
                f"with `caplet release {info.name}` after fixing the cause"
            )
        return ""

    def _fast_path(self, info: PluginInfo) -> tuple[bool, str]:
        """Whether the approved fast path applies, and the message saying why (or why not).

        The stored approval is re-checked, not trusted: its hash against the
        content now, its stored risk and verdict, and the latest cached audit.
        """
        name = info.name
        manager = self.host.manager
        if manager.locked:
            return True, f"{name} is pinned in {manager.lockfile_path}: skipping the audit"
        approval = info.approval
        if approval is None:
            return False, ""
        current = manager.current_hash(name)
        if approval.content_hash != current:
            return False, (
                f"{name} was approved at {approval.content_hash}, but its content is now "
                f"{current}: the approval no longer applies; auditing it again"
            )
        if info.tier is TrustTier.UNTRUSTED:
            return False, (
                f"{name} is approved but untrusted ({info.signature.detail}): auditing it again"
            )
        limit = self.host.policy.max_risk_level
        stored = approval.risk_level
        if (
            stored.order >= RiskLevel.HIGH.order
            or stored.order > limit.order
            or approval.verdict is Verdict.REJECT
        ):
            return False, (
                f"{name} is approved, but its stored risk is {stored.value} (recommendation "
                f"{approval.verdict.value}, policy maximum {limit.value}): showing the audit again"
            )
        cached = manager.get_cached_audit(name, current)
        if cached is not None and (
            cached.risk_level.order >= RiskLevel.HIGH.order or cached.verdict is Verdict.REJECT
        ):
            return False, (
                f"{name} is approved, but its latest audit says {cached.risk_level.value} risk "
                f"(recommendation {cached.verdict.value}): showing the audit again"
            )
        return True, (
            f"{name} is approved (risk {stored.value}, recommendation {approval.verdict.value}): "
            "skipping the audit"
        )

    def _configure_and_enable(
        self, info: PluginInfo, entries: Sequence[str], *, consent: bool | Consent = False
    ) -> bool:
        name = info.name
        if entries:
            # Keys only: a value may be a secret.
            keys = ", ".join(e.partition("=")[0].strip() for e in entries)
            self._say(f"config overrides: {keys}")
        outcome = self.host.enable(name, entries, prompter=self.prompter, consent=consent)
        if not outcome:
            return self._refused(outcome.reason)
        enabled = self.host.manager.require_plugin(name)
        modules = ", ".join(f"host.{m.name}" for m in enabled.manifest.modules)
        self._say(
            f"{name} {enabled.version}: {outcome.reason}; guest code can import {modules}",
            "green",
        )
        if not enabled.approved and not self.host.manager.locked:
            self._say(
                f"{name} is enabled for this session only and is not approved; "
                f"/plugin approve {name} lets the next session skip the audit",
                "dim",
            )
        return True

    # -- the other subcommands ----------------------------------------------------------------

    def disable(self, name: str) -> bool:
        self._resolve(name)
        outcome = self.host.disable(name)
        if not outcome:
            return self._refused(outcome.reason)
        also = f" (also disabled: {', '.join(outcome.affected)})" if outcome.affected else ""
        self._say(f"{outcome.reason}{also}", "green")
        return True

    def approve(self, name: str, *, yes: bool) -> bool:
        info = self._resolve(name)
        current = self.host.manager.current_hash(name)
        if self.host.is_approved(name):
            self._say(f"{name} is already approved at {current}")
            return True
        audit = self._audit(info)
        # The audited content's manifest, or refused; not the plugin's view, which while
        # it is enabled is the content it runs, not the folder's (steer31).
        manifest = self.host.manager.reviewed_manifest(name, audit.content_hash)
        if manifest is None:
            return self._refused(changed_while_shown(name, audit.content_hash))
        self._say(f"Approve {name} {manifest.version}", "bold")
        print_audit(self.console, audit)
        # What the approval vouches for before the agent (textpin; never shown here
        # before steer22), then the grant, last, right above the question: the report and
        # the agent text are the plugin's and its model's, as long as they make them.
        self._say("  the agent reads (an approval pins it; a change needs consent):")
        print_entries(self.console, shown_agent_text(manifest, whole=True))
        declared = listed(c.declared for c in manifest.capabilities)
        self._grant(f"  capabilities: {declared or 'none'}")
        for line in glob_lines(manifest.capabilities):
            self._grant(f"  which reaches: {line}")  # what a glob grants (glob32)
        for template, reach in default_reach(manifest):
            shown = (
                "nothing until the operator sets a value"
                if reach is None
                else listed([reach]) + default_glob(reach, template)
            )
            self._grant(f"  by default: {safe_line(template)} -> {shown}")
        # What each proc.exec program brings (its #! interpreter, its loader), which the
        # approval pins: shown, and approved only while it is still that (attack21).
        programs = default_program_reach(manifest)
        for line in programs:
            self._grant(f"  runs: {line}")
        if summary := grant_summary(manifest.capabilities):
            self._grant(f"  {summary}")  # last, above the question (steer32)
        question = f"Approve {name} {manifest.version} with these capabilities?"
        if not self._confirm(question, yes=yes):
            self._say(f"{name} was not approved")
            return False
        outcome = self.host.approve(
            name, content_hash=audit.content_hash, programs=programs, manifest=manifest
        )
        if not outcome:
            return self._refused(outcome.reason)
        self._say(f"approved: {outcome.reason}", "green")
        self._say(
            "the approval persists across sessions until the plugin's content changes or "
            f"you run /plugin unapprove {name}",
            "dim",
        )
        return True

    def unapprove(self, name: str) -> bool:
        info = self._resolve(name)
        outcome = self.host.unapprove(name)
        if not outcome:
            return self._refused(outcome.reason)
        self._say(outcome.reason, "green")
        if info.enabled:
            self._say(f"{name} stays enabled for this session", "dim")
        return True

    def audit_command(self, name: str, *, fresh: bool, verbose: bool) -> bool:
        info = self._resolve(name)
        audit = self._audit(info, fresh=fresh)
        print_audit(self.console, audit, verbose=verbose)
        self.console.print(Text("  trust: ").append_text(trust_text(info)), soft_wrap=True)
        return audit.verdict is not Verdict.REJECT

    # -- helpers ------------------------------------------------------------------------------

    def _resolve(self, name: str) -> PluginInfo:
        """The plugin called ``name``; re-discovers once before giving up."""
        info = self.host.get_plugin(name)
        if info is None:
            self.host.discover()
            info = self.host.get_plugin(name)
        if info is None:
            hint = did_you_mean(name, self.host.manager.names())
            raise ShellUsageError(
                f"no plugin named {name!r} in {self.host.manager.plugins_dir}{hint}; "
                "/plugins lists the discovered plugins"
            )
        return info

    def _audit(self, info: PluginInfo, *, fresh: bool = False) -> AuditResult:
        """The audit of the current content: cached, or run now (saying how)."""
        manager = self.host.manager
        cached = None if fresh else manager.get_cached_audit(info.name)
        if cached is not None:
            line = plain(f"{info.name}: the cached audit of this content (")
            self.console.print(line.append_text(risk_text(cached)).append(")"), soft_wrap=True)
            return self.host.audit(info.name)
        model = manager.auditor_id()
        how = (
            f"static scan and deep audit by {model}"
            if model
            else "static scan only (no LLM auditor configured; see CAPLET_LLM_*)"
        )
        self._say(f"Auditing {info.name} {info.version}: {how} ...")
        return self.host.audit(info.name, fresh=fresh)

    # Messages quote plugin versions, reasons and errors: escaped, never markup.

    def _say(self, message: str, style: str = "") -> None:
        self.console.print(plain(message, style, multiline=True), soft_wrap=True)

    def _grant(self, line: str) -> None:
        """A line of the grant, which quotes the plugin's capabilities: wrapped with every
        wrapped line indented, never at the margin where caplet's lines start (steer37)."""
        print_wrapped(self.console, line)

    def _refused(self, reason: str) -> bool:
        self.err.print(plain(f"refused: {reason}", "bold red", multiline=True), soft_wrap=True)
        return False
