"""One deep audit against a real model, only when asked for.

Run with ``CAPLET_LLM_PROVIDER=openai CAPLET_LLM_BASE_URL=http://localhost:11434/v1
CAPLET_LLM_MODEL=llama3.1:8b pytest -m real_llm tests/_audit/test_real_llm.py``.
The ``real_llm`` marker is deselected by default (pyproject ``addopts``), so
a normal run neither runs nor skips it.
"""

from __future__ import annotations

import pytest

from caplet._audit._deep import deep_audit
from caplet._audit._model import CanaryStatus, Verdict
from caplet._audit._report import format_audit_result
from caplet._audit._select import provider_from_env
from caplet._findings import RiskLevel
from caplet._trust._hashing import tree_hash
from tests.conftest import REAL_LLM_ENV, PluginFactory


@pytest.mark.real_llm
def test_a_real_model_reports_the_canaries(make_plugin: PluginFactory) -> None:
    assert REAL_LLM_ENV.get("CAPLET_LLM_BASE_URL"), (
        "set CAPLET_LLM_PROVIDER, CAPLET_LLM_BASE_URL and CAPLET_LLM_MODEL to run real_llm tests"
    )
    directory = make_plugin(
        "greet",
        source="""
            def create_functions(config):
                def say(name):
                    return f"Hello, {name}!"

                return {"main": {"run": say}}
        """,
    )
    provider = provider_from_env(REAL_LLM_ENV)
    assert provider is not None
    try:
        result = deep_audit(provider, directory, tree_hash(directory))
    finally:
        provider.close()
    # Whatever the model's quality, the verdict rules hold; a capable model is OK.
    assert not result.static_only, result.fallback_reason
    assert result.model_id == f"{provider.name}:{provider.model}"
    if result.canary_status is CanaryStatus.COMPROMISED:
        assert (result.risk_level, result.verdict) == (RiskLevel.CRITICAL, Verdict.REJECT)
    elif result.canary_status is CanaryStatus.UNRELIABLE:
        assert result.risk_level.order >= RiskLevel.MEDIUM.order
    elif result.canary_status is None:
        assert (result.risk_level, result.verdict) == (RiskLevel.HIGH, Verdict.REJECT)
    print(format_audit_result(result, verbose=True))
