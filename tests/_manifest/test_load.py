"""Manifest discovery, parsing and validation (TOML and JSON)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from caplet._capabilities._model import CapabilityKind, FsCapability
from caplet._config._schema import ConfigField, ConfigType
from caplet._errors import ManifestError
from caplet._manifest._load import MAX_MANIFEST_BYTES, find_manifest, load_manifest
from caplet._manifest._model import (
    DEFAULT_HOOK_PRIORITY,
    FunctionSpec,
    Hints,
    Hook,
    Limits,
    Requirement,
)

BASE_TOML = """\
name = "{name}"
version = "1.0.0"
description = "A test plugin."

[modules.greet]
functions = ["say"]
"""

ENTRY = "def create_functions(config):\n    return {}\n"


def write_plugin(
    root: Path,
    manifest: str | None = None,
    *,
    name: str = "demo",
    json_data: dict[str, Any] | None = None,
    json_text: str | None = None,
    entry: str | None = "plugin.py",
) -> Path:
    """A plugin directory with a TOML or JSON manifest and an entry file."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    if json_data is not None or json_text is not None:
        text = json_text if json_text is not None else json.dumps(json_data)
        (directory / "plugin.json").write_text(text, encoding="utf-8")
    else:
        text = manifest if manifest is not None else BASE_TOML
        (directory / "plugin.toml").write_text(
            textwrap.dedent(text).format(name=name), encoding="utf-8"
        )
    if entry is not None:
        (directory / entry).parent.mkdir(parents=True, exist_ok=True)
        (directory / entry).write_text(ENTRY, encoding="utf-8")
    return directory


def toml_with(extra: str, *, name: str = "demo") -> str:
    """BASE_TOML with top-level keys inserted before the first table."""
    head, _, tail = BASE_TOML.partition("[modules.greet]")
    return head.format(name=name) + textwrap.dedent(extra) + "\n[modules.greet]" + tail


def load_error(directory: Path, *, allow_broad: bool = False) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load_manifest(directory, allow_broad=allow_broad)
    return info.value


def problem_lines(error: ManifestError) -> list[str]:
    return str(error).splitlines()[1:]


def base_json(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "demo",
        "version": "1.0.0",
        "description": "A test plugin.",
        "modules": {"greet": {"functions": ["say"]}},
    }
    data.update(changes)
    return data


# -- finding the manifest -----------------------------------------------------------


def test_find_manifest_toml_and_json(tmp_path: Path) -> None:
    toml_dir = write_plugin(tmp_path, name="a")
    json_dir = write_plugin(tmp_path, name="b", json_data=base_json(name="b"))
    assert find_manifest(toml_dir) == toml_dir / "plugin.toml"
    assert find_manifest(json_dir) == json_dir / "plugin.json"


def test_both_manifests_is_an_error(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path)
    (directory / "plugin.json").write_text(json.dumps(base_json()), encoding="utf-8")
    error = load_error(directory)
    assert str(error) == f"{directory}: has both plugin.toml and plugin.json; keep one"
    assert error.path == str(directory)


def test_no_manifest_names_directory_and_expected_files(tmp_path: Path) -> None:
    directory = tmp_path / "empty"
    directory.mkdir()
    with pytest.raises(ManifestError) as info:
        find_manifest(directory)
    message = str(info.value)
    assert message.startswith(f"{directory}: no manifest found")
    assert "expected plugin.toml or plugin.json" in message
    assert info.value.path == str(directory)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="not a plugin directory"):
        find_manifest(tmp_path / "nope")


def test_symlinked_manifest_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    directory.mkdir()
    real = tmp_path / "elsewhere.toml"
    real.write_text(BASE_TOML.format(name="demo"), encoding="utf-8")
    (directory / "plugin.toml").symlink_to(real)
    with pytest.raises(ManifestError, match="must be a regular file"):
        find_manifest(directory)


# -- a valid manifest ---------------------------------------------------------------

FULL_TOML = """\
name = "fs-read"
version = "1.2.0"
description = "Reads text files under one configured directory."
entry = "src/main.py"
capabilities = [
    "fs.read:${{config.root}}",
    "net.http:https://api.example.com/v1/",
    "host.call:other_mod",
]
requires = ["other-plugin>=1.0,<2", "third"]

[modules.files]
description = "Read-only file access."

[modules.files.functions.read_text]
description = "Return a file's text."
args = {{ type = "object", properties = {{ path = {{ type = "string" }} }} }}
returns = {{ type = "string" }}

[modules.files.functions.list_dir]

[modules.greet]
functions = ["say", "shout"]

[config.root]
type = "string"
description = "Directory to read"
prompt = true

[config.max_kb]
type = "integer"
default = 256
minimum = 1
maximum = 10240

[config.ratio]
type = "number"
default = 1

[config.tags]
type = "array"
items = "integer"
default = [1, 2]
max_length = 5

[config.token]
type = "string"
secret = true

[hooks]
"content:afterSave" = "files.read_text"

[hooks."content:beforeDelete"]
function = "greet.say"
priority = 10
capability = "net.http:https://api.example.com/v1"
description = "Says goodbye."

[hints]
overview = "Reads files."
related_modules = ["greet"]
critical_rules = ["No absolute paths."]
anti_patterns = ["Reading /etc."]
common_patterns = ["files.read_text('a.md')"]

[limits]
timeout_ms = 2000
memory_mb = 128
cpu_s = 5
max_output_kb = 512
"""


def test_full_toml_manifest(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, FULL_TOML, name="fs-read", entry="src/main.py")
    manifest = load_manifest(directory)
    assert manifest.name == "fs-read"
    assert manifest.version == "1.2.0"
    assert manifest.path == directory / "plugin.toml"
    assert manifest.plugin_dir == directory
    assert manifest.entry == "src/main.py"
    assert manifest.hooks == (
        Hook("content:afterSave", "files", "read_text"),
        Hook(
            "content:beforeDelete",
            "greet",
            "say",
            priority=10,
            capability=manifest.capabilities[1],
            description="Says goodbye.",
        ),
    )
    assert manifest.hooks[0].priority == DEFAULT_HOOK_PRIORITY
    assert manifest.hooks[0].target == "files.read_text"
    before_delete = manifest.hook("content:beforeDelete")
    assert before_delete is not None
    assert before_delete.capability is not None
    # Matched by meaning, and the declared spelling is kept (approvals record it).
    assert before_delete.capability.declared == "net.http:https://api.example.com/v1/"
    assert manifest.hook("content:afterDelete") is None
    assert [m.name for m in manifest.modules] == ["files", "greet"]
    files = manifest.modules[0]
    assert files.description == "Read-only file access."
    assert files.function_names == ("read_text", "list_dir")
    read_text = files.functions[0]
    assert isinstance(read_text.args_schema, MappingProxyType)
    assert read_text.args_schema["type"] == "object"
    assert read_text.returns_schema == {"type": "string"}
    assert files.functions[1] == FunctionSpec("list_dir")
    assert manifest.modules[1].function_names == ("say", "shout")
    caps = manifest.capabilities
    assert isinstance(caps[0], FsCapability)
    assert caps[0].templated
    assert str(caps[1]) == "net.http:https://api.example.com/v1"
    assert caps[2].kind is CapabilityKind.HOST_CALL
    assert manifest.config_field("root") == ConfigField(
        "root", ConfigType.STRING, description="Directory to read", prompt=True
    )
    assert manifest.config_field("max_kb") == ConfigField(
        "max_kb", ConfigType.INTEGER, default=256, minimum=1, maximum=10240
    )
    ratio = manifest.config_field("ratio")
    assert ratio is not None
    assert isinstance(ratio.default, float)
    tags = manifest.config_field("tags")
    assert tags is not None
    assert tags.items is ConfigType.INTEGER
    assert tags.default == (1, 2)
    token = manifest.config_field("token")
    assert token is not None
    assert token.secret
    assert manifest.hints == Hints(
        overview="Reads files.",
        related_modules=("greet",),
        critical_rules=("No absolute paths.",),
        anti_patterns=("Reading /etc.",),
        common_patterns=("files.read_text('a.md')",),
    )
    assert manifest.requires == (Requirement("other-plugin", "<2,>=1.0"), Requirement("third"))
    assert manifest.limits == Limits(timeout_ms=2000, memory_mb=128, cpu_s=5, max_output_kb=512)


def test_minimal_manifest_defaults(tmp_path: Path) -> None:
    manifest = load_manifest(write_plugin(tmp_path))
    assert manifest.entry == "plugin.py"
    assert manifest.capabilities == ()
    assert manifest.config == ()
    assert manifest.hints == Hints()
    assert manifest.limits == Limits()
    assert manifest.requires == ()


def test_json_form_matches_toml_form(tmp_path: Path) -> None:
    data = base_json(
        name="both",
        capabilities=["fs.read:/srv/data"],
        modules={
            "greet": {
                "description": "Greetings.",
                "functions": {"say": {"description": "Say hi.", "args": {"type": "object"}}},
            }
        },
        config={"greeting": {"type": "string", "default": "Hello", "max_length": 40}},
    )
    json_manifest = load_manifest(write_plugin(tmp_path / "j", name="both", json_data=data))
    toml_text = """\
        name = "both"
        version = "1.0.0"
        description = "A test plugin."
        capabilities = ["fs.read:/srv/data"]
        [modules.greet]
        description = "Greetings."
        [modules.greet.functions.say]
        description = "Say hi."
        args = {{ type = "object" }}
        [config.greeting]
        type = "string"
        default = "Hello"
        max_length = 40
    """
    toml_manifest = load_manifest(write_plugin(tmp_path / "t", toml_text, name="both"))
    assert json_manifest.modules == toml_manifest.modules
    assert json_manifest.config == toml_manifest.config
    assert json_manifest.capabilities == toml_manifest.capabilities


def test_reading_a_manifest_never_imports_the_entry(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path)
    marker = tmp_path / "imported.marker"
    (directory / "plugin.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit('imported!')\n",
        encoding="utf-8",
    )
    manifest = load_manifest(directory)
    assert manifest.name == "demo"
    assert not marker.exists()


# -- syntax errors --------------------------------------------------------------------


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, 'name = "demo"\nversion = \n')
    error = load_error(directory)
    path = directory / "plugin.toml"
    assert str(error).startswith(f"{path}:2:")
    assert "invalid TOML" in str(error)
    assert error.path == str(path)


def test_json_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, json_text='{\n  "name": "demo",\n  oops\n}')
    error = load_error(directory)
    path = directory / "plugin.json"
    assert str(error).startswith(f"{path}:3:3: invalid JSON")
    assert "(line 3, column 3)" in str(error)


def test_json_duplicate_keys_are_refused(tmp_path: Path) -> None:
    directory = write_plugin(
        tmp_path, json_text='{"name": "demo", "name": "other", "version": "1.0.0"}'
    )
    error = load_error(directory)
    assert "duplicate key 'name' in a JSON object; keep one" in str(error)
    assert error.field == "name"


def test_json_nan_is_refused(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, json_text='{"limits": {"timeout_ms": NaN}}')
    assert "NaN is not valid JSON" in str(load_error(directory))


@pytest.mark.parametrize("text", ["[1, 2]", '"just a string"', "3"])
def test_top_level_must_be_an_object(tmp_path: Path, text: str) -> None:
    error = load_error(write_plugin(tmp_path, json_text=text))
    assert "must be an object/table" in str(error)


def test_invalid_utf8(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path)
    (directory / "plugin.toml").write_bytes(b'name = "\xff"\n')
    assert "not valid UTF-8" in str(load_error(directory))


def test_oversized_manifest(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path)
    (directory / "plugin.toml").write_text("#" * (MAX_MANIFEST_BYTES + 1), encoding="utf-8")
    assert "more than the limit" in str(load_error(directory))


# -- required fields and types ---------------------------------------------------------


def test_missing_required_fields_each_named(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, 'entry = "plugin.py"\n')
    error = load_error(directory)
    path = directory / "plugin.toml"
    message = str(error)
    assert message.startswith(f"{path}: invalid manifest (4 problems):")
    assert problem_lines(error) == [
        "name: required field missing",
        "version: required field missing",
        "description: required field missing",
        "modules: required field missing",
    ]
    assert error.field == "name"
    assert error.path == str(path)


def test_wrong_type_names_expected_type(tmp_path: Path) -> None:
    manifest = BASE_TOML.replace('version = "1.0.0"', "version = 1")
    error = load_error(write_plugin(tmp_path, manifest))
    assert problem_lines(error) == ["version: expected a string, got integer"]
    assert error.field == "version"


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            'hooks = "content:afterSave"',
            "hooks: expected a table mapping each event to its function, got string; "
            'e.g. [hooks] "content:afterSave" = "module.function"',
        ),
        ("capabilities = [1]", "capabilities[0]: expected a string, got integer"),
        ("hints = 3", "hints: expected an object/table, got integer"),
        ("requires = [true]", "requires[0]: expected a string, got boolean"),
    ],
)
def test_type_errors_in_other_fields(tmp_path: Path, extra: str, line: str) -> None:
    error = load_error(write_plugin(tmp_path, toml_with(extra)))
    assert problem_lines(error) == [line]


def test_all_problems_are_listed_together(tmp_path: Path) -> None:
    manifest = """\
        name = "Demo"
        version = "v1"
        description = 5
        capabilites = []
        [modules]
    """
    error = load_error(write_plugin(tmp_path, manifest))
    lines = problem_lines(error)
    assert lines[0].startswith("name: ")
    assert lines[1].startswith("version: ")
    assert lines[2] == "description: expected a string, got integer"
    assert "modules: declare at least one module" in lines
    assert "capabilites: unknown field 'capabilites' (did you mean 'capabilities'?)" in lines
    assert str(error).startswith(
        f"{tmp_path / 'demo' / 'plugin.toml'}: invalid manifest (5 problems):"
    )


def test_unknown_field_without_close_match_lists_known_fields(tmp_path: Path) -> None:
    error = load_error(write_plugin(tmp_path, toml_with('zzzzzzzz = "x"')))
    (line,) = problem_lines(error)
    assert line.startswith("zzzzzzzz: unknown field 'zzzzzzzz'; known fields: name, version")


def test_unknown_nested_fields_suggest(tmp_path: Path) -> None:
    manifest = BASE_TOML + '[limits]\ntimeout = 5\n[config.x]\ntype = "string"\ndefualt = "a"\n'
    error = load_error(write_plugin(tmp_path, manifest))
    assert problem_lines(error) == [
        "config.x.defualt: unknown field 'defualt' (did you mean 'default'?)",
        "limits.timeout: unknown field 'timeout' (did you mean 'timeout_ms'?)",
    ]


# -- name, version, description, entry ---------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "suggestion"),
    [
        ("My_Plugin", "my-plugin"),
        ("fsRead", "fs-read"),
        ("fs--read", "fs-read"),
        ("9lives", "lives"),
    ],
)
def test_name_must_be_kebab_case(tmp_path: Path, bad: str, suggestion: str) -> None:
    manifest = BASE_TOML.replace('name = "{name}"', f'name = "{bad}"')
    error = load_error(write_plugin(tmp_path, manifest, name="demo"))
    (line,) = problem_lines(error)
    assert line.startswith(f"name: '{bad}' is not kebab-case")
    assert line.endswith(f"use '{suggestion}'")


def test_name_must_equal_directory(tmp_path: Path) -> None:
    manifest = BASE_TOML.replace('name = "{name}"', 'name = "other"')
    error = load_error(write_plugin(tmp_path, manifest, name="demo"))
    assert problem_lines(error) == [
        "name: 'other' does not match the plugin directory name 'demo'; rename the "
        "directory to 'other' or set name = 'demo'"
    ]
    assert error.field == "name"


@pytest.mark.parametrize("version", ["v1.0.0", "V2"])
def test_version_leading_v(tmp_path: Path, version: str) -> None:
    manifest = BASE_TOML.replace('"1.0.0"', f'"{version}"')
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line.startswith(f"version: '{version}' has a leading")
    assert line.endswith("use a bare version, e.g. 1.0.0")


@pytest.mark.parametrize("version", ["1.0.x", "latest", ""])
def test_version_must_be_pep440(tmp_path: Path, version: str) -> None:
    manifest = BASE_TOML.replace('"1.0.0"', f'"{version}"')
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert (
        line
        == f"version: '{version}' is not a valid PEP 440 version; use a bare version, e.g. 1.0.0"
    )


@pytest.mark.parametrize(
    "version",
    ["9" * 5_000, "1.0.0+" + "a" * 10_000, "1!" + ".".join(["0"] * 3_000)],
    ids=["digits", "local", "segments"],
)
def test_a_version_longer_than_any_release_is_refused(tmp_path: Path, version: str) -> None:
    # attack29: 5,000 digits raised int()'s digit limit inside the validator (pydantic
    # showed Python's text); the others were listed, and asked about, whole.
    manifest = BASE_TOML.replace('"1.0.0"', f'"{version}"')
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line.startswith(f"version: {version[:40]!r}... is {len(version)} characters;")
    assert "a version is at most 64" in line


def test_a_required_version_past_the_digit_limit_is_refused_at_load(tmp_path: Path) -> None:
    # attack29: packaging parses a specifier's version only when it compares, so the
    # manifest loaded and the enable raised the digit limit's ValueError (exit 70).
    manifest = toml_with(f'requires = ["base>=1.{"9" * 5_000}"]')
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line.startswith("requires[0]: invalid requirement 'base>=1.999")
    assert "a version in it is too long" in line


def test_a_long_release_version_and_requirement_still_load(tmp_path: Path) -> None:
    version = "2024.10.1.dev20241012+g1234567abcdef.d20241012"
    manifest = toml_with('requires = ["base>=2024.10.1.dev20241012,<2025"]').replace(
        '"1.0.0"', f'"{version}"'
    )
    loaded = load_manifest(write_plugin(tmp_path, manifest))
    assert loaded.version == version
    assert [r.name for r in loaded.requires] == ["base"]


def test_version_is_normalised(tmp_path: Path) -> None:
    manifest = BASE_TOML.replace('"1.0.0"', '"1.0.0-RC1"')
    assert load_manifest(write_plugin(tmp_path, manifest)).version == "1.0.0rc1"


@pytest.mark.parametrize(
    ("description", "phrase"),
    [
        ('"two\\nlines"', "must be one line"),
        (f'"{"x" * 201}"', "must be at most 200 characters, got 201"),
        ('"  "', "must not be empty"),
    ],
)
def test_description_rules(tmp_path: Path, description: str, phrase: str) -> None:
    manifest = BASE_TOML.replace('"A test plugin."', description)
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line.startswith(f"description: {phrase}")


def test_description_of_200_characters_is_fine(tmp_path: Path) -> None:
    manifest = BASE_TOML.replace("A test plugin.", "x" * 200)
    assert len(load_manifest(write_plugin(tmp_path, manifest)).description) == 200


@pytest.mark.parametrize(
    ("entry", "phrase"),
    [
        ("/etc/passwd.py", "must be a relative path inside the plugin directory"),
        ("../outside.py", "must not contain '..' components"),
        ("main.txt", "must be a Python file ending in .py"),
        ("missing.py", "'missing.py' does not exist in"),
        ("pkg", "must be a Python file ending in .py"),
    ],
)
def test_entry_rules(tmp_path: Path, entry: str, phrase: str) -> None:
    error = load_error(write_plugin(tmp_path, toml_with(f'entry = "{entry}"')))
    (line,) = problem_lines(error)
    assert line.startswith("entry: ")
    assert phrase in line
    assert error.field == "entry"


def test_entry_must_be_a_regular_file(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, toml_with('entry = "pkg.py"'))
    (directory / "pkg.py").mkdir()
    (line,) = problem_lines(load_error(directory))
    assert "must be a regular file" in line


def test_entry_symlink_is_refused(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, toml_with('entry = "link.py"'))
    (directory / "link.py").symlink_to(directory / "plugin.py")
    (line,) = problem_lines(load_error(directory))
    assert "must be a regular file (not a symlink or directory)" in line


def test_entry_through_symlinked_directory_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "main.py").write_text(ENTRY, encoding="utf-8")
    directory = write_plugin(tmp_path, toml_with('entry = "sub/main.py"'))
    (directory / "sub").symlink_to(outside)
    (line,) = problem_lines(load_error(directory))
    assert "resolves outside the plugin directory" in line


# -- modules ------------------------------------------------------------------------------


def test_modules_empty(tmp_path: Path) -> None:
    error = load_error(write_plugin(tmp_path, json_data=base_json(modules={})))
    assert problem_lines(error) == ["modules: declare at least one module"]
    assert error.field == "modules"


def test_module_without_functions(tmp_path: Path) -> None:
    error = load_error(
        write_plugin(tmp_path, json_data=base_json(modules={"greet": {"functions": []}}))
    )
    assert problem_lines(error) == ["modules.greet.functions: declare at least one function"]


def test_module_functions_missing(tmp_path: Path) -> None:
    error = load_error(
        write_plugin(tmp_path, json_data=base_json(modules={"greet": {"description": "x"}}))
    )
    assert problem_lines(error) == ["modules.greet.functions: required field missing"]


@pytest.mark.parametrize("name", ["Greet", "1mod", "my-mod", "import"])
def test_module_names(tmp_path: Path, name: str) -> None:
    data = base_json(modules={name: {"functions": ["say"]}})
    (line,) = problem_lines(load_error(write_plugin(tmp_path, json_data=data)))
    assert line.startswith(f"modules.{name}: invalid module name '{name}'")


@pytest.mark.parametrize("name", ["_private", "class", "with space", "é"])
def test_function_names(tmp_path: Path, name: str) -> None:
    data = base_json(modules={"greet": {"functions": [name]}})
    (line,) = problem_lines(load_error(write_plugin(tmp_path, json_data=data)))
    assert line.startswith("modules.greet.functions")
    assert f"invalid function name '{name}'" in line


def test_function_list_items_must_be_strings(tmp_path: Path) -> None:
    data = base_json(modules={"greet": {"functions": ["say", 3]}})
    (line,) = problem_lines(load_error(write_plugin(tmp_path, json_data=data)))
    assert line == "modules.greet.functions[1]: expected a function name, got integer"


def test_function_listed_twice(tmp_path: Path) -> None:
    data = base_json(modules={"greet": {"functions": ["say", "say"]}})
    (line,) = problem_lines(load_error(write_plugin(tmp_path, json_data=data)))
    assert line == "modules.greet.functions[1]: function 'say' is listed twice; keep one"


def test_functions_of_wrong_type(tmp_path: Path) -> None:
    data = base_json(modules={"greet": {"functions": "say"}})
    (line,) = problem_lines(load_error(write_plugin(tmp_path, json_data=data)))
    assert line == (
        "modules.greet.functions: expected a list of function names or a table of "
        "functions, got string"
    )


def test_function_schema_must_be_an_object(tmp_path: Path) -> None:
    data = base_json(modules={"greet": {"functions": {"say": {"args": "string"}}}})
    (line,) = problem_lines(load_error(write_plugin(tmp_path, json_data=data)))
    assert line == "modules.greet.functions.say.args: expected an object/table, got string"


# -- hooks, capabilities, requires ---------------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "where"),
    [
        ("afterSave", "hooks.afterSave"),
        ("Content:afterSave", "hooks['Content:afterSave']"),
        ("content:", "hooks['content:']"),
        ("content:after save", "hooks['content:after save']"),
    ],
)
def test_invalid_hook_event_names(tmp_path: Path, hook: str, where: str) -> None:
    directory = write_plugin(tmp_path, toml_with(f'hooks = {{{{ "{hook}" = "greet.say" }}}}'))
    (line,) = problem_lines(load_error(directory))
    assert line == (
        f"{where}: invalid hook '{hook}'; expected '<namespace>:<event>', e.g. content:afterSave"
    )


def test_the_old_list_form_of_hooks_is_refused_with_its_replacement(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, toml_with('hooks = ["a:b", "c:d"]'))
    error = load_error(directory)
    assert error.path == str(directory / "plugin.toml")
    assert error.field == "hooks"
    assert problem_lines(error) == [
        "hooks: the list form of hooks is no longer supported: each event must name the "
        'declared function that handles it; replace it with a table, hooks = { "a:b" = '
        '"module.function", "c:d" = "module.function" } (or a [hooks."<event>"] table with '
        "function, priority, capability, description; in plugin.json an object, "
        '"hooks": {"<event>": "module.function"})'
    ]


HOOK_TOML = """\
name = "{name}"
version = "1.0.0"
description = "A test plugin."
capabilities = ["app:email.send"]

[modules.greet]
functions = ["say", "shout"]

[hooks."content:afterSave"]
"""


@pytest.mark.parametrize(
    ("table", "line"),
    [
        (
            'function = "greet.sya"',
            "hooks['content:afterSave'].function: 'greet.sya' is not a declared function "
            "(did you mean 'greet.say'?); declare it under [modules.greet] or name one of: "
            "greet.say, greet.shout",
        ),
        (
            'function = "say"',
            "hooks['content:afterSave'].function: 'say' is not 'module.function'; name the "
            "declared function that handles the event, e.g. 'greet.say'",
        ),
        (
            'function = "greet.say"\npriority = 1001',
            "hooks['content:afterSave'].priority: must be between 0 and 1000 (lower runs first, "
            "default 500), got 1001",
        ),
        (
            'function = "greet.say"\npriority = true',
            "hooks['content:afterSave'].priority: expected an integer, got boolean",
        ),
        (
            'function = "greet.say"\ncapability = "app:email.read"',
            "hooks['content:afterSave'].capability: 'app:email.read' is not one of the plugin's "
            "capabilities (did you mean 'app:email.send'?); a hook can only need what the "
            "plugin declares, so add it to capabilities (declared: app:email.send)",
        ),
        (
            'function = "greet.say"\npriorty = 3',
            "hooks['content:afterSave'].priorty: unknown field 'priorty' (did you mean "
            "'priority'?)",
        ),
        ("priority = 3", "hooks['content:afterSave'].function: required field missing"),
    ],
)
def test_hook_table_problems_name_the_field(tmp_path: Path, table: str, line: str) -> None:
    directory = write_plugin(tmp_path, HOOK_TOML + table + "\n")
    error = load_error(directory)
    assert problem_lines(error) == [line]
    assert str(error).startswith(f"{directory / 'plugin.toml'}: invalid manifest (1 problem)")


def test_hook_capability_that_does_not_parse(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, HOOK_TOML + 'function = "greet.say"\ncapability = "x"\n')
    (line,) = problem_lines(load_error(directory))
    assert line.startswith("hooks['content:afterSave'].capability: ")
    assert "'x'" in line


def test_hooks_in_json_match_toml(tmp_path: Path) -> None:
    data = base_json(
        capabilities=["app:email.send"],
        hooks={
            "content:afterSave": "greet.say",
            "user:created": {
                "function": "greet.say",
                "priority": 0,
                "capability": "app:email.send",
            },
        },
    )
    json_manifest = load_manifest(write_plugin(tmp_path / "j", json_data=data))
    toml_text = HOOK_TOML.replace('functions = ["say", "shout"]', 'functions = ["say"]') + (
        'function = "greet.say"\n'
        '[hooks."user:created"]\nfunction = "greet.say"\npriority = 0\n'
        'capability = "app:email.send"\n'
    )
    toml_manifest = load_manifest(write_plugin(tmp_path / "t", toml_text))
    assert json_manifest.hooks == toml_manifest.hooks
    assert [(h.event, h.target, h.priority) for h in json_manifest.hooks] == [
        ("content:afterSave", "greet.say", 500),
        ("user:created", "greet.say", 0),
    ]


def test_capability_error_becomes_manifest_error_at_index(tmp_path: Path) -> None:
    error = load_error(
        write_plugin(tmp_path, toml_with('capabilities = ["fs.read:/data", "fs.reed:/data"]'))
    )
    (line,) = problem_lines(error)
    assert line.startswith(
        "capabilities[1]: unknown capability kind 'fs.reed' in 'fs.reed:/data' "
        "(did you mean 'fs.read'?); known kinds:"
    )
    assert error.field == "capabilities[1]"


def test_capabilities_may_reference_declared_config(tmp_path: Path) -> None:
    manifest = (
        toml_with('capabilities = ["fs.read:${{config.roo}}"]') + '[config.root]\ntype = "string"\n'
    )
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line.startswith(
        "capabilities[0]: capability 'fs.read:${config.roo}' references unknown config "
        "field 'roo' (did you mean 'root'?)"
    )


def test_duplicate_capabilities_after_normalisation(tmp_path: Path) -> None:
    error = load_error(
        write_plugin(
            tmp_path, toml_with('capabilities = ["fs.read:/data", "env.read:A", "fs.read:/data/"]')
        )
    )
    assert problem_lines(error) == [
        "capabilities[2]: 'fs.read:/data/' grants the same as capabilities[0] "
        "('fs.read:/data'); remove one"
    ]
    assert error.field == "capabilities[2]"


def test_broad_capability_needs_allow_broad(tmp_path: Path) -> None:
    directory = write_plugin(tmp_path, toml_with('capabilities = ["fs.read:/"]'))
    (line,) = problem_lines(load_error(directory))
    assert "refers to the whole filesystem" in line
    manifest = load_manifest(directory, allow_broad=True)
    assert str(manifest.capabilities[0]) == "fs.read:/"


def test_host_call_requires_requires(tmp_path: Path) -> None:
    error = load_error(write_plugin(tmp_path, toml_with('capabilities = ["host.call:other"]')))
    (line,) = problem_lines(error)
    assert line.startswith("capabilities[0]: 'host.call:other' calls another plugin's module")
    assert "add the plugin that provides it to requires" in line
    ok = toml_with('capabilities = ["host.call:other"]\nrequires = ["other-plugin"]')
    assert load_manifest(write_plugin(tmp_path / "ok", ok)).requires == (
        Requirement("other-plugin"),
    )


@pytest.mark.parametrize(
    ("requirement", "phrase"),
    [
        ("other-plugin[extra]>=1", "extras, environment markers and URLs are not supported"),
        ('other-plugin; python_version > \\"3\\"', "extras, environment markers and URLs"),
        ("other-plugin @ https://example.com/x.zip", "extras, environment markers and URLs"),
        ("other plugin", "invalid requirement 'other plugin'"),
        ("Other_Plugin>=1", "'Other_Plugin' is not a plugin name (kebab-case); use 'other-plugin'"),
        ("demo>=1", "a plugin cannot require itself"),
    ],
)
def test_requires_rules(tmp_path: Path, requirement: str, phrase: str) -> None:
    error = load_error(write_plugin(tmp_path, toml_with(f'requires = ["{requirement}"]')))
    (line,) = problem_lines(error)
    assert line.startswith("requires[0]: ")
    assert phrase in line


def test_requires_twice(tmp_path: Path) -> None:
    error = load_error(write_plugin(tmp_path, toml_with('requires = ["a>=1", "a<2"]')))
    assert problem_lines(error) == [
        "requires[1]: plugin 'a' is required twice; merge the specifiers"
    ]


# -- config ---------------------------------------------------------------------------------


def test_config_default_is_validated(tmp_path: Path) -> None:
    manifest = BASE_TOML + '[config.max_kb]\ntype = "integer"\ndefault = 20000\nmaximum = 10240\n'
    error = load_error(write_plugin(tmp_path, manifest))
    assert problem_lines(error) == [
        "config.max_kb.default: config field 'max_kb': default must be <= 10240, got 20000; "
        "change the default in [config.max_kb] (or its bounds)"
    ]
    assert error.field == "config.max_kb.default"


def test_config_default_type_is_validated(tmp_path: Path) -> None:
    manifest = BASE_TOML + '[config.flag]\ntype = "boolean"\ndefault = "yes"\n'
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line.startswith("config.flag.default: config field 'flag': default must be a boolean")


def test_config_unknown_type_suggests(tmp_path: Path) -> None:
    manifest = BASE_TOML + '[config.x]\ntype = "strng"\n'
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line == (
        "config.x.type: unknown type 'strng' (did you mean 'string'?); expected one of "
        "string, number, integer, boolean, array"
    )


def test_config_type_required(tmp_path: Path) -> None:
    manifest = BASE_TOML + '[config.x]\ndescription = "no type"\n'
    assert problem_lines(load_error(write_plugin(tmp_path, manifest))) == [
        "config.x.type: required field missing"
    ]


@pytest.mark.parametrize("name", ["MaxKb", "max-kb", "1x"])
def test_config_field_names(tmp_path: Path, name: str) -> None:
    manifest = BASE_TOML + f'[config."{name}"]\ntype = "string"\n'
    (line,) = problem_lines(load_error(write_plugin(tmp_path, manifest)))
    assert line.startswith(f"config.{name}: invalid config field name '{name}'")


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            'type = "string"\nitems = "string"',
            "config.x.items: only array fields take 'items' (this field is string); remove it",
        ),
        (
            'type = "array"\nitems = "array"',
            "config.x.items: nested arrays are not supported; use a scalar items type",
        ),
        (
            'type = "string"\nminimum = 1',
            "config.x.minimum: only number and integer fields take 'minimum'; remove it",
        ),
        (
            'type = "boolean"\nmax_length = 1',
            "config.x.max_length: only string and array fields take 'max_length'; remove it",
        ),
        (
            'type = "integer"\nminimum = 5\nmaximum = 1',
            "config.x.minimum: minimum (5) is greater than maximum (1); swap them",
        ),
        (
            'type = "string"\nmax_length = 0',
            "config.x.max_length: must be a positive integer, got 0",
        ),
        ('type = "number"\nminimum = true', "config.x.minimum: expected a number, got boolean"),
    ],
)
def test_config_field_consistency(tmp_path: Path, body: str, line: str) -> None:
    manifest = BASE_TOML + "[config.x]\n" + body + "\n"
    assert problem_lines(load_error(write_plugin(tmp_path, manifest))) == [line]


def test_config_in_json_with_null_default(tmp_path: Path) -> None:
    data = base_json(config={"root": {"type": "string", "default": None}})
    manifest = load_manifest(write_plugin(tmp_path, json_data=data))
    assert manifest.config == (ConfigField("root", ConfigType.STRING),)


# -- limits ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("timeout_ms = 0", "limits.timeout_ms: must be a positive integer, got 0"),
        ("memory_mb = -5", "limits.memory_mb: must be a positive integer, got -5"),
        ('cpu_s = "5"', "limits.cpu_s: expected an integer, got string"),
        ("max_output_kb = 1.5", "limits.max_output_kb: expected an integer, got number"),
        ("timeout_ms = true", "limits.timeout_ms: expected an integer, got boolean"),
    ],
)
def test_limits(tmp_path: Path, body: str, line: str) -> None:
    manifest = BASE_TOML + "[limits]\n" + body + "\n"
    assert problem_lines(load_error(write_plugin(tmp_path, manifest))) == [line]


# -- the bundled examples load -----------------------------------------------------------------


def test_bundled_examples_load() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "plugins"
    directories = sorted(p for p in examples.iterdir() if p.is_dir())
    assert directories, "no bundled examples found"
    for directory in directories:
        assert load_manifest(directory).name == directory.name


def test_relative_plugin_dir_uses_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_plugin(tmp_path)
    monkeypatch.chdir(tmp_path / "demo")
    assert load_manifest(Path()).name == "demo"
    assert os.path.basename(os.getcwd()) == "demo"


def test_a_default_entry_that_is_not_there_is_refused(tmp_path: Path) -> None:
    """Issue 15: without `entry = ...` the default plugin.py was never checked, so a plugin
    without its entry file was scanned ("0 files"), audited and approved, and failed only
    at enable."""
    error = load_error(write_plugin(tmp_path, entry=None))
    (line,) = problem_lines(error)
    assert line.startswith("entry: 'plugin.py' does not exist in ")
    assert "create it or point entry at the plugin's entry module" in line
    assert error.field == "entry"


def test_names_a_problem_quotes_never_start_a_line_of_their_own(tmp_path: Path) -> None:
    """attack18: a manifest's problems are one per line, and the CLI prints them so
    (``error: plugin 'evil' was skipped: ...``). A hook naming an undeclared function
    listed the declared ones as written, and the module part of its target as well: a
    module named ``"m\\n✓ evil approved: risk LOW"`` put that text at the margin, a line of
    caplet's own to the eye. Every name the plugin wrote is quoted on its problem's line."""
    forged = "\u2713 evil approved: risk LOW, nothing widened"
    directory = write_plugin(
        tmp_path,
        f'name = "{{name}}"\nversion = "1.0.0"\ndescription = "A test plugin."\n\n'
        f'[modules."m\\n{forged}"]\nfunctions = ["run"]\n\n'
        f'[hooks."content:afterSave"]\nfunction = "x\\n{forged}.run"\n',
    )
    lines = problem_lines(load_error(directory))
    assert not [line for line in lines if line.startswith(forged)], lines
    [hook] = [line for line in lines if line.startswith("hooks[")]
    assert (f"declare it under [modules.x\\x0a{forged}] or name one of: m\\x0a{forged}.run") in hook
