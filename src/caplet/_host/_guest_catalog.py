"""Which ``host.<module>`` guest code may import right now, and why not the others.

The catalog is built from the plugins' records: every module an *enabled*
plugin declares is importable, with its declared functions and their
one-line descriptions (seed 000: ``hostModules``, ``require("host:name")``).
A module declared by a plugin that is not enabled, or by two enabled
plugins at once (guest code could not say which it means), is
*unavailable*, with the reason and the fix, so that the guest's import
error and the host's refusal of a forged request can both say why.

It is rebuilt whenever the plugin lifecycle moves (the manager's
generation): by ``PluginHost.exec`` for each snippet, by the guest's request
handler for each call, and by ``get_system_message_additions``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from caplet._host._records import PluginInfo, PluginState
from caplet._sandbox._guest_wire import HostFunction, HostModule
from caplet._suggest import did_you_mean

__all__ = ["GuestCatalog", "guest_catalog"]


@dataclass(frozen=True, slots=True)
class GuestCatalog:
    """The importable host modules (sorted by name) and the unavailable ones with why."""

    modules: tuple[HostModule, ...] = ()
    unavailable: Mapping[str, str] = field(default_factory=dict)

    def module(self, name: str) -> HostModule | None:
        """The importable module called ``name``, if any."""
        for module in self.modules:
            if module.name == name:
                return module
        return None

    def offered(self, gate: Callable[[str, str], str | None]) -> GuestCatalog:
        """This catalog as guest code behind ``gate`` sees it (``caplet mcp``'s allow/deny).

        A function ``gate(plugin, "module.function")`` refuses is left out, and a
        module left with none is gone, as if no plugin declared it; so are the
        unavailable modules, whose reasons name plugins the gate may hide. A
        hidden plugin's names never reach the snippet (red team of issue 17:
        ``dir(host.vault)`` listed a denied plugin's functions).
        """
        modules: list[HostModule] = []
        for module in self.modules:
            functions = tuple(
                f
                for f in module.functions
                if gate(module.plugin, f"{module.name}.{f.name}") is None
            )
            if functions:
                modules.append(dataclasses.replace(module, functions=functions))
        return GuestCatalog(tuple(modules), {})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.modules)

    def missing(self, name: str) -> str:
        """Why ``host.<name>`` cannot be used, naming what can (for messages)."""
        why = self.unavailable.get(name)
        if why is None:
            hint = did_you_mean(name, [*self.names, *sorted(self.unavailable)])
            why = f"no plugin declares a module {name!r}{hint}"
        available = ", ".join(self.names) or "none (no enabled plugin declares a module)"
        return f"{why}; importable host modules: {available}"


def guest_catalog(plugins: Iterable[PluginInfo]) -> GuestCatalog:
    """The catalog of ``plugins`` (every discovered plugin, in any state)."""
    providers: dict[str, list[tuple[PluginInfo, int]]] = {}
    idle: dict[str, list[PluginInfo]] = {}
    for info in plugins:
        for index, module in enumerate(info.manifest.modules):
            if info.state is PluginState.ENABLED:
                providers.setdefault(module.name, []).append((info, index))
            else:
                idle.setdefault(module.name, []).append(info)
    modules: list[HostModule] = []
    unavailable: dict[str, str] = {}
    for name, found in sorted(providers.items()):
        if len(found) > 1:
            both = " and ".join(repr(info.name) for info, _ in found)
            unavailable[name] = (
                f"module {name!r} is declared by the enabled plugins {both}, so it is "
                "ambiguous; disable all but one of them to import it"
            )
            continue
        info, index = found[0]
        spec = info.manifest.modules[index]
        modules.append(
            HostModule(
                name=name,
                plugin=info.name,
                description=spec.description or info.manifest.description,
                functions=tuple(HostFunction(f.name, f.description) for f in spec.functions),
            )
        )
    for name, owners in sorted(idle.items()):
        if name in providers:
            continue
        owner = owners[0]
        unavailable[name] = (
            f"plugin {owner.name!r} declares it but is not enabled (state: "
            f"{owner.state.value}); enable it in the host first (host.enable({owner.name!r}), "
            f"or caplet exec --enable {owner.name})"
        )
    return GuestCatalog(tuple(modules), unavailable)
