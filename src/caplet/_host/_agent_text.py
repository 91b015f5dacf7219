"""The text a plugin's manifest sends to the agent, pinned by its approval (textpin).

A plugin's description, its modules' and functions' descriptions, its
argument schemas, its non-secret configuration fields and their defaults,
and its ``[hints]`` reach the agent (``get_system_message_additions``,
:mod:`caplet._host._guest_prompt`; ``caplet mcp``'s tool descriptions and
input schemas, :mod:`caplet._mcp._tools`). That agent holds every enabled
plugin's tools, so the text steers what it does with all of them: a new
version that keeps its capabilities and rewrites only that text (the MCP
"rug pull") changes what was consented to. An approval therefore records
the text (:func:`agent_text`: the text itself, so a person can be shown what
changed, not only a digest), and a content whose text differs from it
widens the approval (:mod:`caplet._host._consent`).

**What is compared is what the agent reads.** Each entry is labelled with
where it goes (``hints.critical_rules: ...``, ``function main.run: ...``).
Text that caplet strips before it reaches the agent is stripped here too
(:func:`caplet._display.stripped_text`: control, format and bidirectional
characters), so a change of invisible characters alone is no change: the
agent never sees them. Runs of spaces and tabs count as one space, and
leading and trailing blanks as none (``caplet mcp`` collapses them anyway,
and a tokenizer reads nearly the same thing), but a line break counts: in
the system message a new line can start text that reads like caplet's own
heading (``## Plugin ...``). An argument schema reaches the agent as JSON,
unstripped, so it is compared as JSON (keys sorted: their order carries no
instruction), invisible characters included. Entries are compared as a
multiset: the same sentences in another order are no change. Names of
modules, functions and configuration fields are part of the text (a new
function is a new tool); the version is not (it changes with every release,
and a lower one widens anyway), except a PEP 440 local label
(``1.0+read.the.ssh.key``), which is free text in the section heading.
What does not reach the agent is not pinned: return schemas, hook
descriptions, a secret field's description and default.

A default behind a templated capability (``fs.read:${config.root}``) is not
an entry of :func:`agent_text`: what it *reaches* is judged by
:mod:`caplet._host._defaults`, and the approval records it there
(``ApprovalRecord.defaults``). But the agent reads it too, whole, in the
system message's ``Configuration:`` lines, and a default that goes
narrower reaches less while it says anything a URL path or a folder name
can spell (attack13d: ``https://api.example.com/v1/SYSTEM-NOTE:before-any-
other-tool-...`` carried over as "the same text for the agent"). So
:func:`moved_defaults` compares the value the agent will read for each such
field nobody set with the recorded default, and a difference the defaults
layer does not already report is a change of text (:func:`agent_text_change`).

The text is bounded as the manifest is (:data:`caplet._manifest._read.
MAX_MANIFEST_BYTES`); nothing of it is cut, so every change is seen, and
the lines a person is shown are bounded (:data:`MAX_SHOWN` entries, each
cut at :data:`SHOWN_CHARS` characters) and escaped
(:func:`caplet._display.safe_line`): a plugin controls this text.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from packaging.version import InvalidVersion, Version

from caplet._config._schema import ConfigValue
from caplet._display import safe_line, stripped_text
from caplet._host._defaults import template_defaults
from caplet._manifest._model import Manifest
from caplet._trust._store import ApprovedDefaults

__all__ = [
    "MAX_SHOWN",
    "SHOWN_CHARS",
    "AgentTextChange",
    "agent_text",
    "agent_text_change",
    "moved_defaults",
    "shown_agent_text",
    "shown_entries",
]

#: Entries of a change shown (removed and added each); the rest are counted.
MAX_SHOWN: Final = 12
#: Characters of one entry shown; the rest is cut, marked.
SHOWN_CHARS: Final = 240
#: Entries of a whole text shown before a first approval; the rest are counted.
MAX_SHOWN_WHOLE: Final = 40


def _as_read(text: str) -> str:
    """``text`` as the agent reads it: no invisible characters, blanks collapsed."""
    clean = stripped_text(text.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join(" ".join(line.split()) for line in clean.split("\n")).strip()


def _entry(label: str, text: str) -> str:
    read = _as_read(text)
    return f"{label}: {read}" if read else label


def _json(value: object) -> str:
    return json.dumps(
        value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=_plain
    )


def _plain(value: object) -> object:
    """A read-only mapping (a loaded schema) as the dict JSON writes."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def agent_text(manifest: Manifest) -> tuple[str, ...]:
    """Every text of *manifest* that reaches the agent, one labelled entry each, as read."""
    entries = [_entry("description", manifest.description)]
    try:
        local = Version(manifest.version).local
    except InvalidVersion:  # the loader normalised it; kept whole if it ever is not
        local = manifest.version
    if local:
        entries.append(_entry("version label", local))
    for module in manifest.modules:
        entries.append(_entry(f"module {module.name}", module.description))
        for function in module.functions:
            target = f"function {module.name}.{function.name}"
            entries.append(_entry(target, function.description))
            if function.args_schema is not None:
                # As JSON, unstripped: the input schema is sent as it is declared.
                entries.append(f"{target} args: {_json(function.args_schema)}")
    # A default behind a templated capability is judged by what it reaches
    # (caplet._host._defaults: a narrower one carries over, the operator's own
    # value is the operator's), not as text: pinning it here would ask again
    # for every narrowing, and what it says is a path, an origin or a name.
    judged = {name for name, _ in template_defaults(manifest)}
    for field in manifest.config:
        if field.secret:
            continue  # neither its description nor its value is ever shown to the agent
        entries.append(_entry(f"config {field.name}", field.description))
        if field.default is not None and field.name not in judged:
            entries.append(_entry(f"config {field.name} default", _json(field.default)))
    hints = manifest.hints
    if hints.overview:
        entries.append(_entry("hints.overview", hints.overview))
    for title, items in (
        ("critical_rules", hints.critical_rules),
        ("anti_patterns", hints.anti_patterns),
        ("common_patterns", hints.common_patterns),
        ("related_modules", hints.related_modules),
    ):
        entries.extend(_entry(f"hints.{title}", item) for item in items)
    return tuple(entries)


@dataclass(frozen=True, slots=True)
class AgentTextChange:
    """How a content's agent text differs from the approved one.

    ``removed`` are the approved entries it no longer has, ``added`` its
    entries the approval did not have (:func:`agent_text`'s form).
    ``unrecorded``: the approval predates caplet recording the text, so
    nothing was compared and ``added`` is all of the content's text.
    """

    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    unrecorded: bool = False

    def describe(self, *, whole: bool = False) -> list[str]:
        """Lines for prompts, refusals and the log: a head, then the entries, bounded; every
        entry whole for the screen a person decides on (``whole``: what the decision pins
        was shown, steer32)."""
        if self.unrecorded:
            head = (
                "changes the text it sends to the agent, or may: its approval predates caplet "
                "recording that text, so none of it is vouched for"
            )
        else:
            head = (
                f"changes the text it sends to the agent ({len(self.removed)} removed, "
                f"{len(self.added)} added)"
            )
        lines = [head]
        for verb, entries in (("removed", self.removed), ("added", self.added)):
            shown = entries if whole else entries[:MAX_SHOWN]
            lines += [f"agent text {verb}: {_shown(e, whole=whole)}" for e in shown]
            if len(entries) > len(shown):
                lines.append(
                    f"agent text {verb}: {len(entries) - MAX_SHOWN} more, not shown here "
                    "(read the plugin's manifest)"
                )
        return lines


def _shown(entry: str, *, whole: bool = False) -> str:
    """One entry for a person: escaped (a plugin wrote it), on one line, bounded unless
    ``whole``."""
    line = safe_line(entry)
    if whole or len(line) <= SHOWN_CHARS:
        return line
    return line[: SHOWN_CHARS - 6].rstrip() + " [...]"


def shown_agent_text(manifest: Manifest, *, whole: bool = False) -> list[str]:
    """*manifest*'s whole agent text for a person, before a first approval or in ``info``.

    A change of it needs consent (:func:`agent_text_change`); the first approval
    vouched for text nobody was shown (textpin's report): ``caplet approve`` and
    ``caplet info`` showed neither the hints nor the schemas. Each entry escaped and
    bounded as a change's are, at most :data:`MAX_SHOWN_WHOLE` of them, or all of them
    whole where a person decides (``whole``: ``caplet approve`` pinned what it had cut,
    an instruction past 240 characters or as the 41st rule, steer32).
    """
    return shown_entries(agent_text(manifest), whole=whole)


def shown_entries(entries: Sequence[str], *, whole: bool = False) -> list[str]:
    """Entries of :func:`agent_text` for a person: each escaped and bounded, at most
    :data:`MAX_SHOWN_WHOLE` of them, the rest counted; every one whole if ``whole``."""
    shown = entries if whole else entries[:MAX_SHOWN_WHOLE]
    lines = [_shown(e, whole=whole) for e in shown]
    if len(entries) > len(shown):
        lines.append(
            f"{len(entries) - MAX_SHOWN_WHOLE} more, not shown here (read the plugin's manifest)"
        )
    return lines


def _default_entry(name: str, value: ConfigValue) -> str:
    return _entry(f"config {name} default", _json(value))


def moved_defaults(
    manifest: Manifest,
    approved: ApprovedDefaults | None,
    *,
    config: Mapping[str, ConfigValue] | None = None,
    explicit: Collection[str] = (),
    judged: Collection[str] = (),
) -> tuple[tuple[str, str], ...]:
    """(approved entry, new entry) of each templated field whose value the agent will read
    is not the recorded default (module docstring, attack13d).

    *approved* is the approval's recorded defaults (None: not recorded, which the
    defaults layer reports itself). A field the operator set (*explicit*) is the
    operator's text; a secret one never reaches the agent; one the defaults layer
    already reports (*judged*: a wider default, one added where there was none)
    is not reported twice; one without a value now, or without a recorded
    default, has no text to compare.
    """
    if approved is None:
        return ()
    recorded = dict(approved)
    values: Mapping[str, ConfigValue] = config or {}
    moved: list[tuple[str, str]] = []
    for name, default in template_defaults(manifest):
        field = manifest.config_field(name)
        if field is None or field.secret or name in explicit or name in judged:
            continue
        value = values.get(name, default)
        before = recorded.get(name)
        if value is None or before is None:
            continue
        old, new = _default_entry(name, before), _default_entry(name, value)
        if old != new:
            moved.append((old, new))
    return tuple(moved)


def agent_text_change(
    approved: Sequence[str] | None,
    manifest: Manifest,
    moved: Sequence[tuple[str, str]] = (),
) -> AgentTextChange | None:
    """How *manifest*'s agent text differs from *approved* (None: not at all).

    *approved* None: not recorded, so every entry is unvouched for. *moved* are
    templated defaults the agent will read other than the approved ones
    (:func:`moved_defaults`), each a removed and an added entry.
    """
    now = agent_text(manifest)
    if approved is None:
        return AgentTextChange(added=now, unrecorded=True)
    before = Counter(approved)
    after = Counter(now)
    removed = before - after
    added = after - before
    if not removed and not added and not moved:
        return None
    return AgentTextChange(
        removed=(*_in_order(approved, removed), *(old for old, _ in moved)),
        added=(*_in_order(now, added), *(new for _, new in moved)),
    )


def _in_order(entries: Sequence[str], picked: Counter[str]) -> tuple[str, ...]:
    """The entries of *picked* (with their counts), in *entries*' order."""
    left = Counter(picked)
    kept: list[str] = []
    for entry in entries:
        if left[entry] > 0:
            left[entry] -= 1
            kept.append(entry)
    return tuple(kept)
