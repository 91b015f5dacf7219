"""Find, parse and validate a plugin manifest (``plugin.toml`` or ``plugin.json``).

Reading a manifest is purely declarative: no plugin code is imported or
executed (the entry file is only checked to exist as a regular file), so a
manifest can be shown and validated before anything of the plugin runs
(design.md section 3, defence layer 1).

Validation uses pydantic models (strict types, unknown keys forbidden) that
are an internal detail of this module; every problem they find is translated
into one :class:`ManifestError` whose message starts with the manifest path
and lists each problem on its own line as ``<dotted.field>: <problem>``.
"""

from __future__ import annotations

import dataclasses
import json
import keyword
import os
import re
import stat
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Annotated, Any

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PackagingRequirement
from packaging.version import InvalidVersion, Version
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from caplet._capabilities._model import Capability, CapabilityKind
from caplet._capabilities._parse import parse_capability
from caplet._config._coerce import type_name, validate_default, validate_value
from caplet._config._schema import ConfigField, ConfigType
from caplet._errors import CapabilityError, ConfigError, ManifestError
from caplet._manifest._model import (
    DEFAULT_HOOK_PRIORITY,
    HOOK_EVENT_PATTERN,
    MAX_HOOK_PRIORITY,
    MIN_HOOK_PRIORITY,
    FunctionSpec,
    Hints,
    Hook,
    Limits,
    Manifest,
    ModuleSpec,
    Requirement,
)
from caplet._manifest._names import MANIFEST_NAMES
from caplet._suggest import did_you_mean
from caplet._toml import TomlLimitError, parse_toml

__all__ = ["MAX_MANIFEST_BYTES", "find_manifest", "load_manifest"]

#: A manifest is a few kilobytes; refuse anything absurd before parsing it.
MAX_MANIFEST_BYTES = 1024 * 1024

_NAME_RE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]*")
_FUNCTION_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_HOOK_RE = re.compile(HOOK_EVENT_PATTERN)
_TOML_POSITION_RE = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")
_MAX_DESCRIPTION = 200
_ERROR_TYPE = "caplet"
#: Context key of a custom error: a location below the validated field.
_SUBLOC = "caplet_subloc"


# -- locating and parsing -----------------------------------------------------------


def find_manifest(plugin_dir: Path) -> Path:
    """The manifest file of ``plugin_dir``: ``plugin.toml`` or ``plugin.json``.

    Raises :class:`ManifestError` when the directory is missing, holds
    neither or both, or the manifest is not a regular file (a symlink could
    point anywhere outside the plugin tree that was hashed).
    """
    if not plugin_dir.is_dir():
        raise ManifestError(
            f"{plugin_dir}: not a plugin directory (missing or not a directory); pass the "
            f"directory that holds {' or '.join(MANIFEST_NAMES)}",
            path=str(plugin_dir),
        )
    present = [plugin_dir / name for name in MANIFEST_NAMES if os.path.lexists(plugin_dir / name)]
    if not present:
        raise ManifestError(
            f"{plugin_dir}: no manifest found; expected {' or '.join(MANIFEST_NAMES)} in "
            f"this directory",
            path=str(plugin_dir),
        )
    if len(present) > 1:
        raise ManifestError(
            f"{plugin_dir}: has both {' and '.join(MANIFEST_NAMES)}; keep one",
            path=str(plugin_dir),
        )
    path = present[0]
    if not stat.S_ISREG(path.lstat().st_mode):
        raise ManifestError(
            f"{path}: must be a regular file (not a symlink or directory); replace it with "
            f"the manifest itself",
            path=str(path),
        )
    return path


def _read(path: Path) -> dict[str, Any]:
    """Parse the manifest into plain data; the top level must be a table/object."""
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise ManifestError(
                f"{path}: manifest is {size} bytes, more than the limit of "
                f"{MAX_MANIFEST_BYTES}; a manifest only declares metadata",
                path=str(path),
            )
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ManifestError(
            f"{path}: cannot read the manifest ({exc.strerror or exc}); check that the file "
            f"is readable",
            path=str(path),
        ) from exc
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{path}: not valid UTF-8 (byte {exc.start}); save the manifest as UTF-8",
            path=str(path),
        ) from exc
    data = _parse_json(path, text) if path.suffix == ".json" else _parse_toml(path, text)
    if not isinstance(data, dict):
        raise ManifestError(
            f"{path}: the manifest must be an object/table at the top level, got {type_name(data)}",
            path=str(path),
        )
    return data


def _parse_toml(path: Path, text: str) -> object:
    try:
        return parse_toml(text)
    except TomlLimitError as exc:
        raise ManifestError(f"{path}: invalid TOML: {exc}", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's TOMLDecodeError has no lineno attribute: the position
        # is only in the message, "... (at line 3, column 7)".
        message = str(exc)
        match = _TOML_POSITION_RE.match(message)
        if match is None:
            where, what = "", message
        else:
            where, what = f":{match['line']}:{match['col']}", match["msg"]
        raise ManifestError(
            f"{path}{where}: invalid TOML: {what}; fix the syntax there "
            f"(https://toml.io/en/v1.0.0)",
            path=str(path),
        ) from exc
    except RecursionError as exc:
        raise ManifestError(f"{path}: invalid TOML: nested too deeply", path=str(path)) from exc


def _parse_json(path: Path, text: str) -> object:
    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise ManifestError(
                    f"{path}: duplicate key {key!r} in a JSON object; keep one",
                    path=str(path),
                    field=key,
                )
            result[key] = value
        return result

    def refuse_constant(name: str) -> Any:
        raise ManifestError(
            f"{path}: {name} is not valid JSON; write a finite number", path=str(path)
        )

    try:
        return json.loads(text, object_pairs_hook=pairs_hook, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg} (line {exc.lineno}, "
            f"column {exc.colno}); fix the syntax there",
            path=str(path),
        ) from exc
    except RecursionError as exc:
        raise ManifestError(f"{path}: invalid JSON: nested too deeply", path=str(path)) from exc


# -- validation context and field validators ------------------------------------------


@dataclass(frozen=True, slots=True)
class _Context:
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


def _context(info: ValidationInfo) -> _Context:
    context = info.context
    value = context.get("caplet") if isinstance(context, dict) else None
    if not isinstance(value, _Context):
        raise TypeError("internal error: manifest models must be validated with a _Context")
    return value


def _error(message: str, *subloc: str | int) -> PydanticCustomError:
    """A custom error; ``subloc`` extends the location below the validated field."""
    return PydanticCustomError(_ERROR_TYPE, message, {_SUBLOC: subloc} if subloc else None)


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
    try:
        return str(Version(value))
    except InvalidVersion as exc:
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
            f"{value!r} is not a declared function{did_you_mean(value, declared)}; declare it "
            f"under [modules.{module}] or name one of: {', '.join(declared) or 'none declared'}"
        )
    return value


def _check_hook_priority(value: int) -> int:
    if not MIN_HOOK_PRIORITY <= value <= MAX_HOOK_PRIORITY:
        raise _error(
            f"must be between {MIN_HOOK_PRIORITY} and {MAX_HOOK_PRIORITY} (lower runs first, "
            f"default {DEFAULT_HOOK_PRIORITY}), got {value}"
        )
    return value


def _check_hook_capability(value: str, info: ValidationInfo) -> str:
    context = _context(info)
    try:
        capability = parse_capability(
            value, config_names=context.config_names, allow_broad=context.allow_broad
        )
    except CapabilityError as exc:
        raise _error(str(exc)) from exc
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
    try:
        capability = parse_capability(
            value, config_names=context.config_names, allow_broad=context.allow_broad
        )
    except CapabilityError as exc:
        raise _error(str(exc)) from exc
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


class _FunctionModel(_Strict):
    description: str = ""
    args: dict[str, Any] | None = None
    returns: dict[str, Any] | None = None


class _ModuleModel(_Strict):
    description: str = ""
    functions: Annotated[
        dict[Annotated[str, AfterValidator(_check_function_name)], _FunctionModel],
        BeforeValidator(_functions_before),
    ]

    @field_validator("functions")
    @classmethod
    def _some_functions(cls, value: dict[str, _FunctionModel]) -> dict[str, _FunctionModel]:
        if not value:
            raise _error("declare at least one function")
        return value


class _HookModel(_Strict):
    function: Annotated[str, AfterValidator(_check_hook_function)]
    priority: Annotated[int, AfterValidator(_check_hook_priority)] = DEFAULT_HOOK_PRIORITY
    capability: Annotated[str, AfterValidator(_check_hook_capability)] | None = None
    description: str = ""


class _ConfigFieldModel(_Strict):
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
    def _consistent(self) -> _ConfigFieldModel:
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


class _HintsModel(_Strict):
    overview: str = ""
    related_modules: list[str] = Field(default_factory=list)
    critical_rules: list[str] = Field(default_factory=list)
    anti_patterns: list[str] = Field(default_factory=list)
    common_patterns: list[str] = Field(default_factory=list)


class _LimitsModel(_Strict):
    timeout_ms: PositiveInt | None = None
    memory_mb: PositiveInt | None = None
    cpu_s: PositiveInt | None = None
    max_output_kb: PositiveInt | None = None


class _ManifestModel(_Strict):
    name: Annotated[str, AfterValidator(_check_name)]
    version: Annotated[str, AfterValidator(_check_version)]
    description: Annotated[str, AfterValidator(_check_description)]
    # Checked when defaulted too: a plugin without its entry file must fail here, at
    # discovery, scan and approval, not first at enable (issue 15).
    entry: Annotated[str, AfterValidator(_check_entry), Field(validate_default=True)] = "plugin.py"
    modules: dict[Annotated[str, AfterValidator(_check_module_name)], _ModuleModel]
    hooks: Annotated[
        dict[Annotated[str, AfterValidator(_check_hook)], _HookModel],
        BeforeValidator(_hooks_before),
    ] = Field(default_factory=dict)
    capabilities: list[Annotated[str, AfterValidator(_check_capability)]] = Field(
        default_factory=list
    )
    config: dict[Annotated[str, AfterValidator(_check_config_name)], _ConfigFieldModel] = Field(
        default_factory=dict
    )
    hints: _HintsModel = Field(default_factory=_HintsModel)
    requires: list[Annotated[str, AfterValidator(_check_requirement)]] = Field(default_factory=list)
    limits: _LimitsModel = Field(default_factory=_LimitsModel)

    @field_validator("modules")
    @classmethod
    def _some_modules(cls, value: dict[str, _ModuleModel]) -> dict[str, _ModuleModel]:
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
    def _valid_defaults(cls, value: dict[str, _ConfigFieldModel]) -> dict[str, _ConfigFieldModel]:
        for name, model in value.items():
            try:
                validate_default(_config_field(name, model))
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


# -- loading ------------------------------------------------------------------------


def load_manifest(plugin_dir: Path, *, allow_broad: bool = False) -> Manifest:
    """Find, parse and validate the manifest of ``plugin_dir``.

    ``allow_broad`` is the policy exception of
    :func:`caplet._capabilities._parse.parse_capability` (``/`` and
    home-directory roots in fs capabilities). No plugin code is imported or
    executed. Raises :class:`ManifestError` with ``path`` set to the
    manifest (or the directory) and ``field`` to the first offending field.
    """
    path = find_manifest(plugin_dir)
    data = _read(path)
    config = data.get("config")
    raw_name = data.get("name")
    requires = data.get("requires")
    config_names = (
        tuple(k for k in config if isinstance(k, str)) if isinstance(config, dict) else ()
    )
    context = _Context(
        plugin_dir=plugin_dir,
        # abspath, not resolve(): the name the user sees is the directory as
        # given, even when it is a symlink to a differently named store.
        dir_name=Path(os.path.abspath(plugin_dir)).name,  # noqa: PTH100
        raw_name=raw_name if isinstance(raw_name, str) else None,
        config_names=config_names,
        has_requires=isinstance(requires, list) and bool(requires),
        allow_broad=allow_broad,
        functions=_raw_functions(data.get("modules")),
        capabilities=_raw_capabilities(data.get("capabilities"), config_names, allow_broad),
    )
    try:
        model = _ManifestModel.model_validate(data, context={"caplet": context})
    except ValidationError as exc:
        problems = [_problem(error) for error in exc.errors()]
        count = len(problems)
        lines = "\n".join(f"{where}: {what}" for where, what in problems)
        raise ManifestError(
            f"{path}: invalid manifest ({count} problem{'s' if count != 1 else ''}):\n{lines}",
            path=str(path),
            field=problems[0][0],
        ) from exc
    return _to_manifest(model, path, context)


def _raw_functions(modules: object) -> tuple[str, ...]:
    """``"module.function"`` for every function the raw ``modules`` table declares."""
    if not isinstance(modules, dict):
        return ()
    names: list[str] = []
    for module, table in modules.items():
        functions = table.get("functions") if isinstance(table, dict) else None
        if isinstance(functions, dict | list):
            names += [f"{module}.{f}" for f in functions if isinstance(f, str)]
    return tuple(names)


def _raw_capabilities(
    texts: object, config_names: tuple[str, ...], allow_broad: bool
) -> tuple[Capability, ...]:
    """The raw ``capabilities`` that parse (the others are reported by their own field)."""
    if not isinstance(texts, list):
        return ()
    parsed: list[Capability] = []
    for text in texts:
        if not isinstance(text, str):
            continue
        try:
            parsed.append(
                parse_capability(text, config_names=config_names, allow_broad=allow_broad)
            )
        except CapabilityError:
            continue
    return tuple(parsed)


def _config_field(name: str, model: _ConfigFieldModel) -> ConfigField:
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


def _to_manifest(model: _ManifestModel, path: Path, context: _Context) -> Manifest:
    """Build the immutable manifest from a model that validated (so nothing fails here)."""
    config: list[ConfigField] = []
    for name, field_model in model.config.items():
        config_field = _config_field(name, field_model)
        if config_field.default is not None:
            # Normalise the default as a value (int -> float for numbers,
            # list -> tuple for arrays); it is known to be valid.
            default = validate_value(model.name, config_field, config_field.default)
            config_field = dataclasses.replace(config_field, default=default)
        config.append(config_field)
    capabilities: list[Capability] = [
        parse_capability(text, config_names=context.config_names, allow_broad=context.allow_broad)
        for text in model.capabilities
    ]
    requires = []
    for text in model.requires:
        requirement = PackagingRequirement(text)
        requires.append(Requirement(requirement.name, str(requirement.specifier)))
    return Manifest(
        name=model.name,
        version=model.version,
        description=model.description,
        modules=tuple(
            ModuleSpec(
                name=module_name,
                functions=tuple(
                    FunctionSpec(
                        name=function_name,
                        description=function.description,
                        args_schema=_frozen(function.args),
                        returns_schema=_frozen(function.returns),
                    )
                    for function_name, function in module.functions.items()
                ),
                description=module.description,
            )
            for module_name, module in model.modules.items()
        ),
        path=path,
        entry=model.entry,
        hooks=tuple(
            _hook(event, hook, capabilities, context) for event, hook in model.hooks.items()
        ),
        capabilities=tuple(capabilities),
        config=tuple(config),
        hints=Hints(
            overview=model.hints.overview,
            related_modules=tuple(model.hints.related_modules),
            critical_rules=tuple(model.hints.critical_rules),
            anti_patterns=tuple(model.hints.anti_patterns),
            common_patterns=tuple(model.hints.common_patterns),
        ),
        requires=tuple(requires),
        limits=Limits(
            timeout_ms=model.limits.timeout_ms,
            memory_mb=model.limits.memory_mb,
            cpu_s=model.limits.cpu_s,
            max_output_kb=model.limits.max_output_kb,
        ),
    )


def _hook(event: str, model: _HookModel, declared: Sequence[Capability], context: _Context) -> Hook:
    capability: Capability | None = None
    if model.capability is not None:
        wanted = parse_capability(
            model.capability, config_names=context.config_names, allow_broad=context.allow_broad
        )
        # The declared object itself, so its ``declared`` text is the one
        # approvals and lock entries record.
        capability = next(c for c in declared if c == wanted)
    module, _, function = model.function.partition(".")
    return Hook(
        event=event,
        module=module,
        function=function,
        priority=model.priority,
        capability=capability,
        description=model.description,
    )


def _frozen(schema: dict[str, Any] | None) -> Mapping[str, object] | None:
    return MappingProxyType(dict(schema)) if schema is not None else None


# -- translating pydantic errors ------------------------------------------------------


def _fields_at(loc: tuple[str | int, ...]) -> tuple[str, ...]:
    """The field names allowed at ``loc`` (for did-you-mean on unknown keys)."""
    model: type[BaseModel]
    match loc:
        case ():
            model = _ManifestModel
        case ("hints",):
            model = _HintsModel
        case ("limits",):
            model = _LimitsModel
        case ("modules", _):
            model = _ModuleModel
        case ("modules", _, "functions", _):
            model = _FunctionModel
        case ("config", _):
            model = _ConfigFieldModel
        case ("hooks", _):
            model = _HookModel
        case _:
            return ()
    return tuple(model.model_fields)


def _problem(error: ErrorDetails) -> tuple[str, str]:
    """``(dotted.field, problem)`` for one pydantic error."""
    loc = tuple(part for part in error["loc"] if part != "[key]")
    ctx = error.get("ctx") or {}
    subloc = ctx.get(_SUBLOC)
    if isinstance(subloc, tuple):
        loc = loc + subloc
    kind = error["type"]
    value = error["input"]
    expected = {
        "string_type": "a string",
        "int_type": "an integer",
        "float_type": "a number",
        "bool_type": "a boolean (true or false)",
        "list_type": "an array",
        "dict_type": "an object/table",
        "model_type": "an object/table",
        "model_attributes_type": "an object/table",
    }
    if kind == _ERROR_TYPE:
        what = error["msg"]
    elif kind == "missing":
        what = "required field missing"
    elif kind == "extra_forbidden":
        key = str(loc[-1])
        hint = did_you_mean(key, _fields_at(loc[:-1]))
        what = f"unknown field {key!r}{hint}"
        if not hint:
            what += f"; known fields: {', '.join(_fields_at(loc[:-1]))}"
    elif kind in expected:
        what = f"expected {expected[kind]}, got {type_name(value)}"
    elif kind == "greater_than" and ctx.get("gt") == 0:
        what = f"must be a positive integer, got {value!r}"
    else:
        what = error["msg"]
    return _dotted(loc), what


def _dotted(loc: tuple[str | int, ...]) -> str:
    """``('modules', 'greet', 'functions')`` -> ``modules.greet.functions``; ints as ``[i]``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text
