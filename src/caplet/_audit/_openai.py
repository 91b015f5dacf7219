"""The OpenAI-compatible chat-completions provider (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

``POST <base_url>/chat/completions`` with a system and a user message; the
answer is ``choices[0].message.content``. Only the fields every compatible
server accepts are sent (model, messages, temperature): ``response_format``
and ``max_tokens`` are refused by some servers or models, and the parser
copes with prose around the JSON anyway.
"""

from __future__ import annotations

from caplet._audit._http import HttpProvider, cut_off, post_json
from caplet._audit._prompt_read import check_prompt_read
from caplet._audit._provider import Answer
from caplet._errors import ProviderError

__all__ = ["OpenAIProvider"]

#: Why a model stopped before its answer ended, and what to do about it.
_CUT = {
    "length": ("its token limit", "; raise the server's output limit for this model"),
    "content_filter": ("the server's content filter", ""),
}


class OpenAIProvider(HttpProvider):
    """An :class:`~caplet._audit._provider.AuditorProvider` for OpenAI-compatible servers.

    ``sleep`` waits between retries (tests pass a recorder so they never wait).
    """

    def answer_naming_model(self, system: str, user: str) -> Answer:
        """Send one chat completion; return the assistant's text and the answer's
        ``model`` (which model answered: a gateway may route one name to several)."""
        headers = {"Content-Type": "application/json"}
        if self.settings.api_key is not None:
            headers["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
        body: dict[str, object] = {
            "model": self.settings.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        data = post_json(
            self._client,
            self.settings,
            "/chat/completions",
            headers,
            body,
            sleep=self._sleep,
            clock=self._clock,
        )
        choices = data.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            stopped = choices[0].get("finish_reason")
            if stopped in _CUT:
                raise cut_off(self.settings, f"finish_reason {stopped}", _CUT[stopped])
            check_prompt_read(self.settings, data, ("prompt_tokens",), system, user)
            message = choices[0].get("message")
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                content: str = message["content"]
                return Answer(content, data.get("model"))
        raise ProviderError(
            f"LLM provider {self.settings.label} answered without choices[0].message.content "
            "text; is this an OpenAI-compatible chat-completions endpoint?",
            provider=self.settings.label,
        )
