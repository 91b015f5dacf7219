"""The rule table is consistent: every id referenced exists, coverage is coherent."""

from __future__ import annotations

import re

import pytest

from caplet._findings import Severity
from caplet._scan._rules import (
    API_RULES,
    FILE_NAME_RULES,
    FILE_SUFFIX_RULES,
    MODULE_RULES,
    PROGRAM_ARGUMENTS,
    RULES,
    RuleFamily,
    RuleKind,
    rule,
)


def test_rule_ids_are_well_formed_and_keyed_by_themselves() -> None:
    for rule_id, r in RULES.items():
        assert r.rule_id == rule_id
        assert re.fullmatch(r"CPL-[A-Z]+-\d{3}", rule_id), rule_id


def test_every_table_points_at_existing_rules() -> None:
    referenced = {
        *API_RULES.values(),
        *MODULE_RULES.values(),
        *FILE_NAME_RULES.values(),
        *FILE_SUFFIX_RULES.values(),
    }
    assert referenced - set(RULES) == set()


def test_coverage_fields_agree_and_covered_is_milder() -> None:
    for r in RULES.values():
        assert (r.covered_by is None) == (r.covered_severity is None), r.rule_id
        if r.covered_severity is not None:
            assert r.covered_severity.rank > r.severity.rank, r.rule_id


def test_messages_have_one_api_placeholder_and_a_hint() -> None:
    for r in RULES.values():
        assert r.message.count("{api}") == 1, r.rule_id
        # a mitigation is good news: there is nothing to fix
        assert bool(r.hint) is (r.kind is not RuleKind.MITIGATION), r.rule_id


def test_every_rule_has_a_rationale_for_the_catalogue() -> None:
    missing = [r.rule_id for r in RULES.values() if not r.rationale]
    assert missing == []


def test_network_is_never_coverable_and_says_use_ctx_http() -> None:
    # CPL-NET-003 is about URL literals (brokered hosts), not direct access
    network = [
        r
        for r in RULES.values()
        if r.family is RuleFamily.NETWORK
        and r.kind is RuleKind.CAPABILITY
        and r.rule_id != "CPL-NET-003"
    ]
    assert network
    for r in network:
        assert r.covered_by is None
        assert r.severity is Severity.DANGER
        assert "use ctx.http (brokered) instead" in r.hint


def test_programs_are_known_only_for_process_calls() -> None:
    for name in PROGRAM_ARGUMENTS:
        assert API_RULES[name] == "CPL-PROC-001", name


def test_unknown_rule_is_a_key_error_naming_it() -> None:
    with pytest.raises(KeyError, match="CPL-NOPE-001"):
        rule("CPL-NOPE-001")


def test_ipc_to_other_processes_is_network() -> None:
    # issue 13: a plugin reaching a host daemon through a Unix socket, a logging
    # handler or multiprocessing's connection is network access too
    for api in (
        "socket.AF_UNIX",
        "multiprocessing.connection.Client",
        "multiprocessing.connection.Listener",
        "logging.handlers.SysLogHandler",
        "logging.handlers.SocketHandler",
        "logging.handlers.DatagramHandler",
    ):
        assert API_RULES[api] == "CPL-NET-002"
