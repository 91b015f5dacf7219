"""`caplet selftest` as an operator runs it: progress on a terminal, JSON alone on stdout
(issue 15, point 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caplet._host._manager_state import RED_TEAM_BANNER
from tests._cli.clikit import caplet, caplet_with_terminal_stderr, document

#: The corpus's log flood: 1000 ctx.log lines from a hostile plugin.
_FLOOD = ("selftest", "--case", "log-flood", "--json")


@pytest.mark.slow
def test_progress_on_a_terminal_and_nothing_but_the_document_off_one(tmp_path: Path) -> None:
    stdout, terminal, code = caplet_with_terminal_stderr(*_FLOOD, cwd=tmp_path)
    assert code == 0, terminal
    assert "attacking" in terminal
    shown = json.loads(stdout)
    assert [(c["name"], c["status"]) for c in shown["cases"]] == [("log-flood", "contained")]
    assert "log-flood" not in terminal, "no plugin log line reaches the terminal"

    piped = caplet(*_FLOOD, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert document(piped)["summary"]["contained"] == 1
    # No progress bytes, no flood: only the arena's red-team banner (said once per host).
    assert "attacking" not in piped.stderr
    assert set(" ".join(piped.stderr.split()).split(RED_TEAM_BANNER)) <= {"", " "}
