"""The Anthropic messages-API provider.

``POST <base_url>/messages`` with ``x-api-key`` and ``anthropic-version``
headers, the system prompt in ``system`` and one user message; the answer is
the concatenated ``text`` blocks of ``content``
(https://docs.anthropic.com/en/api/messages).
"""

from __future__ import annotations

from caplet._audit._http import HttpProvider, cut_off, post_json
from caplet._audit._prompt_read import check_prompt_read
from caplet._audit._provider import Answer
from caplet._errors import ProviderError

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider"]

#: Why a model stopped before its answer ended, and what to do about it.
_CUT = {
    "max_tokens": ("its token limit", "; raise ProviderSettings.max_tokens"),
    "refusal": ("a refusal", ""),
}

#: The usage counts that add up to the prompt tokens the server read.
_READ = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

#: The API version header the request and answer shapes below follow.
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicProvider(HttpProvider):
    """An :class:`~caplet._audit._provider.AuditorProvider` for Anthropic's messages API.

    ``sleep`` waits between retries (tests pass a recorder so they never wait).
    """

    def answer_naming_model(self, system: str, user: str) -> Answer:
        """Send one message; return the text of the answer and its ``model`` (which model
        answered)."""
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.settings.api_key is not None:
            headers["x-api-key"] = self.settings.api_key.get_secret_value()
        body: dict[str, object] = {
            "model": self.settings.model,
            "max_tokens": self.settings.max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        data = post_json(
            self._client,
            self.settings,
            "/messages",
            headers,
            body,
            sleep=self._sleep,
            clock=self._clock,
        )
        stopped = data.get("stop_reason")
        if stopped in _CUT:
            raise cut_off(self.settings, f"stop_reason {stopped}", _CUT[stopped])
        # Prompt-cache reads and writes are counted apart from input_tokens.
        check_prompt_read(self.settings, data, _READ, system, user)
        content = data.get("content")
        if isinstance(content, list):
            texts = [
                block["text"]
                for block in content
                if isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ]
            if texts:
                return Answer("".join(texts), data.get("model"))
        raise ProviderError(
            f"LLM provider {self.settings.label} answered without a text content block; "
            "is this Anthropic's messages API?",
            provider=self.settings.label,
        )
