"""Find, parse and validate a plugin manifest (``plugin.toml`` or ``plugin.json``).

Reading a manifest is purely declarative: no plugin code is imported or
executed (the entry file is only checked to exist as a regular file), so a
manifest can be shown and validated before anything of the plugin runs
(design.md section 3, defence layer 1).

The file is read by :mod:`caplet._manifest._read` and validated by the
pydantic models of :mod:`caplet._manifest._schema` (an internal detail);
every problem they find is translated here into one :class:`ManifestError`
whose message starts with the manifest path and lists each problem on its
own line as ``<dotted.field>: <problem>``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.requirements import Requirement as PackagingRequirement
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from caplet._capabilities._model import Capability
from caplet._capabilities._parse import parse_capability
from caplet._config._coerce import type_name, validate_value
from caplet._config._schema import ConfigField
from caplet._errors import CapabilityError, ManifestError
from caplet._manifest._model import (
    FunctionSpec,
    Hints,
    Hook,
    Limits,
    Manifest,
    ModuleSpec,
    Requirement,
)
from caplet._manifest._read import MAX_MANIFEST_BYTES, find_manifest, read_manifest_data
from caplet._manifest._schema import (
    ERROR_TYPE,
    SUBLOC,
    HookModel,
    ManifestContext,
    ManifestModel,
    config_field,
    fields_at,
)
from caplet._suggest import did_you_mean

__all__ = ["MAX_MANIFEST_BYTES", "find_manifest", "load_manifest"]


# -- loading ------------------------------------------------------------------------


def load_manifest(
    plugin_dir: Path,
    *,
    allow_broad: bool = False,
    hashed: Mapping[str, bytes] | None = None,
) -> Manifest:
    """Find, parse and validate the manifest of ``plugin_dir``.

    ``allow_broad`` is the policy exception of
    :func:`caplet._capabilities._parse.parse_capability` (``/`` and
    home-directory roots in fs capabilities). ``hashed``: the manifest
    files' bytes as the tree hash read them
    (:func:`caplet._trust._hashing.tree_hash_keeping`), parsed instead of the
    file read again, so the manifest belongs to the hashed content (a
    manifest the hash did not read is a folder that changed meanwhile). No
    plugin code is imported or executed. Raises :class:`ManifestError` with
    ``path`` set to the manifest (or the directory) and ``field`` to the
    first offending field.
    """
    path = find_manifest(plugin_dir)
    if hashed is not None and path.name not in hashed:
        raise ManifestError(
            f"{path}: changed while the plugin was hashed; retry once nothing is writing "
            "to the plugin",
            path=str(path),
        )
    data = read_manifest_data(path, None if hashed is None else hashed[path.name])
    config = data.get("config")
    raw_name = data.get("name")
    requires = data.get("requires")
    config_names = (
        tuple(k for k in config if isinstance(k, str)) if isinstance(config, dict) else ()
    )
    context = ManifestContext(
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
        model = ManifestModel.model_validate(data, context={"caplet": context})
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


def _to_manifest(model: ManifestModel, path: Path, context: ManifestContext) -> Manifest:
    """Build the immutable manifest from a model that validated (so nothing fails here)."""
    config: list[ConfigField] = []
    for name, field_model in model.config.items():
        declared = config_field(name, field_model)
        if declared.default is not None:
            # Normalise the default as a value (int -> float for numbers,
            # list -> tuple for arrays); it is known to be valid.
            default = validate_value(model.name, declared, declared.default)
            declared = dataclasses.replace(declared, default=default)
        config.append(declared)
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


def _hook(
    event: str, model: HookModel, declared: Sequence[Capability], context: ManifestContext
) -> Hook:
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


def _problem(error: ErrorDetails) -> tuple[str, str]:
    """``(dotted.field, problem)`` for one pydantic error."""
    loc = tuple(part for part in error["loc"] if part != "[key]")
    ctx = error.get("ctx") or {}
    subloc = ctx.get(SUBLOC)
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
    if kind == ERROR_TYPE:
        what = error["msg"]
    elif kind == "missing":
        what = "required field missing"
    elif kind == "extra_forbidden":
        key = str(loc[-1])
        hint = did_you_mean(key, fields_at(loc[:-1]))
        what = f"unknown field {key!r}{hint}"
        if not hint:
            what += f"; known fields: {', '.join(fields_at(loc[:-1]))}"
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
