"""The text an agent adds to its system message for the enabled plugins (seed 000).

``PluginHost.get_system_message_additions()`` builds it from what the
manifests declare (nothing is executed): a preamble saying how guest code
reaches the host (``import host.<module>``), then one section per enabled
plugin with its importable modules and their functions' one-line
descriptions, its resolved configuration *without secret fields* (a secret
is never shown, masked or not: the text goes to a model), and its hints
(overview, critical rules, anti-patterns, common patterns, related
modules). Modules two enabled plugins both declare are listed as not
importable, with the reason.

When the text may have changed (an enable, a disable, a configuration
change), the manager's session dirty flag is set; ``PluginHost.consume_dirty``
reads and clears it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from caplet._display import stripped_text
from caplet._host._guest_catalog import GuestCatalog
from caplet._host._records import PluginInfo
from caplet._host._system_message import hint_lines
from caplet._sandbox._protocol import ALLOWED_VALUES

__all__ = ["PREAMBLE", "system_message"]

PREAMBLE = (
    "# Host modules for guest code\n\n"
    "Guest code runs in a sandbox without files, network, environment or processes. It "
    "reaches the outside only through the host modules below: `import host.<module>` (or "
    "`from host import <module>`), then call `<module>.<function>(...)`. Every call runs in "
    f"the plugin's own sandbox; arguments and results are {ALLOWED_VALUES}. A failed call "
    "raises HostCallError (NotGrantedError for a module or function that is not available). "
    "The value of the snippet's last expression is returned, as in the interactive "
    "interpreter, with what it printed."
)


def _value(value: object) -> str:
    if isinstance(value, tuple):
        value = list(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _configuration(info: PluginInfo) -> list[str]:
    """``name = value`` of each resolved, non-secret field, in manifest order."""
    lines: list[str] = []
    for field in info.manifest.config:
        if field.secret or field.name not in info.config:
            continue
        text = f"- {field.name} = {_value(info.config[field.name])}"
        if field.description:
            text += f" ({field.description})"
        lines.append(text)
    return lines


#: ``offers(plugin, "module.function")``: whether a function is shown (``caplet mcp``).
Offers = Callable[[str, str], bool]


def _section(info: PluginInfo, catalog: GuestCatalog, offers: Offers | None) -> str:
    manifest = info.manifest
    lines = [f"## Plugin {manifest.name} {manifest.version}: {manifest.description}"]
    for spec in manifest.modules:
        shown = [
            f
            for f in spec.functions
            if offers is None or offers(info.name, f"{spec.name}.{f.name}")
        ]
        if not shown:
            continue
        module = catalog.module(spec.name)
        if module is None or module.plugin != info.name:
            why = catalog.unavailable.get(spec.name, "not importable")
            lines.append(f"Module host.{spec.name}: not importable ({why})")
            continue
        lines.append(f"Module host.{spec.name}: {module.description}")
        names = {f.name for f in shown}
        for function in module.functions:
            if function.name not in names:
                continue
            described = f": {function.description}" if function.description else ""
            lines.append(f"- {spec.name}.{function.name}(...){described}")
    configuration = _configuration(info)
    if configuration:
        lines.append("Configuration:")
        lines.extend(configuration)
    lines.extend(hint_lines(manifest.hints))
    return "\n".join(lines)


def system_message(
    enabled: Sequence[PluginInfo], catalog: GuestCatalog, offers: Offers | None = None
) -> str:
    """The preamble and one section per plugin of ``enabled``; "" when there is none.

    ``offers`` (``caplet mcp``'s allow/deny) leaves out every function it refuses, and a
    plugin it refuses every function of altogether (its hints and configuration too): a
    hidden tool is invisible, here as in ``tools/list`` (red team, issue 17).
    """
    if offers is not None:
        enabled = [
            info
            for info in enabled
            if any(
                offers(info.name, f"{module.name}.{function.name}")
                for module in info.manifest.modules
                for function in module.functions
            )
        ]
    if not enabled:
        return ""
    # What a reviewer cannot see must not reach the model either: the manifest's
    # text without control, format and bidi characters, as `caplet mcp` sends
    # it (_mcp/_text; attack10: tag characters hid instructions here).
    sections = (stripped_text(_section(info, catalog, offers)) for info in enabled)
    return "\n\n".join([PREAMBLE, *sections]) + "\n"
