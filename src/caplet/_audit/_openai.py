"""The OpenAI-compatible chat-completions provider (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

``POST <base_url>/chat/completions`` with a system and a user message; the
answer is ``choices[0].message.content``. Only the fields every compatible
server accepts are sent (model, messages, temperature): ``response_format``
and ``max_tokens`` are refused by some servers or models, and the parser
copes with prose around the JSON anyway.
"""

from __future__ import annotations

import time

import httpx

from caplet._audit._http import make_client, post_json
from caplet._audit._provider import ProviderSettings, Sleep
from caplet._errors import ProviderError

__all__ = ["OpenAIProvider"]


class OpenAIProvider:
    """An :class:`~caplet._audit._provider.AuditorProvider` for OpenAI-compatible servers.

    ``sleep`` waits between retries (tests pass a recorder so they never wait).
    """

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        sleep: Sleep = time.sleep,
        client: httpx.Client | None = None,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._client = client if client is not None else make_client(settings)

    @property
    def name(self) -> str:
        return self.settings.kind.value

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def max_prompt_chars(self) -> int:
        return self.settings.max_prompt_chars

    def __repr__(self) -> str:
        return f"OpenAIProvider({self.settings.label})"

    def complete(self, system: str, user: str) -> str:
        """Send one chat completion; return the assistant's text."""
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
            self._client, self.settings, "/chat/completions", headers, body, sleep=self._sleep
        )
        choices = data.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                content: str = message["content"]
                return content
        raise ProviderError(
            f"LLM provider {self.settings.label} answered without choices[0].message.content "
            "text; is this an OpenAI-compatible chat-completions endpoint?",
            provider=self.settings.label,
        )

    def close(self) -> None:
        self._client.close()
