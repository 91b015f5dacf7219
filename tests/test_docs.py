"""docs/manifest.md is the complete manifest reference, and its examples are real (issue 15)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from caplet._errors import ManifestError
from caplet._manifest import _schema
from caplet._manifest._load import load_manifest
from tests.conftest import REPO, write_policy

MANIFEST_DOC = REPO / "docs" / "manifest.md"
_BLOCK = re.compile(r"```(?P<lang>toml|json|python|text)\n(?P<body>.*?)```", re.S)


def _blocks(lang: str) -> list[str]:
    text = MANIFEST_DOC.read_text(encoding="utf-8")
    return [m.group("body") for m in _BLOCK.finditer(text) if m.group("lang") == lang]


def _plugin(root: Path, data: dict[str, object], manifest: str, file_name: str) -> Path:
    """A folder for ``data`` with its manifest and an entry defining what it declares."""
    name = str(data["name"])
    folder = root / name
    folder.mkdir(parents=True)
    (folder / file_name).write_text(manifest, encoding="utf-8")
    modules = data.get("modules")
    assert isinstance(modules, dict)
    table = {
        module: list(spec["functions"]) if isinstance(spec["functions"], list | dict) else []
        for module, spec in modules.items()
    }
    source = "def create_functions(config):\n    return {\n"
    for module, functions in table.items():
        entries = ", ".join(f"{fn!r}: (lambda *a, **k: None)" for fn in functions)
        source += f"        {module!r}: {{{entries}}},\n"
    source += "    }\n"
    entry = str(data.get("entry", "plugin.py"))
    (folder / entry).write_text(source, encoding="utf-8")
    return folder


def test_every_toml_example_is_a_valid_manifest(tmp_path: Path) -> None:
    examples = [body for body in _blocks("toml") if body.startswith("name = ")]
    assert len(examples) >= 12
    for index, body in enumerate(examples):
        data = tomllib.loads(body)
        folder = _plugin(tmp_path / str(index), data, body, "plugin.toml")
        manifest = load_manifest(folder)
        assert manifest.name == data["name"]


def test_the_json_example_is_a_valid_manifest(tmp_path: Path) -> None:
    (body,) = _blocks("json")
    data = json.loads(body)
    assert load_manifest(_plugin(tmp_path, data, body, "plugin.json")).name == "hello"


def test_the_python_example_is_the_smallest_plugins_entry(tmp_path: Path) -> None:
    (source,) = _blocks("python")
    namespace: dict[str, object] = {}
    exec(compile(source, "manifest.md", "exec"), namespace)  # the documentation's own code
    create = namespace["create_functions"]
    assert callable(create)
    assert create({})["greet"]["say"]("you") == "Hello, you!"


def test_the_error_example_is_what_caplet_says(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "plugin.toml").write_text(
        'name = "notes"\nversion = "v1.0"\ndescription = "x"\n[modules.files]\nfunctions = []\n',
        encoding="utf-8",
    )
    (folder / "plugin.py").write_text("", encoding="utf-8")
    with pytest.raises(ManifestError) as caught:
        load_manifest(folder)
    (shown,) = (b for b in _blocks("text") if "invalid manifest" in b)
    for line in shown.strip().splitlines()[1:]:
        assert line in str(caught.value)


@pytest.mark.parametrize(
    ("model", "where"),
    [
        (_schema.ManifestModel, "top level"),
        (_schema.ModuleModel, "modules"),
        (_schema.FunctionModel, "functions"),
        (_schema.HookModel, "hooks"),
        (_schema.ConfigFieldModel, "config"),
        (_schema.HintsModel, "hints"),
        (_schema.LimitsModel, "limits"),
    ],
)
def test_every_field_of_the_manifest_is_documented(model: type, where: str) -> None:
    text = MANIFEST_DOC.read_text(encoding="utf-8")
    missing = [
        field
        for field in model.model_fields  # type: ignore[attr-defined]
        if f"`{field}`" not in text and f"{field} =" not in text
    ]
    assert missing == [], f"fields of {where} not in docs/manifest.md: {missing}"


# -- docs/metrics.md and docs/agents.md (issue 17) ----------------------------------------------


def test_metrics_doc_lists_every_instrument_and_failure_kind() -> None:
    from caplet._host import _otel
    from caplet._host._metrics import FailureKind

    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    source = Path(_otel.__file__).read_text(encoding="utf-8")
    instruments = set(re.findall(r'"(caplet\.[a-z.]+)"', source))
    assert len(instruments) == 9
    for name in instruments:
        assert f"`{name}`" in text, name
    for kind in FailureKind:
        assert f"| `{kind.value}` |" in text, kind


@pytest.mark.parametrize("doc", ["metrics.md", "agents.md"])
def test_policy_examples_in_the_agent_docs_are_valid(doc: str, tmp_path: Path) -> None:
    from caplet._host._policy_file import load_policy

    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    examples = [m.group("body") for m in _BLOCK.finditer(text) if m.group("lang") == "toml"]
    assert examples
    (tmp_path / "plugins").mkdir()
    for body in examples:
        write_policy(tmp_path / "caplet.toml", body)
        effective = load_policy(tmp_path / "plugins")
        assert effective.file == tmp_path / "caplet.toml"
