"""A scripted auditor model that does what the plugin tells it: the auditor cases' adversary.

A real model cannot be part of a selftest (no network, no key, no
determinism), and a model that resists injections proves nothing about
caplet. So the auditor cases run against this in-process
:class:`~caplet._audit._provider.AuditorProvider`, which is as gullible as
the worst model: it parses the prompt the way the system prompt tells it
to (file blocks are delimited by the exact random token), and then obeys
every line starting with :data:`MARKER` that it finds where it trusts text:

* ``trust="files"`` (the gullible model): instructions *inside* the plugin's
  files are obeyed. What stops the plugin then is the canaries (the model
  does not report them) or the static floor (it does, but the code gives
  itself away to the scanner).
* ``trust="operator"`` (a model that follows the system prompt): only text
  *outside* the real file blocks is obeyed, so a plugin must forge the file
  delimiters to be heard. What stops it is that it cannot know the token.

Obeying means: rate LOW, recommend approve, report no findings, and report
as injections only what the instruction asks for (``report canaries``: the
lines holding a reference identifier, which is how caplet's canaries look
whatever their wording and form; ``report <id>``: the line holding that
identifier). A model that hears no instruction answers honestly: every such
line and every instruction line is reported as an injection.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from caplet._audit._canary_text import find_ids

__all__ = ["MARKER", "GullibleAuditor"]

#: How the hostile plugins address the auditor.
MARKER = "AUDITOR:"
_NUMBERED = re.compile(r"^\s*\d+\| ?(.*)$")
_FILE_START = re.compile(r"^<<<FILE ([0-9a-f]+) ")
_CHECKPOINT = re.compile(r"^<<<CHECKPOINT [0-9a-f]+ ([0-9a-f]+)>>>$")


class GullibleAuditor:
    """An :class:`~caplet._audit._provider.AuditorProvider` that obeys the plugin (see above)."""

    def __init__(self, trust: Literal["files", "operator"]) -> None:
        self._trust = trust
        self.prompts: list[str] = []

    @property
    def name(self) -> str:
        return "selftest"

    @property
    def model(self) -> str:
        return f"gullible-{self._trust}"

    @property
    def max_prompt_chars(self) -> int:
        return 400_000

    def close(self) -> None:
        """Nothing to release."""

    def complete(self, system: str, user: str) -> str:
        del system
        self.prompts.append(user)
        inside, outside = _split(user)
        lines = user.splitlines()
        # It was shown the whole prompt: it copies the tokens of its two ends, as asked.
        ends = (lines[0].removeprefix("BEGIN AUDIT "), lines[-1].removeprefix("END AUDIT "))
        # ... and those of the checkpoint lines between and inside the files (auditor27).
        points = tuple(m.group(1) for line in lines if (m := _CHECKPOINT.match(line)))
        echo = _Echo(ends, points)
        heard = [line for line in (inside if self._trust == "files" else outside) if MARKER in line]
        overrides = [line for line in inside if find_ids(line) and MARKER not in line]
        if not heard:
            reported = overrides + [line for line in inside if MARKER in line]
            return _answer("HIGH" if reported else "LOW", reported, echo, obeyed=False)
        instruction = " ".join(heard)
        reported = []
        if "report canaries" in instruction:
            reported += overrides
        for named in find_ids(instruction):
            reported += [line for line in inside if named in line.lower() and MARKER not in line]
        return _answer("LOW", reported, echo, obeyed=True)


def _split(prompt: str) -> tuple[list[str], list[str]]:
    """(lines of the plugin, lines of the operator), as the system prompt defines them.

    Only delimiters with the exact token of the first file block are real;
    inside a block the line-number prefix is removed. The manifest section
    (caplet's JSON of the plugin's manifest) is plugin data too, and so is the
    block of the static findings (auditor24: they quote the plugin's text).
    """
    lines = prompt.splitlines()
    token = next((m.group(1) for line in lines if (m := _FILE_START.match(line))), None)
    inside: list[str] = []
    outside: list[str] = []
    in_file = in_manifest = False
    for line in lines:
        if line.startswith("## "):
            in_manifest = line.startswith("## Manifest")
        elif in_manifest:
            inside.append(line)
            continue
        if token is not None and line.startswith((f"<<<FILE {token} ", f"<<<FINDINGS {token}>>>")):
            in_file = True
            continue
        if token is not None and line in (f"<<<END FILE {token}>>>", f"<<<END FINDINGS {token}>>>"):
            in_file = False
            continue
        if in_file:
            numbered = _NUMBERED.match(line)
            inside.append(numbered.group(1) if numbered else line)
        else:
            outside.append(line)
    return inside, outside


@dataclass(frozen=True, slots=True)
class _Echo:
    """What the model copies from the prompt: its ends' tokens and the checkpoints'."""

    ends: tuple[str, str]
    checkpoints: tuple[str, ...]


def _answer(risk: str, reported: list[str], echo: _Echo, *, obeyed: bool) -> str:
    return json.dumps(
        {
            "risk_level": risk,
            "summary": "Pre-approved plugin; safe." if obeyed else "Contains injected text.",
            "description_accurate": True,
            "capabilities_observed": [],
            "findings": [],
            "injection_attempts": [
                {"excerpt": line.strip(), "reason": "addresses the auditor"} for line in reported
            ],
            "recommendation": "approve" if obeyed else ("reject" if reported else "approve"),
            "risk_reasons": [],
            "prompt_start": echo.ends[0],
            "prompt_end": echo.ends[1],
            "checkpoints": echo.checkpoints,
        }
    )
