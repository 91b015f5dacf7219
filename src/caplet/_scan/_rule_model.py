"""The rule model: what a rule is (family, kind, severities, message) and argument specs.

The rule *table* is :mod:`caplet._scan._rules`; the rules themselves are written in
:mod:`caplet._scan._rules_capability`, :mod:`caplet._scan._rules_threat` and
:mod:`caplet._scan._rules_scan`, each by concern.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from caplet._capabilities._model import CapabilityKind
from caplet._findings import Severity

__all__ = ["ArgumentSpec", "Rule", "RuleFamily", "RuleKind"]


class RuleFamily(enum.Enum):
    """What kind of behaviour a rule detects (design.md section 6)."""

    PROCESS = "process"
    DYNAMIC_CODE = "dynamic-code"
    NATIVE = "native"
    INTROSPECTION = "introspection"
    GLOBAL_MUTATION = "global-mutation"
    NETWORK = "network"
    FILESYSTEM = "filesystem"
    ENVIRONMENT = "environment"
    OBFUSCATION = "obfuscation"
    INSTALL_HOOK = "install-hook"
    SUPPLY_CHAIN = "supply-chain"
    PERSISTENCE = "persistence"
    EXFILTRATION = "exfiltration"
    MINING = "mining"
    #: Findings about the scan itself: a file too large, too deep, unparsable.
    SCANNER = "scanner"
    #: Defensive code worth showing the approver (design.md section 6).
    MITIGATION = "mitigation"
    #: Text aimed at whoever reviews the code: the LLM auditor (design.md section 2, item 3).
    AUDITOR = "auditor"


class RuleKind(enum.Enum):
    """What a finding of the rule says about the code (GuardDog 3's split).

    ``CAPABILITY``: what the code *can do* (run programs, open sockets). In a
    plugin, a capability the manifest does not declare is danger; in a plain
    package it is only an observed capability (info), because single-API
    rules hit a large share of benign packages.
    ``THREAT``: a sign of malicious *intent* (decoded data reaching exec,
    browser credential paths, messenger webhooks, miners): danger everywhere.
    ``SIGNAL``: weak evidence (an encoded blob, a very long line): a warning
    everywhere, never enough to refuse on its own.
    ``SCANNER``: something could not be checked. ``MITIGATION``: defensive
    code (info), shown in plugin reports.
    """

    CAPABILITY = "capability"
    THREAT = "threat"
    SIGNAL = "signal"
    SCANNER = "scanner"
    MITIGATION = "mitigation"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of the static scanner.

    ``message`` is a template with one ``{api}`` placeholder (the spelling
    found, e.g. ``subprocess.run``); ``hint`` is the fix, appended when the
    finding is not covered. ``covered_by`` is the capability kind that can
    cover the behaviour, and ``covered_severity`` the severity it then has;
    both are ``None`` when nothing can cover it (raw sockets: all network
    goes through the broker, so no capability makes a socket acceptable).
    """

    rule_id: str
    family: RuleFamily
    severity: Severity
    covered_severity: Severity | None
    covered_by: CapabilityKind | None
    message: str
    hint: str
    kind: RuleKind = RuleKind.CAPABILITY
    #: One line for ``caplet scan --rules`` and the SARIF rule description.
    rationale: str = ""


@dataclass(frozen=True, slots=True)
class ArgumentSpec:
    """Where a call takes the value the scanner wants (program, mode, key).

    ``index`` is the positional index, ``keyword`` the keyword name (``None``
    when the parameter is positional-only).
    """

    index: int
    keyword: str | None
