"""Property tests of the manifest loader: only ManifestError, and valid manifests round-trip."""

from __future__ import annotations

import json
import keyword
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from caplet._errors import ManifestError
from caplet._manifest._load import load_manifest
from tests._fuzz.budget import fuzz

KEYS = (
    "name",
    "version",
    "description",
    "entry",
    "capabilities",
    "modules",
    "config",
    "hooks",
    "requires",
    "limits",
    "hints",
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=15,
)
documents = st.dictionaries(
    st.one_of(st.sampled_from(KEYS), st.text(max_size=10)), json_values, max_size=8
)

names = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,6}){0,2}", fullmatch=True)
# A keyword (`as`, `if`) is refused on purpose (_manifest/_schema: a module or function
# named so cannot be written in Python), so valid documents never hold one.
identifiers = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)
valid = st.fixed_dictionaries(
    {
        "name": names,
        "version": st.builds(
            lambda a, b, c: f"{a}.{b}.{c}",
            st.integers(0, 99),
            st.integers(0, 99),
            st.integers(0, 99),
        ),
        "description": st.text(
            alphabet=st.characters(codec="ascii", categories=["L", "N", "Zs", "P"]),
            min_size=1,
            max_size=60,
        ).filter(str.strip),
        "modules": st.dictionaries(
            identifiers,
            st.fixed_dictionaries(
                {"functions": st.lists(identifiers, min_size=1, max_size=3, unique=True)}
            ),
            min_size=1,
            max_size=3,
        ),
    }
)


def _load(filename: str, text: str | bytes, folder_name: str = "x") -> object:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / folder_name
        folder.mkdir()
        path = folder / filename
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        # The default entry must exist (issue 15): a manifest is never valid without it.
        (folder / "plugin.py").write_text("", encoding="utf-8")
        try:
            return load_manifest(folder)
        except ManifestError:
            return None


@fuzz(80)
@given(documents)
def test_any_json_document_raises_only_manifest_error(document: dict[str, object]) -> None:
    _load("plugin.json", json.dumps(document))


@fuzz(100)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_any_toml_bytes_raise_only_manifest_error(raw: bytes | str) -> None:
    _load("plugin.toml", raw)


@fuzz(50)
@given(valid, documents)
def test_a_valid_manifest_with_junk_raises_only_manifest_error(
    manifest: dict[str, object], junk: dict[str, object]
) -> None:
    _load("plugin.json", json.dumps({**manifest, **junk}), folder_name=str(manifest["name"]))


@fuzz(50)
@given(valid)
def test_a_valid_manifest_round_trips(document: dict[str, object]) -> None:
    name = str(document["name"])
    loaded = _load("plugin.json", json.dumps(document), folder_name=name)
    assert loaded is not None, document
    assert loaded.name == name  # type: ignore[attr-defined]
    assert loaded.version == document["version"]  # type: ignore[attr-defined]
    assert loaded.description == document["description"]  # type: ignore[attr-defined]
    modules = document["modules"]
    assert isinstance(modules, dict)
    shown = {m.name: list(m.function_names) for m in loaded.modules}  # type: ignore[attr-defined]
    assert shown == {module: spec["functions"] for module, spec in modules.items()}
