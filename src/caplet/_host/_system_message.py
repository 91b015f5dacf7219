"""The text an enabled plugin adds to an agent's system message (its manifest's hints)."""

from __future__ import annotations

from caplet._manifest._model import Manifest

__all__ = ["system_message"]


def system_message(manifest: Manifest) -> str:
    hints = manifest.hints
    modules = "; ".join(f"host.{m.name}: {', '.join(m.function_names)}" for m in manifest.modules)
    lines = [
        f"## Plugin {manifest.name} {manifest.version}: {manifest.description}",
        f"Modules: {modules}",
    ]
    if hints.overview:
        lines.append(hints.overview)
    for title, items in (
        ("Related modules", hints.related_modules),
        ("Critical rules", hints.critical_rules),
        ("Anti-patterns", hints.anti_patterns),
        ("Common patterns", hints.common_patterns),
    ):
        if items:
            lines.append(f"{title}:")
            lines.extend(f"- {item}" for item in items)
    return "\n".join(lines)
