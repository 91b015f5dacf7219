"""auditor24: the server's count of the prompt tokens it read, against the prompt's words."""

from __future__ import annotations

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


def test_long_words_cost_little_and_are_not_a_cut() -> None:
    """Near miss: a plugin of few, very long words (a rule of 10,000 ``=``, a base64 blob:
    a few tokens each in a large vocabulary) is judged by its words, never its bytes."""
    user = "\n".join(["=" * 10_000, "QUJD" * 5_000, "done"])
    assert least_prompt_tokens(user) == 1
    check_prompt_read(SETTINGS, {"usage": {"prompt_tokens": 40}}, KEYS, user)


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
