"""Whether the server read the whole prompt, by the token count it reports (auditor24).

An OpenAI-compatible server that cuts a long prompt silently (Ollama's default
``num_ctx``, llama.cpp's context shift keeping the head and the tail) hands
the model part of the plugin; the tokens echoed from the prompt's first and
last lines (:mod:`caplet._audit._prompt`) catch a lost head or tail, not a
lost middle. Where the server says how many prompt tokens it read
(``usage.prompt_tokens``, Anthropic's ``usage.input_tokens`` and its cache
counts), a number far below what the prompt must cost is that lost middle:
the provider raises :class:`ProviderError`, and the deep audit fails closed.

The bound is on *words* (runs of text between whitespace), not bytes. Every
current tokenizer starts a new token where a word starts: the byte-level BPEs
(GPT-2, ``cl100k``, ``o200k``, Llama 3, Qwen, Mistral's tekken) split the text
before merging with a pattern whose pieces never hold a space followed by more
text, and SentencePiece (Llama 2, Gemma) splits on whitespace by default; so a
prompt of ``w`` words is at least ``w`` tokens, however long its words are. A
bound on bytes is not: one token can stand for 64 ``=`` or a long run of
spaces, which a plugin may ship, and an honest server would fail it. Half the
words leaves room for a tokenizer that merges some short words (a provider's
own, unpublished) and for a server's prompt cache counting only what it
evaluated anew (the cached prefix is at most the system message's head: the
user message starts with a fresh token); a cut that matters (a 2,048- or
4,096-token window under a prompt of tens of thousands of words) is far below
it. A server that reports no count, or zero, is not judged by it.

A word is one token at least, and a *long* word many (auditor27). attack26 shipped a
data file of one line without blanks, 20,000 numbers as CSV: 111 KB, 59,000 tokens of
``cl100k``, one word; a 4,096-token window lost the payload file beside it and the
count passed. So a word of :data:`_LONG` characters or more counts the lesser of two
estimates, each below what it costs: a quarter of its *changes* (the places where a
character differs from the one before it: varied text, numbers, base64, hex and CJK
cost a token per 1 to 4 characters, and a run of one character repeated is a few
tokens however long, 64 ``=`` being one), and its DEFLATE size in bits over 18 (a
token of a vocabulary of at most 2^18 entries carries 18 bits at most, and a pattern
repeated, ``-=-=-=`` being ``cl100k`` tokens of 16 characters, compresses to nothing).
Words shorter than that count one as before: a long common word is one token
(``international``), and counting those by characters would hold an honest prompt
of prose to more than it costs. The halving covers the long words too. Measured with
``cl100k`` over 8,041 text files (the standard library and the test environment's
packages, 29 million tokens): this bound was at most 0.43 of a file's tokens (0.22 in
all), and at most 0.22 over long runs of CSV, base64, hex, escapes, random letters,
CJK, words and identifiers without blanks, and patterns of period 2 to 8; attack26's
line is 9,722 (the words counted 0).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from typing import Final

from caplet._audit._provider import ProviderSettings
from caplet._errors import ProviderError

__all__ = ["check_prompt_read", "least_prompt_tokens"]


#: Characters from which a word is counted by its changes (module docstring).
_LONG: Final = 32
#: A run of one character repeated (any character: the words hold no line break).
_RUN: Final = re.compile(r"(.)\1*", re.DOTALL)


#: Bits a token carries at most (a vocabulary of up to 2**18 entries).
_TOKEN_BITS: Final = 18


def _deflated_bits(word: str) -> int:
    """The size of ``word`` in bits as raw DEFLATE (no header) at its best compression."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return 8 * len(packer.compress(word.encode("utf-8", "surrogatepass")) + packer.flush())


def _word_cost(word: str) -> int:
    """The fewest tokens one word (a run without blanks) costs (module docstring)."""
    if len(word) < _LONG:
        return 1
    changes = sum(1 for _ in _RUN.finditer(word)) - 1
    return max(1, min(changes // 4, _deflated_bits(word) // _TOKEN_BITS))


def least_prompt_tokens(*texts: str) -> int:
    """The fewest tokens a server may honestly report for ``texts`` (module docstring)."""
    return sum(_word_cost(word) for text in texts for word in text.split()) // 2


def _count(usage: Mapping[str, object], keys: tuple[str, ...]) -> int | None:
    """The sum of the integer counts under ``keys``; None when none of them is one."""
    counts = [
        value
        for key in keys
        if isinstance(value := usage.get(key), int) and not isinstance(value, bool)
    ]
    return sum(counts) if counts else None


def check_prompt_read(
    settings: ProviderSettings, data: Mapping[str, object], keys: tuple[str, ...], *texts: str
) -> None:
    """Raise :class:`ProviderError` when the answer ``data`` says its server read far fewer
    prompt tokens (the sum of ``usage[key]`` for ``keys``) than ``texts`` must cost."""
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return
    read = _count(usage, keys)
    if read is None or read <= 0:
        return
    least = least_prompt_tokens(*texts)
    if read < least:
        raise ProviderError(
            f"LLM provider {settings.label} says it read {read} prompt tokens of a prompt of "
            f"at least {least}: the server cut the prompt, so the model saw part of the "
            "plugin; raise the server's context window (Ollama: num_ctx, llama.cpp: "
            "--ctx-size) above the prompt's size, or lower CAPLET_LLM_MAX_PROMPT_CHARS so a "
            "plugin that does not fit is refused instead",
            provider=settings.label,
        )
