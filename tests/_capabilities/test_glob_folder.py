"""steer31, glob32: the folder a glob capability starts in and what consent screens say it
reaches (its matches at enable, each by itself; a write glob creates no file)."""

from __future__ import annotations

import pytest

from caplet._capabilities._model import glob_folder, glob_reach, glob_reaches
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
def test_a_glob_starts_in_the_folder_above_its_first_wild_component(path: str, folder: str) -> None:
    assert glob_folder(path) == folder
    assert glob_reach(parse_capability(f"fs.read:{path}")) == (
        f"only the files of {folder} it matches, read-only"
    )
    assert glob_reach(parse_capability(f"fs.write:{path}")) == (
        f"only the files of {folder} it matches, written in place: it creates, renames and "
        "deletes no file (grant the folder to create files)"
    )
    assert parse_capability(f"fs.write:{path}").root == folder  # type: ignore[union-attr]


def test_what_globs_reach_is_carried_one_line_each() -> None:
    capabilities = [
        parse_capability("fs.read:/srv/reports/*.csv"),
        parse_capability("fs.read:/srv/reports"),
        parse_capability("net.http:https://*.example.com"),
    ]
    assert glob_reaches(capabilities) == (
        "fs.read:/srv/reports/*.csv -> only the files of /srv/reports it matches, read-only",
    )


@pytest.mark.parametrize(
    "capability",
    ["fs.read:/srv/reports", "fs.write:/srv/reports/q1.csv", "net.http:https://*.example.com"],
)
def test_a_plain_path_and_other_kinds_reach_what_they_say(capability: str) -> None:
    # Near miss: nothing is added for a path without a glob, nor for a host wildcard.
    assert glob_reach(parse_capability(capability)) is None
