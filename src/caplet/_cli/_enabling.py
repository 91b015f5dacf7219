"""Enabling from the command line: inline configuration, consent, requirements first.

``caplet enable``, and ``--enable NAME [k=v ...]`` of ``call``, ``exec`` and
``emit``, go through :func:`enable_plugin`: inline ``k=v`` entries (a
typo'd key is a usage error), then consent for content nobody approved
(issue 14), then the library's enable. :func:`enable_all` enables each
plugin's ``requires`` first, with the entries given for them (their own
``--enable``) and the same consent, so ``--enable fs-write root=...`` works
without enabling fs-read by hand (issue 15); a requirement that cannot be
enabled names the ``--enable`` that would configure it.
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
from caplet._errors import ConfigError
from caplet._host._consent import Consent, ConsentRequest
from caplet._host._defaults import Reach, configured_reach
from caplet._host._host import PluginHost
from caplet._host._records import Outcome

__all__ = [
    "EnableGroup",
    "ask_consent",
    "enable_all",
    "enable_plugin",
    "looks_like_entry",
    "split_enable_groups",
]

#: One ``--enable NAME [k=v ...]``: the plugin and its configuration entries.
EnableGroup = tuple[str, list[str]]


class EnableUsageError(Exception):
    """Internal: a malformed ``--enable`` group (shown as a usage error)."""


def looks_like_entry(token: str) -> bool:
    """True for a ``key=value`` configuration entry (the key an identifier)."""
    key, sep, _ = token.partition("=")
    return bool(sep) and key.strip().isidentifier()


def split_enable_groups(
    tokens: Sequence[str], *, keep_last: bool = False
) -> tuple[list[EnableGroup], list[str]]:
    """Take every ``--enable NAME [k=v ...]`` out of ``tokens``: (groups, the rest in order).

    With ``keep_last`` the last token always stays in the rest, even when it
    looks like ``k=v`` (``exec``'s code: ``x=1`` is a snippet too).
    """
    groups: list[EnableGroup] = []
    rest: list[str] = []
    index = 0
    count = len(tokens)
    entries_end = count - 1 if keep_last else count
    while index < count:
        word = tokens[index]
        if word != "--enable" and not word.startswith("--enable="):
            rest.append(word)
            index += 1
            continue
        if word == "--enable":
            if index + 1 >= count:
                raise EnableUsageError("--enable needs a plugin name: --enable NAME [k=v ...]")
            name, index = tokens[index + 1], index + 2
        else:
            name, index = word.partition("=")[2], index + 1
        if not name or name.startswith("-"):
            raise EnableUsageError(
                f"--enable needs a plugin name, got {name!r}: --enable NAME [k=v ...]"
            )
        entries: list[str] = []
        while index < entries_end and looks_like_entry(tokens[index]):
            entries.append(tokens[index])
            index += 1
        groups.append((name, entries))
    return groups, rest


def enable_all(
    run: Run,
    host: PluginHost,
    groups: Sequence[EnableGroup],
    *,
    yes: bool,
    interactive: bool = True,
) -> None:
    """Enable every plugin of ``groups``, each one's ``requires`` first (issue 15).

    A requirement gets the entries of its own group when there is one, and
    is enabled with the same consent as the rest; one that is already
    enabled and has no entries of its own is left as it is. Without
    ``interactive`` consent is never asked, even on a terminal: ``--yes``
    or an approval gives it (``caplet mcp``).
    """
    entries: dict[str, list[str]] = {}
    order: list[str] = []
    for name, given in groups:
        if name not in entries:
            order.append(name)
        entries.setdefault(name, []).extend(given)
    done: set[str] = set()

    def visit(name: str, needed_by: str | None, chain: tuple[str, ...]) -> None:
        if name in done or name in chain:
            return
        info = host.manager.require_plugin(name)
        for requirement in info.manifest.requires:
            required = host.manager.get_plugin(requirement.name)
            if required is None:
                continue  # the enable below refuses, naming what is missing
            if requirement.name in entries or not required.enabled:
                visit(requirement.name, name, (*chain, name))
        if needed_by is not None and name not in entries and info.enabled:
            return
        enable_plugin(
            run,
            host,
            name,
            entries.get(name, []),
            yes=yes,
            needed_by=needed_by,
            interactive=interactive,
        )
        done.add(name)

    for name in order:
        visit(name, None, ())


def enable_plugin(
    run: Run,
    host: PluginHost,
    name: str,
    entries: Sequence[str],
    *,
    yes: bool,
    needed_by: str | None = None,
    interactive: bool = True,
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
        info = host.manager.require_plugin(name)
        reach = configured_reach(info.manifest, info.config)
        ask_consent(run, request, yes=yes, interactive=interactive, reach=reach)
        shown = request.content_hash
        consent = lambda asked: asked.content_hash == shown  # noqa: E731 - only what was shown
    why = (
        ""
        if needed_by is None
        else f" (plugin {name!r} is required by {needed_by!r}; configure it with "
        f"--enable {name} k=v ... before --enable {needed_by})"
    )
    try:
        outcome = host.enable(name, consent=consent)
    except ConfigError as exc:
        if not why:
            raise
        raise ConfigError(f"{exc}{why}") from exc
    if not outcome and why:
        outcome = Outcome(False, f"{outcome.reason}{why}")
    run.finish(outcome, name, report=False)


def ask_consent(
    run: Run,
    request: ConsentRequest,
    *,
    yes: bool,
    interactive: bool = True,
    reach: Sequence[Reach] = (),
) -> None:
    """Show what a person consents to (``reach``: what its templated capabilities
    reach); return when they do, exit when they do not."""
    out: Out = run.out
    name = request.plugin
    if not out.as_json:
        show_consent(out.err, request, reach)
    if yes:
        if not out.as_json:
            out.err.print(plain(f"consent for {name} given by --yes (this process only)"))
        return
    if out.as_json or not interactive or not sys.stdin.isatty():
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
