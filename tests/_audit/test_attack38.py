"""attack38: steer37 read which model answered through a runtime protocol, which matches a
provider by its method's name alone.

An application's provider (``PluginHost(auditor=...)``) implements ``complete``; one with
an ``answer`` method of its own meaning (a chat helper's ``answer(question, context)``,
returning a str) matched steer37's ``NamesWhoAnswered``: caplet sent its audit prompt to
that method and failed on its result (``AttributeError: 'str' object has no attribute
'text'``, a traceback out of every deep audit of the host). caplet's method has a name of
its own now, so such a provider is asked through ``complete`` as before.
"""

from __future__ import annotations

import random
from pathlib import Path

from caplet._audit._deep import deep_audit
from caplet._audit._model import CanaryStatus
from caplet._audit._openai import OpenAIProvider
from caplet._trust._hashing import tree_hash
from tests._audit.llm_server import Exchange, LLMServer, Reply, answer, canary_reports
from tests.conftest import PluginFactory


class ChatHelperProvider:
    """An application's provider: ``complete`` for caplet, ``answer`` for its own chat."""

    def __init__(self, inner: OpenAIProvider) -> None:
        self._inner = inner
        self.asked: list[str] = []
        self.name = "app"
        self.model = "app-model"
        self.max_prompt_chars = inner.max_prompt_chars

    def complete(self, system: str, user: str) -> str:
        return self._inner.complete(system, user)

    def answer(self, question: str, context: str) -> str:
        self.asked.append(question)
        return f"the application's own answer to {question[:20]!r}"

    def close(self) -> None:
        self._inner.close()


def test_an_application_providers_own_answer_method_is_not_called(
    make_plugin: PluginFactory, llm: LLMServer, provider: OpenAIProvider
) -> None:
    directory: Path = make_plugin("greeter")

    def honest(exchange: Exchange) -> Reply:
        return Reply(answer(injection_attempts=canary_reports(exchange)), model="other")

    llm.script(honest)
    app = ChatHelperProvider(provider)
    audit = deep_audit(app, directory, tree_hash(directory), rng=random.Random(3), now=5.0)
    assert app.asked == [], "caplet's prompt went to the application's own answer()"
    assert not audit.static_only, audit.fallback_reason
    assert audit.canary_status is CanaryStatus.OK
    # an application's provider names the model it was asked for (steer37's rule)
    assert (audit.provider, audit.model, audit.answered_as) == ("app", "app-model", "")


def test_near_miss_caplets_own_provider_still_says_who_answered(
    make_plugin: PluginFactory, llm: LLMServer, provider: OpenAIProvider
) -> None:
    directory: Path = make_plugin("greeter")

    def routed(exchange: Exchange) -> Reply:
        return Reply(answer(injection_attempts=canary_reports(exchange)), model="tiny")

    llm.script(routed)
    audit = deep_audit(provider, directory, tree_hash(directory), rng=random.Random(3), now=5.0)
    assert audit.answered_as == "tiny"
