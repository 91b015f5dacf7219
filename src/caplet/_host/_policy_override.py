"""Where a policy file is looked for, and one value the command line sets on top of it.

Kept apart from :mod:`caplet._host._policy_file` (which re-exports them) so
that the command line can declare ``--policy`` and the policy flags without
importing the :class:`~caplet._host._policy.Policy` model, pydantic and the
trust store: ``caplet scan`` never reads a policy, and its start-up is
budgeted (issue 16: 150 ms of CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["POLICY_ENV", "POLICY_FILE", "PolicyOverride"]

#: The policy file looked for beside the plugins directory.
POLICY_FILE: Final = "caplet.toml"
#: The environment variable naming a policy file.
POLICY_ENV: Final = "CAPLET_POLICY"


@dataclass(frozen=True, slots=True)
class PolicyOverride:
    """One value set on top of the file: ``field`` (dotted), its ``value``, the ``source``
    that set it (a flag), and whether it is ``appended`` to a list instead of replacing it."""

    field: str
    value: object
    source: str
    appended: bool = False
