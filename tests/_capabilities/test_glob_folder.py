"""steer31: the folder a glob capability is granted as, which consent screens name."""

from __future__ import annotations

import pytest

from caplet._capabilities._model import glob_folder, glob_reach
from caplet._capabilities._parse import parse_capability


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        ("/srv/reports/*.csv", "/srv/reports"),
        ("/srv/reports/q[0-9].csv", "/srv/reports"),
        ("/srv/*/reports", "/srv"),
        ("/srv/rep?rts/x", "/srv"),
        ("/srv/reports/**", "/srv/reports"),
    ],
)
def test_a_glob_is_granted_as_the_folder_above_its_first_wild_component(
    path: str, folder: str
) -> None:
    assert glob_folder(path) == folder
    assert glob_reach(parse_capability(f"fs.read:{path}")) == folder
    assert parse_capability(f"fs.write:{path}").root == folder  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "capability",
    ["fs.read:/srv/reports", "fs.write:/srv/reports/q1.csv", "net.http:https://*.example.com"],
)
def test_a_plain_path_and_other_kinds_reach_what_they_say(capability: str) -> None:
    # Near miss: nothing is added for a path without a glob, nor for a host wildcard.
    assert glob_reach(parse_capability(capability)) is None
