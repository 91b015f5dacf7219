"""The manifest's schema: pydantic models (strict, unknown keys forbidden) and
the rule for each field.

The models are the one validation rule for a manifest's fields; every
problem they find carries its location, which :mod:`caplet._manifest._load`
turns into one :class:`ManifestError` listing them all. Cross-field facts
(declared config names, functions, capabilities) come in a
:class:`ManifestContext` read from the raw data up front, so every field is
checked in the same pass.
"""

from __future__ import annotations

import keyword
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PackagingRequirement
from packaging.version import Version
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from caplet._capabilities._model import Capability, CapabilityKind
from caplet._capabilities._parse import parse_capability
from caplet._config._coerce import type_name, validate_default
from caplet._config._schema import ConfigField, ConfigType
from caplet._display import safe_line
from caplet._errors import CapabilityError, ConfigError
from caplet._manifest._model import (
    DEFAULT_HOOK_PRIORITY,
    HOOK_EVENT_PATTERN,
    MAX_HOOK_PRIORITY,
    MIN_HOOK_PRIORITY,
)
from caplet._suggest import did_you_mean

__all__ = [
    "ERROR_TYPE",
    "SUBLOC",
    "ConfigFieldModel",
    "FunctionModel",
    "HintsModel",
    "HookModel",
    "LimitsModel",
    "ManifestContext",
    "ManifestModel",
    "ModuleModel",
    "config_field",
    "fields_at",
]

_NAME_RE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]*")
_FUNCTION_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_HOOK_RE = re.compile(HOOK_EVENT_PATTERN)
_MAX_DESCRIPTION = 200
#: Characters of a version: longer ones (PEP 440 sets no bound) are no release's, and
#: the consent question and every listing show it whole.
_MAX_VERSION = 64
#: The pydantic error type of caplet's own checks (their message is shown as is).
ERROR_TYPE = "caplet"
#: Context key of a custom error: a location below the validated field.
SUBLOC = "caplet_subloc"


# -- validation context and field validators ------------------------------------------


@dataclass(frozen=True, slots=True)
class ManifestContext:
    """What field validators need beyond their own value (pydantic validation context).

    The cross-field facts (declared config names, whether ``requires`` is
    non-empty, the plugin's own name) are read from the raw data up front so
    that every field is checked in the same pass and all problems are
    reported together.
    """

    plugin_dir: Path
    dir_name: str
    raw_name: str | None
    config_names: tuple[str, ...]
    has_requires: bool
    allow_broad: bool
    #: Declared ``"module.function"`` names and the declared capabilities that
    #: parse: what a hook may name as its function and its capability.
    functions: tuple[str, ...] = ()
    capabilities: tuple[Capability, ...] = ()


def _context(info: ValidationInfo) -> ManifestContext:
    context = info.context
    value = context.get("caplet") if isinstance(context, dict) else None
    if not isinstance(value, ManifestContext):
        raise TypeError("internal error: manifest models must be validated with a ManifestContext")
    return value


def _error(message: str, *subloc: str | int) -> PydanticCustomError:
    """A custom error; ``subloc`` extends the location below the validated field."""
    return PydanticCustomError(ERROR_TYPE, message, {SUBLOC: subloc} if subloc else None)


def _kebab_suggestion(name: str) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", name).lower()
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    text = text.lstrip("0123456789-")
    return text or "my-plugin"


def _check_name(value: str, info: ValidationInfo) -> str:
    if not _NAME_RE.fullmatch(value):
        raise _error(
            f"{value!r} is not kebab-case (lower-case words of letters and digits joined by "
            f"single hyphens, starting with a letter); use {_kebab_suggestion(value)!r}"
        )
    dir_name = _context(info).dir_name
    if value != dir_name:
        raise _error(
            f"{value!r} does not match the plugin directory name {dir_name!r}; rename the "
            f"directory to {value!r} or set name = {dir_name!r}"
        )
    return value


def _check_version(value: str) -> str:
    hint = "use a bare version, e.g. 1.0.0"
    if value[:1] in ("v", "V"):
        raise _error(f"{value!r} has a leading {value[0]!r}; {hint}")
    if len(value) > _MAX_VERSION:
        raise _error(
            f"{value[:40]!r}... is {len(value)} characters; a version is at most "
            f"{_MAX_VERSION}; {hint}"
        )
    try:
        return str(Version(value))
    except ValueError as exc:
        # InvalidVersion, and the ValueError of a release segment past
        # sys.get_int_max_str_digits() digits (attack29).
        raise _error(f"{value!r} is not a valid PEP 440 version; {hint}") from exc


def _check_description(value: str) -> str:
    if not value.strip():
        raise _error("must not be empty; say in one line what the plugin does")
    if "\n" in value or "\r" in value:
        raise _error("must be one line; move details to hints.overview or the README")
    if len(value) > _MAX_DESCRIPTION:
        raise _error(
            f"must be at most {_MAX_DESCRIPTION} characters, got {len(value)}; shorten it and "
            f"move details to hints.overview"
        )
    return value


def _check_entry(value: str, info: ValidationInfo) -> str:
    example = "e.g. entry = 'plugin.py'"
    pure = PurePosixPath(value)
    if not value or "\\" in value or pure.is_absolute():
        raise _error(
            f"{value!r} must be a relative path inside the plugin directory with forward "
            f"slashes; {example}"
        )
    if ".." in pure.parts:
        raise _error(f"{value!r} must not contain '..' components; {example}")
    if pure.suffix != ".py":
        raise _error(f"{value!r} must be a Python file ending in .py; {example}")
    plugin_dir = _context(info).plugin_dir
    candidate = plugin_dir / value
    try:
        mode = candidate.lstat().st_mode
    except OSError:
        raise _error(
            f"{value!r} does not exist in {plugin_dir}; create it or point entry at the "
            f"plugin's entry module"
        ) from None
    if not stat.S_ISREG(mode):
        raise _error(f"{value!r} must be a regular file (not a symlink or directory); {example}")
    if not candidate.resolve().is_relative_to(plugin_dir.resolve()):
        raise _error(f"{value!r} resolves outside the plugin directory; {example}")
    return value


def _check_module_name(value: str) -> str:
    if not _IDENT_RE.fullmatch(value) or keyword.iskeyword(value):
        raise _error(
            f"invalid module name {value!r}; guests import it as host.<name>, so use "
            f"lower-case letters, digits and underscores ([a-z_][a-z0-9_]*), not a keyword"
        )
    return value


def _check_function_name(value: str) -> str:
    if not _FUNCTION_RE.fullmatch(value) or keyword.iskeyword(value):
        raise _error(
            f"invalid function name {value!r}; use an ASCII Python identifier that does not "
            f"start with '_' and is not a keyword, e.g. read_file"
        )
    return value


def _functions_before(value: object) -> object:
    """Accept the list form ``functions = ["say"]`` as ``{"say": {}}``."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, list):
        raise _error(
            f"expected a list of function names or a table of functions, got {type_name(value)}"
        )
    result: dict[str, object] = {}
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _error(f"expected a function name, got {type_name(item)}", index)
        if item in result:
            raise _error(f"function {item!r} is listed twice; keep one", index)
        result[item] = {}
    return result


def _check_hook(value: str) -> str:
    if not _HOOK_RE.fullmatch(value):
        raise _error(
            f"invalid hook {value!r}; expected '<namespace>:<event>', e.g. content:afterSave"
        )
    return value


def _hooks_before(value: object) -> object:
    """Accept ``"event" = "module.function"`` as ``{"function": ...}``; refuse the old list.

    The list form (``hooks = ["content:afterSave"]``) named events but not
    the function handling them, and the worker registers only declared
    functions, so it cannot be kept working by guessing a name: it is
    refused with the table that replaces it.
    """
    if isinstance(value, list):
        events = [item for item in value if isinstance(item, str)] or ["content:afterSave"]
        table = ", ".join(f'"{event}" = "module.function"' for event in events)
        raise _error(
            "the list form of hooks is no longer supported: each event must name the declared "
            f"function that handles it; replace it with a table, hooks = {{ {table} }} (or a "
            '[hooks."<event>"] table with function, priority, capability, description; in '
            'plugin.json an object, "hooks": {"<event>": "module.function"})'
        )
    if not isinstance(value, dict):
        raise _error(
            f"expected a table mapping each event to its function, got {type_name(value)}; "
            'e.g. [hooks] "content:afterSave" = "module.function"'
        )
    return {
        event: {"function": spec} if isinstance(spec, str) else spec
        for event, spec in value.items()
    }


def _check_hook_function(value: str, info: ValidationInfo) -> str:
    declared = _context(info).functions
    module, dot, function = value.partition(".")
    if not dot or not module or not function or "." in function:
        raise _error(
            f"{value!r} is not 'module.function'; name the declared function that handles "
            f"the event, e.g. {(declared or ('main.run',))[0]!r}"
        )
    if value not in declared:
        raise _error(
            # The names are the plugin's, and a problem is one line: escaped, so a module
            # named "m\n<a line like caplet's>" stays on it (attack18).
            f"{value!r} is not a declared function{did_you_mean(value, declared)}; declare it "
            f"under [modules.{safe_line(module)}] or name one of: "
            f"{', '.join(map(safe_line, declared)) or 'none declared'}"
        )
    return value


def _check_hook_priority(value: int) -> int:
    if not MIN_HOOK_PRIORITY <= value <= MAX_HOOK_PRIORITY:
        raise _error(
            f"must be between {MIN_HOOK_PRIORITY} and {MAX_HOOK_PRIORITY} (lower runs first, "
            f"default {DEFAULT_HOOK_PRIORITY}), got {value}"
        )
    return value


def _parsed(value: str, context: ManifestContext) -> Capability:
    """``value`` parsed with the manifest's config names and broad-path rule."""
    try:
        return parse_capability(
            value, config_names=context.config_names, allow_broad=context.allow_broad
        )
    except CapabilityError as exc:
        raise _error(str(exc)) from exc


def _check_hook_capability(value: str, info: ValidationInfo) -> str:
    context = _context(info)
    capability = _parsed(value, context)
    if capability not in context.capabilities:
        texts = [c.declared for c in context.capabilities]
        raise _error(
            f"{value!r} is not one of the plugin's capabilities{did_you_mean(value, texts)}; a "
            f"hook can only need what the plugin declares, so add it to capabilities (declared: "
            f"{', '.join(texts) or 'none'})"
        )
    return value


def _check_capability(value: str, info: ValidationInfo) -> str:
    context = _context(info)
    capability = _parsed(value, context)
    if capability.kind is CapabilityKind.HOST_CALL and not context.has_requires:
        raise _error(
            f"{value!r} calls another plugin's module, but 'requires' is empty; add the "
            f"plugin that provides it to requires, e.g. requires = ['other-plugin>=1.0']"
        )
    return value


def _check_config_name(value: str) -> str:
    if not _IDENT_RE.fullmatch(value):
        raise _error(
            f"invalid config field name {value!r}; use lower-case letters, digits and "
            f"underscores ([a-z_][a-z0-9_]*), e.g. max_kb"
        )
    return value


def _check_config_type(value: str) -> str:
    choices = [t.value for t in ConfigType]
    if value not in choices:
        raise _error(
            f"unknown type {value!r}{did_you_mean(value, choices)}; expected one of "
            f"{', '.join(choices)}"
        )
    return value


def _check_requirement(value: str, info: ValidationInfo) -> str:
    example = "e.g. 'other-plugin>=1.0'"
    try:
        requirement = PackagingRequirement(value)
    except InvalidRequirement as exc:
        # packaging's message spans lines (a caret under the error): keep the first.
        reason = str(exc).splitlines()[0] if str(exc) else "does not parse"
        raise _error(f"invalid requirement {value!r} ({reason}); {example}") from exc
    try:
        # The specifier's versions are parsed only when compared: one past
        # sys.get_int_max_str_digits() digits raised out of the enable (attack29).
        requirement.specifier.contains("0", prereleases=True)
    except ValueError as exc:
        raise _error(
            f"invalid requirement {value[:80]!r}: a version in it is too long; {example}"
        ) from exc
    if requirement.extras or requirement.marker is not None or requirement.url:
        raise _error(
            f"{value!r}: extras, environment markers and URLs are not supported; name a "
            f"plugin and a version specifier, {example}"
        )
    if not _NAME_RE.fullmatch(requirement.name):
        raise _error(
            f"{value!r}: {requirement.name!r} is not a plugin name (kebab-case); "
            f"use {_kebab_suggestion(requirement.name)!r}"
        )
    if requirement.name == _context(info).raw_name:
        raise _error(f"{value!r}: a plugin cannot require itself; remove it")
    return value


def _duplicates(values: list[str], key: Mapping[str, str] | None = None) -> Iterator[int]:
    """Indexes of items equal (after ``key``) to an earlier item."""
    seen: set[str] = set()
    for index, value in enumerate(values):
        normal = key[value] if key is not None else value
        if normal in seen:
            yield index
        seen.add(normal)


# -- the models ---------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class FunctionModel(_Strict):
    description: str = ""
    args: dict[str, Any] | None = None
    returns: dict[str, Any] | None = None


class ModuleModel(_Strict):
    description: str = ""
    functions: Annotated[
        dict[Annotated[str, AfterValidator(_check_function_name)], FunctionModel],
        BeforeValidator(_functions_before),
    ]

    @field_validator("functions")
    @classmethod
    def _some_functions(cls, value: dict[str, FunctionModel]) -> dict[str, FunctionModel]:
        if not value:
            raise _error("declare at least one function")
        return value


class HookModel(_Strict):
    function: Annotated[str, AfterValidator(_check_hook_function)]
    priority: Annotated[int, AfterValidator(_check_hook_priority)] = DEFAULT_HOOK_PRIORITY
    capability: Annotated[str, AfterValidator(_check_hook_capability)] | None = None
    description: str = ""


class ConfigFieldModel(_Strict):
    type: Annotated[str, AfterValidator(_check_config_type)]
    description: str = ""
    default: Any = None
    prompt: bool = False
    secret: bool = False
    minimum: float | None = None
    maximum: float | None = None
    max_length: PositiveInt | None = None
    items: Annotated[str, AfterValidator(_check_config_type)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ConfigFieldModel:
        numeric = self.type in (ConfigType.NUMBER.value, ConfigType.INTEGER.value)
        if self.items is not None and self.type != ConfigType.ARRAY.value:
            raise _error(
                f"only array fields take 'items' (this field is {self.type}); remove it", "items"
            )
        if self.items == ConfigType.ARRAY.value:
            raise _error("nested arrays are not supported; use a scalar items type", "items")
        for bound in ("minimum", "maximum"):
            if getattr(self, bound) is not None and not numeric:
                raise _error(f"only number and integer fields take '{bound}'; remove it", bound)
        if self.max_length is not None and self.type not in (
            ConfigType.STRING.value,
            ConfigType.ARRAY.value,
        ):
            raise _error("only string and array fields take 'max_length'; remove it", "max_length")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise _error(
                f"minimum ({self.minimum:g}) is greater than maximum ({self.maximum:g}); swap them",
                "minimum",
            )
        return self


class HintsModel(_Strict):
    overview: str = ""
    related_modules: list[str] = Field(default_factory=list)
    critical_rules: list[str] = Field(default_factory=list)
    anti_patterns: list[str] = Field(default_factory=list)
    common_patterns: list[str] = Field(default_factory=list)


class LimitsModel(_Strict):
    timeout_ms: PositiveInt | None = None
    memory_mb: PositiveInt | None = None
    cpu_s: PositiveInt | None = None
    max_output_kb: PositiveInt | None = None


class ManifestModel(_Strict):
    name: Annotated[str, AfterValidator(_check_name)]
    version: Annotated[str, AfterValidator(_check_version)]
    description: Annotated[str, AfterValidator(_check_description)]
    # Checked when defaulted too: a plugin without its entry file must fail here, at
    # discovery, scan and approval, not first at enable (issue 15).
    entry: Annotated[str, AfterValidator(_check_entry), Field(validate_default=True)] = "plugin.py"
    modules: dict[Annotated[str, AfterValidator(_check_module_name)], ModuleModel]
    hooks: Annotated[
        dict[Annotated[str, AfterValidator(_check_hook)], HookModel],
        BeforeValidator(_hooks_before),
    ] = Field(default_factory=dict)
    capabilities: list[Annotated[str, AfterValidator(_check_capability)]] = Field(
        default_factory=list
    )
    config: dict[Annotated[str, AfterValidator(_check_config_name)], ConfigFieldModel] = Field(
        default_factory=dict
    )
    hints: HintsModel = Field(default_factory=HintsModel)
    requires: list[Annotated[str, AfterValidator(_check_requirement)]] = Field(default_factory=list)
    limits: LimitsModel = Field(default_factory=LimitsModel)

    @field_validator("modules")
    @classmethod
    def _some_modules(cls, value: dict[str, ModuleModel]) -> dict[str, ModuleModel]:
        if not value:
            raise _error("declare at least one module")
        return value

    @field_validator("capabilities")
    @classmethod
    def _unique_capabilities(cls, value: list[str], info: ValidationInfo) -> list[str]:
        context = _context(info)
        normal = {
            text: str(
                parse_capability(
                    text, config_names=context.config_names, allow_broad=context.allow_broad
                )
            )
            for text in value
        }
        for index in _duplicates(value, normal):
            first = next(i for i, text in enumerate(value) if normal[text] == normal[value[index]])
            raise _error(
                f"{value[index]!r} grants the same as capabilities[{first}] "
                f"({value[first]!r}); remove one",
                index,
            )
        return value

    @field_validator("config")
    @classmethod
    def _valid_defaults(cls, value: dict[str, ConfigFieldModel]) -> dict[str, ConfigFieldModel]:
        for name, model in value.items():
            try:
                validate_default(config_field(name, model))
            except ConfigError as exc:
                raise _error(str(exc), name, "default") from exc
        return value

    @field_validator("requires")
    @classmethod
    def _unique_requires(cls, value: list[str]) -> list[str]:
        names = {text: PackagingRequirement(text).name for text in value}
        for index in _duplicates(value, names):
            raise _error(
                f"plugin {names[value[index]]!r} is required twice; merge the specifiers", index
            )
        return value


def config_field(name: str, model: ConfigFieldModel) -> ConfigField:
    return ConfigField(
        name=name,
        type=ConfigType(model.type),
        description=model.description,
        default=model.default,
        prompt=model.prompt,
        secret=model.secret,
        minimum=model.minimum,
        maximum=model.maximum,
        max_length=model.max_length,
        items=ConfigType(model.items) if model.items is not None else ConfigType.STRING,
    )


def fields_at(loc: tuple[str | int, ...]) -> tuple[str, ...]:
    """The field names allowed at ``loc`` (for did-you-mean on unknown keys)."""
    model: type[BaseModel]
    match loc:
        case ():
            model = ManifestModel
        case ("hints",):
            model = HintsModel
        case ("limits",):
            model = LimitsModel
        case ("modules", _):
            model = ModuleModel
        case ("modules", _, "functions", _):
            model = FunctionModel
        case ("config", _):
            model = ConfigFieldModel
        case ("hooks", _):
            model = HookModel
        case _:
            return ()
    return tuple(model.model_fields)
