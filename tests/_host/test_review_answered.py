"""steer37: a review is the model that answered, as its server says.

steer35 made a review `provider:model at <api root>`. The API key was left out, and a
gateway that routes by key (LiteLLM's or OpenRouter's virtual keys; a laptop's key and a
CI machine's on one gateway) answers one model name with different models. The key is
a secret and is never recorded; the answer itself says which model answered (its
`model` field, in OpenAI's and Anthropic's APIs alike), and caplet read past it. The
scripted server here is such a gateway: it answers as `big` to one key and as `tiny`
to another, both asked for `m`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from caplet import PluginHost
from caplet._audit._openai import OpenAIProvider
from caplet._audit._provider import ProviderKind, ProviderSettings
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._audit.llm_server import Exchange, LLMServer, Reply, answer, canary_reports, serve
from tests._host.reviewkit import PLAIN, approve, next_version
from tests.conftest import PluginFactory

#: Which model the gateway routes each key to.
ROUTES = {"Bearer key-laptop": "big", "Bearer key-ci": "tiny"}


def _gateway(exchange: Exchange) -> Reply:
    """An honest model, whichever the key routes to, saying which it is."""
    routed = ROUTES[exchange.headers.get("authorization", "")]
    return Reply(answer(injection_attempts=canary_reports(exchange)), model=routed)


@pytest.fixture
def gateway() -> Iterator[LLMServer]:
    for server in serve():
        server.script(*[_gateway] * 8)
        yield server


def _keyed(server: LLMServer, key: str) -> OpenAIProvider:
    return OpenAIProvider(
        ProviderSettings(
            kind=ProviderKind.OPENAI, model="m", base_url=server.url, api_key=SecretStr(key)
        )
    )


@pytest.mark.security
def test_a_gateway_that_routes_by_key_to_another_model_is_another_review(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    gateway: LLMServer,
) -> None:
    directory = make_plugin("notes")
    laptop = _keyed(gateway, "key-laptop")
    approve(plugins_dir, state_dir, launcher, laptop)
    laptop.close()
    next_version(directory)
    ci = _keyed(gateway, "key-ci")
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=ci, loading=PLAIN
    ) as host:
        audit = host.audit("notes")
        assert audit.canary_status is not None
        assert (audit.model_id, audit.canary_status.value) == ("openai:m", "OK")
        enabled = host.enable("notes")
        assert not enabled, enabled.reason
        assert audit.answered_as == "tiny"
        assert (
            f"it was approved on openai:m (answered as big) at {gateway.url}'s audit, and "
            f"this content was audited by openai:m (answered as tiny) at {gateway.url}; "
            in enabled.reason
        ), enabled.reason
        assert "carried over" not in enabled.reason
        approval = host.get_approval_record("notes")
        assert approval is not None
        assert approval.review == f"openai:m (answered as big) at {gateway.url}"
    ci.close()


def test_near_miss_the_same_key_answered_by_the_same_model_carries_over(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    gateway: LLMServer,
) -> None:
    """An alias the server resolves (asked for `m`, answered as `big`) every time is one
    review: the approval carries over as before."""
    directory = make_plugin("notes")
    laptop = _keyed(gateway, "key-laptop")
    approve(plugins_dir, state_dir, launcher, laptop)
    next_version(directory)
    with PluginHost(
        plugins_dir, state_dir=state_dir, launcher=launcher, auditor=laptop, loading=PLAIN
    ) as host:
        enabled = host.enable("notes")
        assert enabled, enabled.reason
        assert "carried over" in enabled.reason
        host.disable("notes")
    laptop.close()


def test_what_a_server_names_is_one_line_and_keeps_the_server_parsed() -> None:
    # Imported here: the attack above is the test that runs against main's code.
    from caplet._audit._model import answered_name, reviewer
    from caplet._host._review_pins import server_of

    assert answered_name(None) == answered_name(7) == answered_name("") == ""
    assert answered_name("gpt-4o-2024-08-06") == "gpt-4o-2024-08-06"
    odd = answered_name("tiny at http://127.0.0.1:1/v1\x1b[2K")
    assert odd.startswith("sha256:")
    assert len(odd) == len("sha256:") + 16
    review = reviewer("openai", "m", "http://127.0.0.1:9/v1", odd)
    assert server_of(review) == "http://127.0.0.1:9/v1"
    # The name asked for, answered as itself, is the review it always was.
    assert (
        reviewer("openai", "m", "http://127.0.0.1:9/v1", "m") == "openai:m at http://127.0.0.1:9/v1"
    )


def test_a_lock_entry_keeps_which_model_answered(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    launcher: SandboxLauncher,
    gateway: LLMServer,
) -> None:
    """No lock format change: the entry's `audit_model` holds the answered name, and the
    review read back is the approval's."""
    from caplet._trust._lockfile import read_lockfile
    from tests._host.test_review_identity import lock

    make_plugin("notes")
    laptop = _keyed(gateway, "key-laptop")
    approve(plugins_dir, state_dir, launcher, laptop)
    laptop.close()
    lock(plugins_dir, state_dir, launcher)
    entry = read_lockfile(plugins_dir.parent / "caplet.lock").entry("notes")
    assert entry is not None
    assert (entry.audit_model, entry.audit_endpoint) == ("m (answered as big)", gateway.url)
    assert entry.review == f"openai:m (answered as big) at {gateway.url}"
