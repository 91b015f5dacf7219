"""Enabling from the command line: inline configuration, consent, and the refusal of each.

``caplet enable``, and ``--enable`` of ``call``, ``exec`` and ``emit``, go
through :func:`enable_plugin`: inline ``k=v`` entries (a typo'd key is a
usage error), then consent for content nobody approved (issue 14), then the
library's enable.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

from caplet._cli._command import Out, Run, usage
from caplet._cli._render import show_consent
from caplet._cli._safe import plain
from caplet._config._coerce import unknown_keys_message
from caplet._display import safe_line
from caplet._host._consent import Consent, ConsentRequest
from caplet._host._host import PluginHost
from caplet._host._records import Outcome

__all__ = ["ask_consent", "enable_plugin", "looks_like_entry"]


def looks_like_entry(token: str) -> bool:
    """True for a ``key=value`` configuration entry (the key an identifier)."""
    key, sep, _ = token.partition("=")
    return bool(sep) and key.strip().isidentifier()


def enable_plugin(
    run: Run, host: PluginHost, name: str, entries: Sequence[str], *, yes: bool
) -> None:
    """Apply inline config (a typo'd key is a usage error), get consent, prompt, enable.

    A plugin with no approval of its current content needs consent (issue
    14): the audit, its capabilities and the composition lint are shown on
    stderr, then asked on a terminal, or given by ``--yes``; without a
    terminal and without ``--yes`` it is a usage error (exit 2) naming the
    fix. Consent is asked before any configuration prompt, and holds only
    for the content that was shown.
    """
    out = run.out
    inert = host.manager.inert_reason(name)
    if inert:
        run.refused(Outcome(False, inert), {"name": name})
    result = host.manager.apply_inline_config(name, entries)
    if result.unknown:
        fields = host.manager.require_plugin(name).manifest.config
        usage(out, unknown_keys_message(name, fields, result.unknown))
    consent: bool | Consent = False
    request = host.consent_request(name)
    if request is not None:
        ask_consent(run, request, yes=yes)
        shown = request.content_hash
        consent = lambda asked: asked.content_hash == shown  # noqa: E731 - only what was shown
    run.finish(host.enable(name, consent=consent), name, report=False)


def ask_consent(run: Run, request: ConsentRequest, *, yes: bool) -> None:
    """Show what a person consents to; return when they do, exit when they do not."""
    out: Out = run.out
    name = request.plugin
    if not out.as_json:
        show_consent(out.err, request)
    if yes:
        if not out.as_json:
            out.err.print(plain(f"consent for {name} given by --yes (this process only)"))
        return
    if out.as_json or not sys.stdin.isatty():
        usage(
            out,
            f"enabling plugin {name!r} needs consent: {request.why}; review its audit "
            f"(caplet audit {name}) and pass --yes to enable it for this process, or approve "
            f"it first (caplet approve {name})",
        )
    question = f"Enable {safe_line(name)} {safe_line(request.version)} for this process?"
    if not typer.confirm(question, default=False, err=True):
        run.refused(
            Outcome(False, f"plugin {name!r} was not enabled: consent was not given"),
            {"name": name},
        )
