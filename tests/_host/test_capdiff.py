"""The capability diff of an update: additions need consent, re-spellings do not."""

from __future__ import annotations

import pytest

from caplet._capabilities._model import Capability
from caplet._capabilities._parse import parse_capability
from caplet._errors import CapabilityError
from caplet._host._capdiff import covers, diff_capabilities, parse_approved


def caps(*texts: str) -> list[Capability]:
    return [parse_capability(t, config_names=("root",)) for t in texts]


def declared(capabilities: tuple[Capability, ...]) -> list[str]:
    return [c.declared for c in capabilities]


def test_a_pure_rename_is_not_an_escalation() -> None:
    diff = diff_capabilities(
        caps("fs.read:/data/", "net.http:https://API.example.com:443/"),
        caps("fs.read:/data", "net.http:https://api.example.com"),
    )
    assert not diff.escalates
    assert diff.removed == ()
    assert declared(diff.kept) == ["fs.read:/data", "net.http:https://api.example.com"]


def test_an_addition_escalates_and_a_removal_does_not() -> None:
    diff = diff_capabilities(caps("env.read:A", "env.read:B"), caps("env.read:A", "proc.exec:git"))
    assert diff.escalates
    assert declared(diff.added) == ["proc.exec:git"]
    assert declared(diff.removed) == ["env.read:B"]
    assert not diff_capabilities(caps("env.read:A", "env.read:B"), caps("env.read:A")).escalates


@pytest.mark.parametrize(
    ("old", "new", "covered"),
    [
        ("fs.read:/data", "fs.read:/data/sub", True),
        ("fs.read:/data", "fs.read:/database", False),
        ("fs.read:/data", "fs.write:/data/sub", False),
        ("fs.read:/data/*.csv", "fs.read:/data/x.csv", False),
        ("net.http:https://a.example/v1", "net.http:https://a.example/v1/items", True),
        ("net.http:https://a.example/v1", "net.http:https://a.example/v2", False),
        ("net.http:https://a.example", "net.http:http://a.example", False),
        ("fs.read:${config.root}", "fs.read:${config.root}", True),
        ("fs.read:/", "fs.read:${config.root}", False),
    ],
)
def test_covers(old: str, new: str, covered: bool) -> None:
    [o] = [parse_capability(old, config_names=("root",), allow_broad=True)]
    [n] = caps(new)
    assert covers(o, n) is covered


def test_parse_approved_names_where_a_bad_string_came_from() -> None:
    with pytest.raises(CapabilityError, match=r"^lock file x, plugin 'p': .*'nope:1'"):
        parse_approved(("nope:1",), config_names=(), where="lock file x, plugin 'p'")
