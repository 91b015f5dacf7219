"""auditor24: the server's count of the prompt tokens it read, against the prompt's words."""

from __future__ import annotations

import base64
import random

import pytest

from caplet._audit._prompt_read import check_prompt_read, least_prompt_tokens
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._errors import ProviderError

SETTINGS = ProviderSettings(kind=ProviderKind.OPENAI, model="m", base_url="http://127.0.0.1:9/v1")
KEYS = ("prompt_tokens",)


def test_a_count_far_below_the_prompts_words_is_a_cut_prompt() -> None:
    user = "word " * 5000
    with pytest.raises(ProviderError) as info:
        check_prompt_read(SETTINGS, {"usage": {"prompt_tokens": 2048}}, KEYS, "system text", user)
    assert "says it read 2048 prompt tokens of a prompt of at least 2501" in str(info.value)
    assert "raise the server's context window (Ollama: num_ctx" in str(info.value)


def test_long_runs_of_one_character_or_pattern_cost_little_and_are_not_a_cut() -> None:
    """Near miss: a plugin of few, very long runs of one character or a short pattern (a
    rule of 10,000 ``=``, 156 tokens of cl100k; 20,000 characters of ``-=``, 1,254) is
    judged by its changes or how well it compresses, never its bytes."""
    user = "\n".join(["=" * 10_000, "-" * 5_000, "done"])
    assert least_prompt_tokens(user) == 1
    check_prompt_read(SETTINGS, {"usage": {"prompt_tokens": 40}}, KEYS, user)
    rule = "-=" * 10_000
    assert least_prompt_tokens(rule) < 20
    check_prompt_read(SETTINGS, {"usage": {"prompt_tokens": 1254}}, KEYS, rule)


def test_a_long_line_without_blanks_counts_by_its_characters() -> None:
    """attack26: 20,000 numbers as one CSV line (111 KB, 59,000 tokens of cl100k) were one
    word, so a server that read 4,096 tokens of it passed the bound of 0."""
    dense = ",".join(str(n) for n in range(20_000))
    assert least_prompt_tokens(dense) > 9_000
    with pytest.raises(ProviderError) as info:
        check_prompt_read(SETTINGS, {"usage": {"prompt_tokens": 4096}}, KEYS, dense)
    assert "says it read 4096 prompt tokens of a prompt of at least" in str(info.value)


def test_an_honest_blob_and_long_common_words_are_not_a_cut() -> None:
    """Near miss: a base64 blob (cl100k: 28,699 tokens for these 40,000 characters; the
    server here says a third of the characters) and prose of long common words (a token
    each: counted one each, not by letters) pass a server's honest count."""
    blob = base64.b64encode(random.Random(0).randbytes(30_000)).decode()
    assert least_prompt_tokens(blob) < len(blob) // 6
    check_prompt_read(SETTINGS, {"usage": {"prompt_tokens": len(blob) // 3}}, KEYS, blob)
    prose = "internationalization responsibilities " * 1000
    assert least_prompt_tokens(prose) == 1000
    check_prompt_read(SETTINGS, {"usage": {"prompt_tokens": 2000}}, KEYS, prose)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"usage": None},
        {"usage": {}},
        {"usage": {"prompt_tokens": 0}},
        {"usage": {"prompt_tokens": True}},
        {"usage": {"prompt_tokens": "12"}},
    ],
)
def test_a_server_that_does_not_count_is_not_judged_by_it(data: dict[str, object]) -> None:
    check_prompt_read(SETTINGS, data, KEYS, "word " * 4000)


def test_anthropics_cache_counts_add_up() -> None:
    """Near miss: prompt-cache reads are counted apart from input_tokens."""
    usage = {"input_tokens": 100, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 0}
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    check_prompt_read(SETTINGS, {"usage": usage}, keys, "word " * 4000)
