"""The validated, immutable form of a plugin manifest (``plugin.toml``/``plugin.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from caplet._capabilities._model import Capability
from caplet._config._schema import ConfigField

__all__ = [
    "DEFAULT_HOOK_PRIORITY",
    "HOOK_EVENT_PATTERN",
    "MAX_HOOK_PRIORITY",
    "MIN_HOOK_PRIORITY",
    "FunctionSpec",
    "Hints",
    "Hook",
    "Limits",
    "Manifest",
    "ModuleSpec",
    "Requirement",
]


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """One exported function of a module; schemas are optional JSON Schemas."""

    name: str
    description: str = ""
    args_schema: Mapping[str, object] | None = None
    returns_schema: Mapping[str, object] | None = None


@dataclass(frozen=True, slots=True)
class ModuleSpec:
    """A module guests import as ``host.<name>``, with its declared functions."""

    name: str
    functions: tuple[FunctionSpec, ...]
    description: str = ""

    @property
    def function_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions)


@dataclass(frozen=True, slots=True)
class Hints:
    """Text appended to an agent's system message while the plugin is enabled."""

    overview: str = ""
    related_modules: tuple[str, ...] = ()
    critical_rules: tuple[str, ...] = ()
    anti_patterns: tuple[str, ...] = ()
    common_patterns: tuple[str, ...] = ()


#: An event name: ``<namespace>:<event>``, e.g. ``content:afterSave``. Shared
#: by the manifest loader and ``PluginHost.define_hook`` so a plugin can only
#: subscribe to names an application is able to define.
HOOK_EVENT_PATTERN = r"[a-z][a-zA-Z0-9_-]*:[a-zA-Z][a-zA-Z0-9_-]*"
#: Hooks run in ascending priority (lower first), as Sphinx's ``app.connect``
#: does; the default sits in the middle so a plugin can go either way.
DEFAULT_HOOK_PRIORITY = 500
MIN_HOOK_PRIORITY = 0
MAX_HOOK_PRIORITY = 1000


@dataclass(frozen=True, slots=True)
class Hook:
    """One event the plugin subscribes to, and the declared function that handles it.

    The handler is an ordinary declared function (``module.function``), so a
    hook call takes the same sandboxed path as any call: the worker only
    ever registers declared functions, and the function's own ``args`` and
    ``returns`` schemas apply. It receives the event's payload as its one
    argument. ``capability`` (one of the plugin's declared capabilities)
    is what the handler needs to do its work: while it is not approved the
    hook is not called at all, rather than called to fail.
    """

    event: str
    module: str
    function: str
    priority: int = DEFAULT_HOOK_PRIORITY
    capability: Capability | None = None
    description: str = ""

    @property
    def target(self) -> str:
        """``module.function``, as :meth:`caplet.PluginHost.call` takes it."""
        return f"{self.module}.{self.function}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """Another plugin this one needs, with a PEP 440 specifier (may be empty)."""

    name: str
    specifier: str = ""

    def __str__(self) -> str:
        return f"{self.name}{self.specifier}"


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-plugin resource limits; ``None`` means "the policy default"."""

    timeout_ms: int | None = None
    memory_mb: int | None = None
    cpu_s: int | None = None
    max_output_kb: int | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    """A validated manifest. Nothing in it came from running plugin code."""

    name: str
    version: str
    description: str
    modules: tuple[ModuleSpec, ...]
    path: Path
    entry: str = "plugin.py"
    hooks: tuple[Hook, ...] = ()
    capabilities: tuple[Capability, ...] = ()
    config: tuple[ConfigField, ...] = ()
    hints: Hints = field(default_factory=Hints)
    requires: tuple[Requirement, ...] = ()
    limits: Limits = field(default_factory=Limits)

    @property
    def plugin_dir(self) -> Path:
        return self.path.parent

    def module(self, name: str) -> ModuleSpec | None:
        """The declared module called ``name``, if any."""
        for module in self.modules:
            if module.name == name:
                return module
        return None

    def hook(self, event: str) -> Hook | None:
        """The plugin's hook for ``event``, if it subscribes to it."""
        for hook in self.hooks:
            if hook.event == event:
                return hook
        return None

    def config_field(self, name: str) -> ConfigField | None:
        """The declared configuration field called ``name``, if any."""
        for config_field in self.config:
            if config_field.name == name:
                return config_field
        return None
