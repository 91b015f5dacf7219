"""A person's allowing of a policy file caplet *found* (direnv's ``allow``).

A ``caplet.toml`` (or ``[tool.caplet]``) beside the plugins directory is whatever
the project's author wrote: a cloned project's file that raises
``max_risk_level``, opens a network or trusts a key would loosen this user's
policy by being there. decide14 made such a file's ``store`` vouch for nothing;
its other loosenings applied, with a warning at every start. Now a found file
that loosens anything applies only once a person has allowed that exact content
(``caplet policy --allow``): the digest of its text, kept per path in this user's
state directory. A changed file needs allowing again; until then the host runs
on the defaults (and the flags), and says which file it left out and why. A
file the operator names (``--policy``, ``CAPLET_POLICY``, ``PluginHost(policy=)``)
is their explicit choice and needs no allowing, nor does a found file that only
tightens.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Final

from caplet._atomic import atomic_write, read_regular
from caplet._trust._paths import ensure_private_dir, user_state_dir

__all__ = ["ALLOWED_FILE", "allow_policy_text", "policy_allowed", "policy_digest"]

#: The allowed policy files of this user: ``{path (:func:`_key`): sha256 of the text}``.
ALLOWED_FILE: Final = "policy-allowed.json"
#: No list of allowed files is this large (each entry a path and a digest).
_MAX_BYTES: Final = 4 << 20


def policy_digest(text: str) -> str:
    """The digest a policy file's text is allowed by."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def policy_allowed(path: Path, text: str) -> bool:
    """Whether a person allowed ``path`` with exactly this ``text``. An allow list that
    cannot be read allows nothing (the safe answer: the defaults)."""
    return _allowed().get(_key(path)) == policy_digest(text)


def allow_policy_text(path: Path, text: str) -> Path:
    """Record that a person allowed ``path`` with this ``text``; the allow list's path.
    OSError when it cannot be written."""
    allowed = _allowed()
    allowed[_key(path)] = policy_digest(text)
    target = ensure_private_dir(user_state_dir()) / ALLOWED_FILE
    atomic_write(target, json.dumps(allowed, indent=1, sort_keys=True).encode(), mode=0o600)
    return target


def _key(path: Path) -> str:
    """The name an allowing is kept under: where the file was found, its folder's links
    resolved but not the file's own (attack28: a project's ``caplet.toml`` that is a link
    to a file the user allowed for another project carried that allowing over, its
    loosenings applied to the cloned project's plugins with no person's word)."""
    return str(Path(os.path.realpath(path.parent)) / path.name)


def _allowed() -> dict[str, str]:
    try:
        data = json.loads(read_regular(user_state_dir() / ALLOWED_FILE, _MAX_BYTES))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
