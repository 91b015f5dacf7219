"""The text an enabled plugin adds to an agent's system message (its manifest's hints)."""

from __future__ import annotations

from caplet._display import stripped_text
from caplet._manifest._model import Hints, Manifest

__all__ = ["hint_lines", "system_message"]


def hint_lines(hints: Hints) -> list[str]:
    """The manifest's hints as text lines: the overview, then each titled list."""
    lines = [hints.overview] if hints.overview else []
    for title, items in (
        ("Critical rules", hints.critical_rules),
        ("Anti-patterns", hints.anti_patterns),
        ("Common patterns", hints.common_patterns),
        ("Related modules", hints.related_modules),
    ):
        if items:
            lines.append(f"{title}:")
            lines.extend(f"- {item}" for item in items)
    return lines


def system_message(manifest: Manifest) -> str:
    """One enabled plugin's addition to an agent's system message.

    Without the characters a reviewer cannot see (control, format, bidi:
    :func:`~caplet._display.stripped_text`), as ``caplet mcp`` sends it.
    """
    modules = "; ".join(f"host.{m.name}: {', '.join(m.function_names)}" for m in manifest.modules)
    lines = [
        f"## Plugin {manifest.name} {manifest.version}: {manifest.description}",
        f"Modules: {modules}",
        *hint_lines(manifest.hints),
    ]
    return stripped_text("\n".join(lines))
