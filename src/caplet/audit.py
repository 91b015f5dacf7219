"""caplet.audit: the LLM auditor with canaries, as a public module.

Everything here is also exported from :mod:`caplet`; this module groups the
auditor's API (``caplet.audit.inject_canaries``, ``verify_canaries``,
``parse_audit_response``, ``deep_audit``, ``format_audit_result``, the
providers and their settings). docs/auditing.md explains the method.

Names are imported lazily (PEP 562) like :mod:`caplet`'s, so importing this
module does not import httpx until a provider class is touched.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from caplet._audit._anthropic import (
        AnthropicProvider,
    )
    from caplet._audit._canary import (
        Canary,
        CanaryInjection,
        inject_canaries,
    )
    from caplet._audit._canary_check import (
        CanaryCheck,
        verify_canaries,
    )
    from caplet._audit._deep import (
        deep_audit,
    )
    from caplet._audit._model import (
        AuditResult,
        CanaryStatus,
        InjectionAttempt,
        Verdict,
    )
    from caplet._audit._openai import (
        OpenAIProvider,
    )
    from caplet._audit._provider import (
        AuditorProvider,
        ProviderKind,
        ProviderSettings,
        settings_from_env,
    )
    from caplet._audit._report import (
        format_audit_result,
    )
    from caplet._audit._response import (
        ModelReport,
        parse_audit_response,
    )
    from caplet._audit._select import (
        provider_from_env,
        provider_from_settings,
    )
    from caplet._audit._static import (
        static_audit,
    )
    from caplet._errors import (
        AuditConfigError,
        AuditError,
        PromptTooLargeError,
        ProviderAuthError,
        ProviderError,
    )

__all__ = [
    "AnthropicProvider",
    "AuditConfigError",
    "AuditError",
    "AuditResult",
    "AuditorProvider",
    "Canary",
    "CanaryCheck",
    "CanaryInjection",
    "CanaryStatus",
    "InjectionAttempt",
    "ModelReport",
    "OpenAIProvider",
    "PromptTooLargeError",
    "ProviderAuthError",
    "ProviderError",
    "ProviderKind",
    "ProviderSettings",
    "Verdict",
    "deep_audit",
    "format_audit_result",
    "inject_canaries",
    "parse_audit_response",
    "provider_from_env",
    "provider_from_settings",
    "settings_from_env",
    "static_audit",
    "verify_canaries",
]

#: Where each public name lives. A test checks this matches ``__all__``.
_EXPORTS: dict[str, str] = {
    "AuditConfigError": "caplet._errors",
    "AuditError": "caplet._errors",
    "PromptTooLargeError": "caplet._errors",
    "ProviderAuthError": "caplet._errors",
    "ProviderError": "caplet._errors",
    "AuditResult": "caplet._audit._model",
    "CanaryStatus": "caplet._audit._model",
    "InjectionAttempt": "caplet._audit._model",
    "Verdict": "caplet._audit._model",
    "static_audit": "caplet._audit._static",
    "Canary": "caplet._audit._canary",
    "CanaryCheck": "caplet._audit._canary_check",
    "CanaryInjection": "caplet._audit._canary",
    "inject_canaries": "caplet._audit._canary",
    "verify_canaries": "caplet._audit._canary_check",
    "ModelReport": "caplet._audit._response",
    "parse_audit_response": "caplet._audit._response",
    "AuditorProvider": "caplet._audit._provider",
    "ProviderKind": "caplet._audit._provider",
    "ProviderSettings": "caplet._audit._provider",
    "settings_from_env": "caplet._audit._provider",
    "OpenAIProvider": "caplet._audit._openai",
    "AnthropicProvider": "caplet._audit._anthropic",
    "provider_from_env": "caplet._audit._select",
    "provider_from_settings": "caplet._audit._select",
    "deep_audit": "caplet._audit._deep",
    "format_audit_result": "caplet._audit._report",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'caplet.audit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
