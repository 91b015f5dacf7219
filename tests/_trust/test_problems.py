"""StateProblem: which kinds of problem mean the state is damaged."""

from __future__ import annotations

import pytest

from caplet._trust._problems import ProblemKind, StateProblem

WARNINGS = {ProblemKind.TEMP_FILE, ProblemKind.UNFINISHED_UPDATE, ProblemKind.UNCLAIMED}


@pytest.mark.parametrize("kind", list(ProblemKind))
def test_only_leftovers_interrupted_updates_and_unclaimed_rows_are_warnings(
    kind: ProblemKind,
) -> None:
    problem = StateProblem(kind=kind, path="/state/caplet.db", message="m")
    assert problem.damaged is (kind not in WARNINGS)
