"""auditor24: a server that cuts a long prompt silently shows the model part of the plugin.

Ollama cuts a prompt longer than its ``num_ctx`` (keeping the end), llama.cpp's context
shift keeps the head and the tail and drops the middle, and neither says so in its
answer. The model then judges the part it was shown, honestly: the canaries catch the cut
only when the lost part held one. Here the scripted server loses the one file that holds
the payload (never a file with a canary) and answers honestly about what it saw; on main
every such audit was LOW, approve. Now the prompt's first and last lines carry tokens the
answer must copy (a lost head or tail fails the audit closed, CPL-AUDIT-011), and a
server's count of the prompt tokens it read, far below what the prompt must cost, is a
failed model (a lost middle: HIGH, reject, static-only).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from caplet._audit._anthropic import AnthropicProvider
from caplet._audit._canary import inject_canaries
from caplet._audit._deep import RULE_PROMPT_CUT, deep_audit
from caplet._audit._model import AuditResult, CanaryStatus, Verdict
from caplet._audit._openai import OpenAIProvider
from caplet._audit._prompt import read_plugin_files
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._findings import RiskLevel, Severity
from caplet._trust._hashing import tree_hash
from tests._audit.llm_server import (
    Exchange,
    LLMServer,
    Reply,
    answer,
    canary_blocks,
    prompt_checkpoints,
    prompt_ends,
)
from tests.conftest import PluginFactory

ENTRY = """\
from . import a_sync, m_sync, notes_io, z_sync


def create_functions(config):
    def run(text):
        return {"text": notes_io.clean(text), "sync": a_sync.DONE and m_sync.DONE and z_sync.DONE}

    return {"main": {"run": run}}
"""

NOTES_IO = """\
def clean(text):
    return " ".join(text.split())


def title(text):
    return text.strip().title()
"""

#: A long, dull table: the bulk of the prompt, in the file that holds the payload.
TABLE = "".join(
    f'    "k{n:04d}": "shelf {n} row {n % 7} of the notes archive",\n' for n in range(400)
)

PAYLOAD = f"""\
import os

DONE = True
_SHELVES = {{
{TABLE}}}


def token():
    return os.environ.get("AWS_SECRET_ACCESS_KEY")
"""

BENIGN = f"""\
DONE = True
_SHELVES = {{
{TABLE}}}


def shelf(key):
    return _SHELVES.get(key, "")
"""

SMALL = "DONE = True\n"

SECRET = "AWS_SECRET_ACCESS_KEY"
#: What an honest model shown the payload sees (the manifest names the secret too).
READS_SECRET = f'os.environ.get("{SECRET}")'
#: What a server's tokenizer splits text into at least: letters, up to three digits, one
#: other character, runs of whitespace (the pattern of cl100k-like byte-level BPEs).
_PIECES = re.compile(r"[A-Za-z]+|\d{1,3}|\s+|[^\sA-Za-z\d]")


def _tokens(text: str) -> int:
    return len(_PIECES.findall(text))


def _block(prompt: str, path: str) -> tuple[int, int]:
    """Where the file block of ``path`` starts and ends in ``prompt``."""
    start = re.search(rf"^<<<FILE [0-9a-f]+ #\d+ {re.escape(path)} ", prompt, re.MULTILINE)
    assert start is not None, path
    end = prompt.index("<<<END FILE", start.start())
    return start.start(), prompt.index("\n", end) + 1


Provider = OpenAIProvider | AnthropicProvider

#: How a server cuts the prompt: what the model is shown of it.
Cut = Callable[[str, str], str]


def _head_lost(prompt: str, path: str) -> str:
    """Ollama's way: the end of the prompt is kept, its head (up to the file) is lost."""
    return prompt[_block(prompt, path)[1] :]


def _tail_lost(prompt: str, path: str) -> str:
    """A server that keeps the head: everything from the file on is lost."""
    return prompt[: _block(prompt, path)[0]]


def _middle_lost(prompt: str, path: str) -> str:
    """llama.cpp's context shift: the head and the tail are kept, the file is lost."""
    start, end = _block(prompt, path)
    return prompt[:start] + prompt[end:]


def _whole(prompt: str, path: str) -> str:
    del path
    return prompt


def _honest_about(seen: str, *, usage: bool) -> Reply:
    """An honest model shown ``seen``: it reports the canaries it sees, the secret if it
    sees it, and copies the tokens of the ends and checkpoints it was shown."""
    reports = [
        {"excerpt": block.text, "reason": f"tries to instruct the auditor ({block.path})"}
        for block in canary_blocks(seen)
    ]
    start, end = prompt_ends(seen)
    fields: dict[str, object] = {"injection_attempts": reports}
    if READS_SECRET in seen:
        fields |= {
            "risk_level": "HIGH",
            "recommendation": "reject",
            "findings": [{"severity": "danger", "message": f"token() returns {SECRET}"}],
        }
    fields["checkpoints"] = prompt_checkpoints(seen)
    text = answer(prompt_start=start, prompt_end=end, **fields)
    return Reply(text, echo=False, prompt_tokens=_tokens(seen) if usage else None)


def _plugin(make_plugin: PluginFactory, payload_at: str, payload: str) -> Path:
    files = {"notes_io.py": NOTES_IO, "a_sync.py": SMALL, "m_sync.py": SMALL, "z_sync.py": SMALL}
    files[payload_at] = payload
    return make_plugin(
        "notes",
        source=ENTRY,
        files=files,
        extra=f'capabilities = ["env.read:{SECRET}"]\n',
    )


def _seed_sparing(directory: Path, path: str) -> int:
    """A seed whose canaries go to files other than ``path`` (deep_audit's first draws)."""
    files = read_plugin_files(directory, max_bytes=1_000_000)
    python = {f.path: f.text for f in files if f.path.endswith(".py") and f.text is not None}
    for seed in range(100):
        injection = inject_canaries(python, rng=random.Random(seed))
        if all(c.file != path for c in injection.canaries):
            return seed
    raise AssertionError("no seed spares the file")


@pytest.fixture(params=[ProviderKind.OPENAI, ProviderKind.ANTHROPIC], ids=["openai", "anthropic"])
def provider(llm: LLMServer, request: pytest.FixtureRequest) -> Iterator[Provider]:
    kind: ProviderKind = request.param
    settings = ProviderSettings(kind=kind, model="test-model", base_url=llm.url, timeout_s=5.0)
    made: Provider = (
        OpenAIProvider(settings, sleep=lambda _: None)
        if kind is ProviderKind.OPENAI
        else AnthropicProvider(settings, sleep=lambda _: None)
    )
    yield made
    made.close()


def _audit(
    make_plugin: PluginFactory,
    llm: LLMServer,
    provider: Provider,
    *,
    payload_at: str,
    payload: str,
    cut: Cut,
    usage: bool,
) -> AuditResult:
    directory = _plugin(make_plugin, payload_at, payload)
    seed = _seed_sparing(directory, payload_at)

    def server(exchange: Exchange) -> Reply:
        return _honest_about(cut(exchange.prompt, payload_at), usage=usage)

    llm.script(server)
    return deep_audit(provider, directory, tree_hash(directory), rng=random.Random(seed), now=5.0)


@pytest.mark.parametrize(
    ("payload_at", "cut", "lost"),
    [("a_sync.py", _head_lost, "first"), ("z_sync.py", _tail_lost, "last")],
    ids=["head", "tail"],
)
def test_a_prompt_cut_at_either_end_fails_the_audit_closed(
    make_plugin: PluginFactory,
    llm: LLMServer,
    provider: Provider,
    payload_at: str,
    cut: Cut,
    lost: str,
) -> None:
    """On main: the canaries were both reported (they were in the part kept), the model
    never saw the payload, and the audit was LOW, approve."""
    result = _audit(
        make_plugin, llm, provider, payload_at=payload_at, payload=PAYLOAD, cut=cut, usage=False
    )
    assert result.canary_status is CanaryStatus.OK  # the canaries cannot tell
    lead = result.findings[0]
    assert lead.rule_id == RULE_PROMPT_CUT
    assert lead.severity is Severity.DANGER
    assert f"did not echo the token caplet printed on the prompt's {lost} line" in lead.message
    assert "raise the server's context window (Ollama: num_ctx, llama.cpp: -c)" in lead.message
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)
    assert result.summary.startswith("not trusted: the auditor was not shown the whole prompt")


def test_a_prompt_cut_in_the_middle_fails_closed_by_the_servers_count(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """llama.cpp's context shift keeps both ends, so both tokens are echoed; the server's
    own count of the tokens it read (about a third of the prompt) gives the cut away.
    On main: LOW, approve."""
    result = _audit(
        make_plugin,
        llm,
        provider,
        payload_at="m_sync.py",
        payload=PAYLOAD,
        cut=_middle_lost,
        usage=True,
    )
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)
    reason = result.fallback_reason or ""
    assert re.search(r"says it read \d+ prompt tokens of a prompt of at least \d+", reason)
    assert "the server cut the prompt, so the model saw part of the plugin" in reason
    assert "num_ctx" in reason


def test_an_answer_that_does_not_echo_the_ends_is_not_trusted(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """A model shown everything that leaves the echo out (or copies a wrong token) is
    not vouched for either: the tokens are what the check reads, nothing else."""
    directory = _plugin(make_plugin, "m_sync.py", BENIGN)
    wrong = json.dumps("0123456789abcdef")

    def forgetful(exchange: Exchange) -> Reply:
        reports = [
            {"excerpt": b.text, "reason": "instructs"} for b in canary_blocks(exchange.prompt)
        ]
        start, _ = prompt_ends(exchange.prompt)
        return Reply(
            answer(injection_attempts=reports, prompt_start=start, prompt_end=json.loads(wrong)),
            echo=False,
        )

    llm.script(forgetful)
    result = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(1), now=5.0)
    assert result.findings[0].rule_id == RULE_PROMPT_CUT
    assert "prompt's last line" in result.findings[0].message
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)


@pytest.mark.parametrize("usage", [True, False], ids=["counted", "not-counted"])
def test_a_benign_plugin_shown_whole_still_passes(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider, usage: bool
) -> None:
    """Near miss: the same plugin with the table and no payload, the same honest script,
    a server that cuts nothing (and counts what it read, or not): LOW, approve."""
    result = _audit(
        make_plugin,
        llm,
        provider,
        payload_at="m_sync.py",
        payload=BENIGN,
        cut=_whole,
        usage=usage,
    )
    assert result.canary_status is CanaryStatus.OK
    assert not [f for f in result.findings if f.rule_id == RULE_PROMPT_CUT]
    assert (result.risk_level, result.verdict) == (RiskLevel.LOW, Verdict.APPROVE)


def test_the_payload_shown_whole_is_found(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """Near miss of the attack: the same server shown the whole prompt finds the payload
    (what the cut hid), so the tests above measure the cut and nothing else."""
    result = _audit(
        make_plugin,
        llm,
        provider,
        payload_at="m_sync.py",
        payload=PAYLOAD,
        cut=_whole,
        usage=True,
    )
    assert result.canary_status is CanaryStatus.OK
    assert not [f for f in result.findings if f.rule_id == RULE_PROMPT_CUT]
    assert any(SECRET in f.message for f in result.findings)
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)


def test_a_whole_line_copied_as_the_echo_is_read(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """Near miss: a model that copies the whole first, last and checkpoint lines, in
    capitals."""
    directory = _plugin(make_plugin, "m_sync.py", SMALL)

    def verbose(exchange: Exchange) -> Reply:
        reports = [
            {"excerpt": b.text, "reason": "instructs"} for b in canary_blocks(exchange.prompt)
        ]
        start, end = prompt_ends(exchange.prompt)
        return Reply(
            answer(
                injection_attempts=reports,
                prompt_start=f"BEGIN AUDIT {start.upper()}",
                prompt_end=f"END AUDIT {end}",
                checkpoints=[
                    line.upper()
                    for line in exchange.prompt.splitlines()
                    if line.startswith("<<<CHECKPOINT")
                ],
            ),
            echo=False,
        )

    llm.script(verbose)
    result = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(1), now=5.0)
    assert (result.risk_level, result.verdict) == (RiskLevel.LOW, Verdict.APPROVE)
