"""Reading a manifest's bytes: what :func:`find_manifest` checked is what is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caplet._errors import ManifestError
from caplet._manifest._read import MAX_MANIFEST_BYTES, read_manifest_data


def test_the_manifest_is_read_without_following_a_link_or_waiting_on_a_fifo(
    tmp_path: Path,
) -> None:
    # attack10: find_manifest checked the name with lstat, then the read opened
    # it again by name, following links and blocking. Whoever can write the
    # plugin folder swaps plugin.toml in between: for a link, the host (root)
    # parsed any file as the manifest; for a FIFO, every discovery
    # (`caplet list`, a host's start) waited for ever. The swapped-in state:
    outside = tmp_path / "outside.toml"
    outside.write_text('name = "not-the-plugins"\nsecret = "host data"\n', encoding="utf-8")
    (tmp_path / "linked").mkdir()
    link = tmp_path / "linked" / "plugin.toml"
    link.symlink_to(outside)
    with pytest.raises(ManifestError, match=r"plugin\.toml: must be a regular file") as caught:
        read_manifest_data(link)
    assert "replace it with the manifest itself" in str(caught.value)
    (tmp_path / "fifo").mkdir()
    fifo = tmp_path / "fifo" / "plugin.toml"
    os.mkfifo(fifo)
    with pytest.raises(ManifestError, match=r"plugin\.toml: must be a regular file"):
        read_manifest_data(fifo)


def test_a_manifest_that_grows_past_the_limit_while_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plugin.toml"
    path.write_bytes(b"# " + b"x" * MAX_MANIFEST_BYTES + b"\n")
    with pytest.raises(ManifestError, match="more than the limit"):
        read_manifest_data(path)
    path.write_text('name = "ok"\n', encoding="utf-8")
    assert read_manifest_data(path) == {"name": "ok"}


@pytest.mark.parametrize("number", ["9" * 5_000, str(2**63), str(-(2**63) - 1), "-" + "1" * 30])
def test_a_json_integer_past_64_bits_is_a_manifest_error(tmp_path: Path, number: str) -> None:
    # attack29: json.loads raised the digit limit's ValueError (no JSONDecodeError), and
    # `caplet list` ended in an internal error for every plugin of the folder.
    path = tmp_path / "plugin.json"
    path.write_text(f'{{"name": "demo", "limits": {{"timeout_ms": {number}}}}}', encoding="utf-8")
    with pytest.raises(ManifestError, match=r"plugin\.json: the integer .* outside the 64-bit"):
        read_manifest_data(path)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"description": "ok \\ud800"}', "description"),
        ('{"hints": {"critical_rules": ["a", "\\udfff"]}}', "hints.critical_rules[1]"),
        (
            '{"modules": {"m": {"functions": {"f": {"args": {"\\udc80": 1}}}}}}',
            "modules.m.functions.f.args",
        ),
    ],
)
def test_a_lone_surrogate_in_a_json_manifest_is_refused_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    # attack29: every field took one, and `caplet mcp` answered tools/list with the
    # encoder's traceback (no tool of any plugin listed).
    path = tmp_path / "plugin.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ManifestError, match="holds a lone surrogate") as caught:
        read_manifest_data(path)
    assert f"plugin.json: {field}" in str(caught.value)
    assert caught.value.field is not None
    assert caught.value.field.startswith(field)


def test_a_surrogate_pair_and_the_64_bit_extremes_are_read_as_ever(tmp_path: Path) -> None:
    path = tmp_path / "plugin.json"
    path.write_text(
        f'{{"description": "smile \\ud83d\\ude00", "a": {2**63 - 1}, "b": {-(2**63)}}}',
        encoding="utf-8",
    )
    assert read_manifest_data(path) == {
        "description": "smile \U0001f600",
        "a": 2**63 - 1,
        "b": -(2**63),
    }
