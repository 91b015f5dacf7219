"""auditor27: a lost middle that neither the prompt's ends nor the words bound could see.

attack26: a plugin data file that is one long line without blanks (20,000 numbers as
CSV, 111 KB, under the default budget) costs ~60,000 tokens but counted ~2 words in the
bound on ``usage.prompt_tokens``. A server with a 4,096-token window that keeps the head
and the tail (llama.cpp's context shift) lost the payload file in the middle, reported
4,096 prompt tokens (the bound was ~400), and the model echoed both end tokens: LOW,
approve, the payload never shown. Now a long run without blanks is counted by its
characters (the server's count fails the audit closed), and checkpoint lines with fresh
tokens stand after every file and inside long ones: an answer that does not echo one
fails closed naming the files the model was not shown, whether or not the server counts.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from caplet._audit._deep import RULE_PROMPT_CUT, deep_audit
from caplet._audit._model import AuditResult, CanaryStatus, Verdict
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
from tests._audit.test_deep_prompt_cut import (
    _PIECES,
    ENTRY,
    NOTES_IO,
    READS_SECRET,
    SECRET,
    SMALL,
    Provider,
    _block,
    _honest_about,
    _seed_sparing,
    _tokens,
)
from tests.conftest import PluginFactory

PAYLOAD = f"""\
import os

DONE = True


def token():
    return {READS_SECRET}
"""
#: One line without blanks: about three tokens a number, and one word.
DENSE = ",".join(str(n) for n in range(20_000)) + "\n"
#: The same numbers as an honest table: a row of ten a line.
TABLE = "".join(
    ",".join(str(n) for n in range(row * 10, row * 10 + 10)) + "\n" for row in range(2_000)
)
WINDOW = 4096


def _context_shift(prompt: str) -> str:
    """llama.cpp's context shift: the head up to z_sync.py's block, and the last tokens
    that fill a WINDOW-token context (the payload file in between is lost)."""
    head = prompt[: _block(prompt, "z_sync.py")[0]]
    left = WINDOW - _tokens(head)
    starts = [m.start() for m in _PIECES.finditer(prompt)]
    return head + prompt[starts[-left] :]


def _plugin(make_plugin: PluginFactory, table: str) -> Path:
    files = {
        "notes_io.py": NOTES_IO,
        "a_sync.py": SMALL,
        "m_sync.py": SMALL,
        "z_sync.py": PAYLOAD,
        "z_table.csv": table,
    }
    return make_plugin(
        "notes", source=ENTRY, files=files, extra=f'capabilities = ["env.read:{SECRET}"]\n'
    )


def _audit_shifted(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider, *, usage: bool
) -> tuple[AuditResult, list[str]]:
    directory = _plugin(make_plugin, DENSE)
    seed = _seed_sparing(directory, "z_sync.py")
    seen: list[str] = []

    def server(exchange: Exchange) -> Reply:
        seen.append(_context_shift(exchange.prompt))
        reply = _honest_about(seen[-1], usage=usage)
        if usage:
            assert reply.prompt_tokens == WINDOW
        return reply

    llm.script(server)
    result = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(seed), now=5.0)
    return result, seen


def test_a_dense_file_that_pushes_the_payload_out_fails_closed_by_the_count(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """attack26 as it was run: the server counts the 4,096 tokens it read. The model
    never saw the payload and echoed both ends; on main: LOW, approve."""
    result, seen = _audit_shifted(make_plugin, llm, provider, usage=True)
    # The model was shown neither the payload nor its file, and both ends.
    assert READS_SECRET not in seen[0]
    assert "z_sync.py (" not in seen[0]
    assert prompt_ends(seen[0]) == prompt_ends(llm.exchanges[0].prompt)
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)
    reason = result.fallback_reason or ""
    assert re.search(r"says it read 4096 prompt tokens of a prompt of at least \d{4,}", reason)
    assert "raise the server's context window (Ollama: num_ctx" in reason


def test_a_dense_file_that_pushes_the_payload_out_fails_closed_by_the_checkpoints(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """The same cut by a server that reports no count: the checkpoint after z_sync.py
    was lost with it, so the answer cannot echo it (CPL-AUDIT-011, naming the file)."""
    result, _ = _audit_shifted(make_plugin, llm, provider, usage=False)
    assert result.canary_status is CanaryStatus.OK  # the canaries cannot tell
    lead = result.findings[0]
    assert lead.rule_id == RULE_PROMPT_CUT
    assert lead.severity is Severity.DANGER
    assert "AUDIT INCOMPLETE" in lead.message
    assert "did not echo" in lead.message
    assert "checkpoint" in lead.message
    assert "z_sync.py" in lead.message
    assert "Ollama: num_ctx" in lead.message
    assert "llama.cpp: -c" in lead.message
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)
    assert result.summary.startswith("not trusted: the auditor was not shown the whole prompt")


@pytest.mark.parametrize("table", [DENSE, TABLE], ids=["one-line", "rows"])
def test_a_large_honest_table_shown_whole_passes(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider, table: str
) -> None:
    """Near miss: the same plugin without the payload, its table as one line or in rows,
    a server that shows the model everything and counts it: LOW, approve."""
    directory = _plugin(make_plugin, table)
    (directory / "z_sync.py").write_text(SMALL)
    seen: list[str] = []

    def server(exchange: Exchange) -> Reply:
        seen.append(exchange.prompt)
        return _honest_about(exchange.prompt, usage=True)

    llm.script(server)
    result = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(3), now=5.0)
    assert result.canary_status is CanaryStatus.OK
    assert not [f for f in result.findings if f.rule_id == RULE_PROMPT_CUT]
    assert (result.risk_level, result.verdict) == (RiskLevel.LOW, Verdict.APPROVE)
    # One checkpoint after each of the six files, more inside the 111 KB table, capped.
    assert 6 < len(prompt_checkpoints(seen[0])) <= 32


def test_an_answer_that_echoes_only_some_checkpoints_is_not_trusted(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """A model that copies the first three checkpoints and stops (or was shown only
    them): the audit fails closed and names the files after the last one it echoed."""
    directory = _plugin(make_plugin, TABLE)
    (directory / "z_sync.py").write_text(SMALL)
    prompts: list[str] = []

    def script(exchange: Exchange) -> Reply:
        prompts.append(exchange.prompt)
        reports = [
            {"excerpt": b.text, "reason": "instructs"} for b in canary_blocks(exchange.prompt)
        ]
        start, end = prompt_ends(exchange.prompt)
        tokens = prompt_checkpoints(exchange.prompt)[:3]
        text = answer(
            injection_attempts=reports, prompt_start=start, prompt_end=end, checkpoints=tokens
        )
        return Reply(text, echo=False)

    llm.script(script)
    result = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(1), now=5.0)
    lead = result.findings[0]
    assert lead.rule_id == RULE_PROMPT_CUT
    missed = len(prompt_checkpoints(prompts[0])) - 3
    assert f"did not echo {missed} of the {missed + 3} checkpoint tokens" in lead.message
    # The head's and those after #1 and #2 were echoed: the rest may be unseen.
    assert "#3 notes_io.py, #4 plugin.py, #5 plugin.toml, #6 z_sync.py, #7 z_table.csv;" in (
        lead.message
    )
    assert "a_sync.py" not in lead.message
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)


def test_a_wrong_checkpoint_is_not_an_echo(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """Every checkpoint echoed but one, in its place a token the prompt never held (a
    plugin's text can name one, never know one): not trusted."""
    directory = _plugin(make_plugin, SMALL)
    (directory / "z_sync.py").write_text(SMALL)

    def script(exchange: Exchange) -> Reply:
        reports = [
            {"excerpt": b.text, "reason": "instructs"} for b in canary_blocks(exchange.prompt)
        ]
        start, end = prompt_ends(exchange.prompt)
        tokens = prompt_checkpoints(exchange.prompt)
        tokens[-1] = "0badc0de"
        text = answer(
            injection_attempts=reports, prompt_start=start, prompt_end=end, checkpoints=tokens
        )
        return Reply(text, echo=False)

    llm.script(script)
    result = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(1), now=5.0)
    assert result.findings[0].rule_id == RULE_PROMPT_CUT
    assert "did not echo 1 of the" in result.findings[0].message
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)


def test_a_cut_inside_one_long_file_is_seen(
    make_plugin: PluginFactory, llm: LLMServer, provider: Provider
) -> None:
    """The payload in the middle of one long module (a 90 KB table around it), the server
    loses 40 KB around it and counts nothing: a checkpoint inside the file was lost."""
    rows = "".join(f'    "k{n:05d}": "shelf {n} row {n % 7}",\n' for n in range(1_500))
    module = f"import os\n\nDONE = True\nA = {{\n{rows}}}\n{PAYLOAD}B = {{\n{rows}}}\n"
    directory = _plugin(make_plugin, SMALL)
    (directory / "z_sync.py").write_text(module)
    seed = _seed_sparing(directory, "z_sync.py")

    def server(exchange: Exchange) -> Reply:
        prompt = exchange.prompt
        middle = prompt.index('AWS_SECRET_ACCESS_KEY")')
        seen = prompt[: middle - 20_000] + prompt[middle + 20_000 :]
        return _honest_about(seen, usage=False)

    llm.script(server)
    result = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(seed), now=5.0)
    lead = result.findings[0]
    assert lead.rule_id == RULE_PROMPT_CUT
    assert "z_sync.py" in lead.message
    assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)
