"""caplet: capability-scoped plugins for Python.

The public API is exactly ``__all__``; everything else (modules whose names
start with an underscore) is private and may change without notice.

Names are imported lazily (PEP 562): ``import caplet`` stays cheap for the
CLI, and, above all, a worker process importing :mod:`caplet._sandbox._worker`
does not pay for the host's dependencies (pydantic, rich, sqlite3) before it
runs a plugin.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from caplet._version import __version__ as __version__

if TYPE_CHECKING:
    from caplet._audit._anthropic import (
        AnthropicProvider as AnthropicProvider,
    )
    from caplet._audit._canary import (
        Canary as Canary,
    )
    from caplet._audit._canary import (
        CanaryInjection as CanaryInjection,
    )
    from caplet._audit._canary import (
        inject_canaries as inject_canaries,
    )
    from caplet._audit._canary_check import (
        CanaryCheck as CanaryCheck,
    )
    from caplet._audit._canary_check import (
        verify_canaries as verify_canaries,
    )
    from caplet._audit._deep import (
        deep_audit as deep_audit,
    )
    from caplet._audit._model import (
        AuditResult as AuditResult,
    )
    from caplet._audit._model import (
        CanaryStatus as CanaryStatus,
    )
    from caplet._audit._model import (
        InjectionAttempt as InjectionAttempt,
    )
    from caplet._audit._model import (
        Verdict as Verdict,
    )
    from caplet._audit._openai import (
        OpenAIProvider as OpenAIProvider,
    )
    from caplet._audit._provider import (
        AuditorProvider as AuditorProvider,
    )
    from caplet._audit._provider import (
        ProviderKind as ProviderKind,
    )
    from caplet._audit._provider import (
        ProviderSettings as ProviderSettings,
    )
    from caplet._audit._provider import (
        settings_from_env as settings_from_env,
    )
    from caplet._audit._report import (
        format_audit_result as format_audit_result,
    )
    from caplet._audit._response import (
        ModelReport as ModelReport,
    )
    from caplet._audit._response import (
        parse_audit_response as parse_audit_response,
    )
    from caplet._audit._select import (
        provider_from_env as provider_from_env,
    )
    from caplet._audit._select import (
        provider_from_settings as provider_from_settings,
    )
    from caplet._audit._static import (
        static_audit as static_audit,
    )
    from caplet._broker._policy import (
        NetworkPolicy as NetworkPolicy,
    )
    from caplet._broker._resolver import (
        Resolver as Resolver,
    )
    from caplet._broker._static_resolver import (
        StaticResolver as StaticResolver,
    )
    from caplet._capabilities._lint import (
        lint_composition as lint_composition,
    )
    from caplet._capabilities._model import (
        AppCapability as AppCapability,
    )
    from caplet._capabilities._model import (
        Capability as Capability,
    )
    from caplet._capabilities._model import (
        CapabilityKind as CapabilityKind,
    )
    from caplet._capabilities._model import (
        EnvReadCapability as EnvReadCapability,
    )
    from caplet._capabilities._model import (
        FsCapability as FsCapability,
    )
    from caplet._capabilities._model import (
        HostCallCapability as HostCallCapability,
    )
    from caplet._capabilities._model import (
        NetHttpCapability as NetHttpCapability,
    )
    from caplet._capabilities._model import (
        ProcExecCapability as ProcExecCapability,
    )
    from caplet._capabilities._parse import (
        parse_capability as parse_capability,
    )
    from caplet._config._prompt import (
        Prompter as Prompter,
    )
    from caplet._config._schema import (
        ConfigField as ConfigField,
    )
    from caplet._config._schema import (
        ConfigType as ConfigType,
    )
    from caplet._config._schema import (
        ConfigValue as ConfigValue,
    )
    from caplet._errors import (
        AppError as AppError,
    )
    from caplet._errors import (
        AppHandlerError as AppHandlerError,
    )
    from caplet._errors import (
        AuditConfigError as AuditConfigError,
    )
    from caplet._errors import (
        AuditError as AuditError,
    )
    from caplet._errors import (
        BlockedByPolicyError as BlockedByPolicyError,
    )
    from caplet._errors import (
        BrokerError as BrokerError,
    )
    from caplet._errors import (
        BudgetExceededError as BudgetExceededError,
    )
    from caplet._errors import (
        CallCancelledError as CallCancelledError,
    )
    from caplet._errors import (
        CallCycleError as CallCycleError,
    )
    from caplet._errors import (
        CallTimeoutError as CallTimeoutError,
    )
    from caplet._errors import (
        CapabilityError as CapabilityError,
    )
    from caplet._errors import (
        CapletError as CapletError,
    )
    from caplet._errors import (
        CircuitOpenError as CircuitOpenError,
    )
    from caplet._errors import (
        ConfigError as ConfigError,
    )
    from caplet._errors import (
        ConnectionFailedError as ConnectionFailedError,
    )
    from caplet._errors import (
        ContextArgumentError as ContextArgumentError,
    )
    from caplet._errors import (
        ContextError as ContextError,
    )
    from caplet._errors import (
        ContextLimitError as ContextLimitError,
    )
    from caplet._errors import (
        ContextUnavailableError as ContextUnavailableError,
    )
    from caplet._errors import (
        DnsError as DnsError,
    )
    from caplet._errors import (
        FetchTimeoutError as FetchTimeoutError,
    )
    from caplet._errors import (
        GuestError as GuestError,
    )
    from caplet._errors import (
        HookError as HookError,
    )
    from caplet._errors import (
        HookFailedError as HookFailedError,
    )
    from caplet._errors import (
        HookPayloadError as HookPayloadError,
    )
    from caplet._errors import (
        HostCallError as HostCallError,
    )
    from caplet._errors import (
        HostError as HostError,
    )
    from caplet._errors import (
        InvalidOutputError as InvalidOutputError,
    )
    from caplet._errors import (
        InvalidUrlError as InvalidUrlError,
    )
    from caplet._errors import (
        LifecycleError as LifecycleError,
    )
    from caplet._errors import (
        LockedModeError as LockedModeError,
    )
    from caplet._errors import (
        LockfileError as LockfileError,
    )
    from caplet._errors import (
        LockfileWriteError as LockfileWriteError,
    )
    from caplet._errors import (
        ManifestError as ManifestError,
    )
    from caplet._errors import (
        NotGrantedError as NotGrantedError,
    )
    from caplet._errors import (
        PluginCallError as PluginCallError,
    )
    from caplet._errors import (
        PluginNotFoundError as PluginNotFoundError,
    )
    from caplet._errors import (
        PluginTreeError as PluginTreeError,
    )
    from caplet._errors import (
        PolicyError as PolicyError,
    )
    from caplet._errors import (
        PromptTooLargeError as PromptTooLargeError,
    )
    from caplet._errors import (
        ProtocolError as ProtocolError,
    )
    from caplet._errors import (
        ProviderAuthError as ProviderAuthError,
    )
    from caplet._errors import (
        ProviderError as ProviderError,
    )
    from caplet._errors import (
        RateLimitError as RateLimitError,
    )
    from caplet._errors import (
        RedirectError as RedirectError,
    )
    from caplet._errors import (
        ResponseError as ResponseError,
    )
    from caplet._errors import (
        SandboxError as SandboxError,
    )
    from caplet._errors import (
        ScanError as ScanError,
    )
    from caplet._errors import (
        SelftestBreachError as SelftestBreachError,
    )
    from caplet._errors import (
        SelftestError as SelftestError,
    )
    from caplet._errors import (
        SelftestMismatchError as SelftestMismatchError,
    )
    from caplet._errors import (
        SignatureError as SignatureError,
    )
    from caplet._errors import (
        SizeLimitError as SizeLimitError,
    )
    from caplet._errors import (
        StoreError as StoreError,
    )
    from caplet._errors import (
        TlsError as TlsError,
    )
    from caplet._errors import (
        TrustError as TrustError,
    )
    from caplet._errors import (
        UpdateError as UpdateError,
    )
    from caplet._errors import (
        WorkerBusyError as WorkerBusyError,
    )
    from caplet._errors import (
        WorkerCrashedError as WorkerCrashedError,
    )
    from caplet._errors import (
        WorkerGoneError as WorkerGoneError,
    )
    from caplet._errors import (
        WorkerStartError as WorkerStartError,
    )
    from caplet._findings import (
        Finding as Finding,
    )
    from caplet._findings import (
        RiskLevel as RiskLevel,
    )
    from caplet._findings import (
        Severity as Severity,
    )
    from caplet._host._agent_text import (
        AgentTextChange as AgentTextChange,
    )
    from caplet._host._apps import (
        AppCall as AppCall,
    )
    from caplet._host._apps import (
        AppHandler as AppHandler,
    )
    from caplet._host._async import (
        AsyncPluginHost as AsyncPluginHost,
    )
    from caplet._host._budget import (
        BudgetPolicy as BudgetPolicy,
    )
    from caplet._host._capdiff import (
        CapabilityDiff as CapabilityDiff,
    )
    from caplet._host._consent import (
        ConsentReason as ConsentReason,
    )
    from caplet._host._consent import (
        ConsentRequest as ConsentRequest,
    )
    from caplet._host._consent import (
        Widening as Widening,
    )
    from caplet._host._context_limits import (
        ContextLimits as ContextLimits,
    )
    from caplet._host._defaults import (
        DefaultChange as DefaultChange,
    )
    from caplet._host._guest_limits import (
        GuestLimits as GuestLimits,
    )
    from caplet._host._guest_result import (
        GuestResult as GuestResult,
    )
    from caplet._host._guest_result import (
        GuestStatus as GuestStatus,
    )
    from caplet._host._hook_model import (
        ErrorPolicy as ErrorPolicy,
    )
    from caplet._host._hook_model import (
        HookCall as HookCall,
    )
    from caplet._host._hook_model import (
        HookCallStatus as HookCallStatus,
    )
    from caplet._host._hook_model import (
        HookResults as HookResults,
    )
    from caplet._host._hook_model import (
        HookSpec as HookSpec,
    )
    from caplet._host._hook_model import (
        HookState as HookState,
    )
    from caplet._host._hook_model import (
        HookStatus as HookStatus,
    )
    from caplet._host._host import (
        PluginHost as PluginHost,
    )
    from caplet._host._loading import (
        LoadingRules as LoadingRules,
    )
    from caplet._host._locked import (
        LockProblem as LockProblem,
    )
    from caplet._host._log_limits import (
        LogLimits as LogLimits,
    )
    from caplet._host._manager import (
        PluginManager as PluginManager,
    )
    from caplet._host._mcp_policy import (
        McpPolicy as McpPolicy,
    )
    from caplet._host._metrics import (
        MetricsSettings as MetricsSettings,
    )
    from caplet._host._policy import (
        Isolation as Isolation,
    )
    from caplet._host._policy import (
        Policy as Policy,
    )
    from caplet._host._policy import (
        TrustTier as TrustTier,
    )
    from caplet._host._policy_file import (
        EffectivePolicy as EffectivePolicy,
    )
    from caplet._host._policy_file import (
        PolicySetting as PolicySetting,
    )
    from caplet._host._policy_file import (
        load_policy as load_policy,
    )
    from caplet._host._records import (
        BrokenPlugin as BrokenPlugin,
    )
    from caplet._host._records import (
        DirtyFlags as DirtyFlags,
    )
    from caplet._host._records import (
        InlineConfigResult as InlineConfigResult,
    )
    from caplet._host._records import (
        Outcome as Outcome,
    )
    from caplet._host._records import (
        PluginInfo as PluginInfo,
    )
    from caplet._host._records import (
        PluginState as PluginState,
    )
    from caplet._host._state_check import (
        StateReport as StateReport,
    )
    from caplet._host._state_check import (
        check_state as check_state,
    )
    from caplet._host._update import (
        UpdateReport as UpdateReport,
    )
    from caplet._manifest._load import (
        load_manifest as load_manifest,
    )
    from caplet._manifest._model import (
        FunctionSpec as FunctionSpec,
    )
    from caplet._manifest._model import (
        Hints as Hints,
    )
    from caplet._manifest._model import (
        Hook as Hook,
    )
    from caplet._manifest._model import (
        Limits as Limits,
    )
    from caplet._manifest._model import (
        Manifest as Manifest,
    )
    from caplet._manifest._model import (
        ModuleSpec as ModuleSpec,
    )
    from caplet._manifest._model import (
        Requirement as Requirement,
    )
    from caplet._sandbox._launcher import (
        Launcher as Launcher,
    )
    from caplet._sandbox._launcher import (
        Worker as Worker,
    )
    from caplet._sandbox._launcher import (
        WorkerSpec as WorkerSpec,
    )
    from caplet._sandbox._subprocess import (
        SubprocessLauncher as SubprocessLauncher,
    )
    from caplet._scan._model import (
        ScanMode as ScanMode,
    )
    from caplet._scan._model import (
        ScanReport as ScanReport,
    )
    from caplet._scan._scanner import (
        scan_tree as scan_tree,
    )
    from caplet._trust._hashing import (
        tree_hash as tree_hash,
    )
    from caplet._trust._lockfile import (
        LockEntry as LockEntry,
    )
    from caplet._trust._lockfile import (
        Lockfile as Lockfile,
    )
    from caplet._trust._open import (
        open_store as open_store,
    )
    from caplet._trust._postgres import (
        PostgresStore as PostgresStore,
    )
    from caplet._trust._problems import (
        ProblemKind as ProblemKind,
    )
    from caplet._trust._problems import (
        StateProblem as StateProblem,
    )
    from caplet._trust._signing import (
        SignatureCheck as SignatureCheck,
    )
    from caplet._trust._signing import (
        SignatureStatus as SignatureStatus,
    )
    from caplet._trust._source import (
        PluginSource as PluginSource,
    )
    from caplet._trust._source import (
        SourceKind as SourceKind,
    )
    from caplet._trust._sqlite import (
        SqliteStore as SqliteStore,
    )
    from caplet._trust._store import (
        ApprovalRecord as ApprovalRecord,
    )
    from caplet._trust._store import (
        Decision as Decision,
    )
    from caplet._trust._store import (
        KvWrite as KvWrite,
    )
    from caplet._trust._store import (
        QuarantineRecord as QuarantineRecord,
    )
    from caplet._trust._store import (
        TrustStore as TrustStore,
    )
__all__ = [
    "AgentTextChange",
    "AnthropicProvider",
    "AppCall",
    "AppCapability",
    "AppError",
    "AppHandler",
    "AppHandlerError",
    "ApprovalRecord",
    "AsyncPluginHost",
    "AuditConfigError",
    "AuditError",
    "AuditResult",
    "AuditorProvider",
    "BlockedByPolicyError",
    "BrokenPlugin",
    "BrokerError",
    "BudgetExceededError",
    "BudgetPolicy",
    "CallCancelledError",
    "CallCycleError",
    "CallTimeoutError",
    "Canary",
    "CanaryCheck",
    "CanaryInjection",
    "CanaryStatus",
    "Capability",
    "CapabilityDiff",
    "CapabilityError",
    "CapabilityKind",
    "CapletError",
    "CircuitOpenError",
    "ConfigError",
    "ConfigField",
    "ConfigType",
    "ConfigValue",
    "ConnectionFailedError",
    "ConsentReason",
    "ConsentRequest",
    "ContextArgumentError",
    "ContextError",
    "ContextLimitError",
    "ContextLimits",
    "ContextUnavailableError",
    "Decision",
    "DefaultChange",
    "DirtyFlags",
    "DnsError",
    "EffectivePolicy",
    "EnvReadCapability",
    "ErrorPolicy",
    "FetchTimeoutError",
    "Finding",
    "FsCapability",
    "FunctionSpec",
    "GuestError",
    "GuestLimits",
    "GuestResult",
    "GuestStatus",
    "Hints",
    "Hook",
    "HookCall",
    "HookCallStatus",
    "HookError",
    "HookFailedError",
    "HookPayloadError",
    "HookResults",
    "HookSpec",
    "HookState",
    "HookStatus",
    "HostCallCapability",
    "HostCallError",
    "HostError",
    "InjectionAttempt",
    "InlineConfigResult",
    "InvalidOutputError",
    "InvalidUrlError",
    "Isolation",
    "KvWrite",
    "Launcher",
    "LifecycleError",
    "Limits",
    "LoadingRules",
    "LockEntry",
    "LockProblem",
    "LockedModeError",
    "Lockfile",
    "LockfileError",
    "LockfileWriteError",
    "LogLimits",
    "Manifest",
    "ManifestError",
    "McpPolicy",
    "MetricsSettings",
    "ModelReport",
    "ModuleSpec",
    "NetHttpCapability",
    "NetworkPolicy",
    "NotGrantedError",
    "OpenAIProvider",
    "Outcome",
    "PluginCallError",
    "PluginHost",
    "PluginInfo",
    "PluginManager",
    "PluginNotFoundError",
    "PluginSource",
    "PluginState",
    "PluginTreeError",
    "Policy",
    "PolicyError",
    "PolicySetting",
    "PostgresStore",
    "ProblemKind",
    "ProcExecCapability",
    "PromptTooLargeError",
    "Prompter",
    "ProtocolError",
    "ProviderAuthError",
    "ProviderError",
    "ProviderKind",
    "ProviderSettings",
    "QuarantineRecord",
    "RateLimitError",
    "RedirectError",
    "Requirement",
    "Resolver",
    "ResponseError",
    "RiskLevel",
    "SandboxError",
    "ScanError",
    "ScanMode",
    "ScanReport",
    "SelftestBreachError",
    "SelftestError",
    "SelftestMismatchError",
    "Severity",
    "SignatureCheck",
    "SignatureError",
    "SignatureStatus",
    "SizeLimitError",
    "SourceKind",
    "SqliteStore",
    "StateProblem",
    "StateReport",
    "StaticResolver",
    "StoreError",
    "SubprocessLauncher",
    "TlsError",
    "TrustError",
    "TrustStore",
    "TrustTier",
    "UpdateError",
    "UpdateReport",
    "Verdict",
    "Widening",
    "Worker",
    "WorkerBusyError",
    "WorkerCrashedError",
    "WorkerGoneError",
    "WorkerSpec",
    "WorkerStartError",
    "check_state",
    "deep_audit",
    "format_audit_result",
    "inject_canaries",
    "lint_composition",
    "load_manifest",
    "load_policy",
    "open_store",
    "parse_audit_response",
    "parse_capability",
    "provider_from_env",
    "provider_from_settings",
    "scan_tree",
    "settings_from_env",
    "static_audit",
    "tree_hash",
    "verify_canaries",
]

#: Where each public name lives. A test checks this matches ``__all__``.
_EXPORTS: dict[str, str] = {
    "MetricsSettings": "caplet._host._metrics",
    "McpPolicy": "caplet._host._mcp_policy",
    "BudgetPolicy": "caplet._host._budget",
    "BudgetExceededError": "caplet._errors",
    "AuditError": "caplet._errors",
    "CallTimeoutError": "caplet._errors",
    "CapabilityError": "caplet._errors",
    "CapletError": "caplet._errors",
    "CircuitOpenError": "caplet._errors",
    "ConfigError": "caplet._errors",
    "HostError": "caplet._errors",
    "InvalidOutputError": "caplet._errors",
    "LifecycleError": "caplet._errors",
    "ManifestError": "caplet._errors",
    "PluginCallError": "caplet._errors",
    "PluginNotFoundError": "caplet._errors",
    "PluginTreeError": "caplet._errors",
    "PolicyError": "caplet._errors",
    "ProtocolError": "caplet._errors",
    "SandboxError": "caplet._errors",
    "SelftestBreachError": "caplet._errors",
    "SelftestError": "caplet._errors",
    "SelftestMismatchError": "caplet._errors",
    "ScanError": "caplet._errors",
    "StoreError": "caplet._errors",
    "TrustError": "caplet._errors",
    "WorkerBusyError": "caplet._errors",
    "WorkerCrashedError": "caplet._errors",
    "WorkerGoneError": "caplet._errors",
    "WorkerStartError": "caplet._errors",
    "Finding": "caplet._findings",
    "RiskLevel": "caplet._findings",
    "Severity": "caplet._findings",
    "ConfigField": "caplet._config._schema",
    "ConfigType": "caplet._config._schema",
    "ConfigValue": "caplet._config._schema",
    "Prompter": "caplet._config._prompt",
    "AppCapability": "caplet._capabilities._model",
    "Capability": "caplet._capabilities._model",
    "CapabilityKind": "caplet._capabilities._model",
    "EnvReadCapability": "caplet._capabilities._model",
    "FsCapability": "caplet._capabilities._model",
    "HostCallCapability": "caplet._capabilities._model",
    "NetHttpCapability": "caplet._capabilities._model",
    "ProcExecCapability": "caplet._capabilities._model",
    "parse_capability": "caplet._capabilities._parse",
    "lint_composition": "caplet._capabilities._lint",
    "FunctionSpec": "caplet._manifest._model",
    "Hints": "caplet._manifest._model",
    "Limits": "caplet._manifest._model",
    "Manifest": "caplet._manifest._model",
    "ModuleSpec": "caplet._manifest._model",
    "Requirement": "caplet._manifest._model",
    "load_manifest": "caplet._manifest._load",
    "ScanMode": "caplet._scan._model",
    "ScanReport": "caplet._scan._model",
    "scan_tree": "caplet._scan._scanner",
    "AuditResult": "caplet._audit._model",
    "Verdict": "caplet._audit._model",
    "tree_hash": "caplet._trust._hashing",
    "ApprovalRecord": "caplet._trust._store",
    "Decision": "caplet._trust._store",
    "QuarantineRecord": "caplet._trust._store",
    "TrustStore": "caplet._trust._store",
    "SqliteStore": "caplet._trust._sqlite",
    "PostgresStore": "caplet._trust._postgres",
    "open_store": "caplet._trust._open",
    "Launcher": "caplet._sandbox._launcher",
    "Worker": "caplet._sandbox._launcher",
    "WorkerSpec": "caplet._sandbox._launcher",
    "SubprocessLauncher": "caplet._sandbox._subprocess",
    "Isolation": "caplet._host._policy",
    "Policy": "caplet._host._policy",
    "BrokenPlugin": "caplet._host._records",
    "DirtyFlags": "caplet._host._records",
    "InlineConfigResult": "caplet._host._records",
    "Outcome": "caplet._host._records",
    "PluginInfo": "caplet._host._records",
    "PluginState": "caplet._host._records",
    "PluginManager": "caplet._host._manager",
    "PluginHost": "caplet._host._host",
    "AnthropicProvider": "caplet._audit._anthropic",
    "Canary": "caplet._audit._canary",
    "CanaryCheck": "caplet._audit._canary_check",
    "CanaryInjection": "caplet._audit._canary",
    "inject_canaries": "caplet._audit._canary",
    "verify_canaries": "caplet._audit._canary_check",
    "deep_audit": "caplet._audit._deep",
    "CanaryStatus": "caplet._audit._model",
    "InjectionAttempt": "caplet._audit._model",
    "OpenAIProvider": "caplet._audit._openai",
    "AuditorProvider": "caplet._audit._provider",
    "ProviderKind": "caplet._audit._provider",
    "ProviderSettings": "caplet._audit._provider",
    "settings_from_env": "caplet._audit._provider",
    "format_audit_result": "caplet._audit._report",
    "ModelReport": "caplet._audit._response",
    "parse_audit_response": "caplet._audit._response",
    "provider_from_env": "caplet._audit._select",
    "provider_from_settings": "caplet._audit._select",
    "static_audit": "caplet._audit._static",
    "AuditConfigError": "caplet._errors",
    "PromptTooLargeError": "caplet._errors",
    "ProviderAuthError": "caplet._errors",
    "ProviderError": "caplet._errors",
    "LockedModeError": "caplet._errors",
    "LockfileError": "caplet._errors",
    "SignatureError": "caplet._errors",
    "UpdateError": "caplet._errors",
    "LockEntry": "caplet._trust._lockfile",
    "Lockfile": "caplet._trust._lockfile",
    "PluginSource": "caplet._trust._source",
    "SourceKind": "caplet._trust._source",
    "SignatureCheck": "caplet._trust._signing",
    "SignatureStatus": "caplet._trust._signing",
    "TrustTier": "caplet._host._policy",
    "LoadingRules": "caplet._host._loading",
    "LockProblem": "caplet._host._locked",
    "CapabilityDiff": "caplet._host._capdiff",
    "UpdateReport": "caplet._host._update",
    "LockfileWriteError": "caplet._errors",
    "ProblemKind": "caplet._trust._problems",
    "StateProblem": "caplet._trust._problems",
    "StateReport": "caplet._host._state_check",
    "check_state": "caplet._host._state_check",
    "HookError": "caplet._errors",
    "HookFailedError": "caplet._errors",
    "HookPayloadError": "caplet._errors",
    "Hook": "caplet._manifest._model",
    "ErrorPolicy": "caplet._host._hook_model",
    "HookCall": "caplet._host._hook_model",
    "HookCallStatus": "caplet._host._hook_model",
    "HookResults": "caplet._host._hook_model",
    "HookSpec": "caplet._host._hook_model",
    "HookState": "caplet._host._hook_model",
    "HookStatus": "caplet._host._hook_model",
    "AppError": "caplet._errors",
    "AppHandlerError": "caplet._errors",
    "BlockedByPolicyError": "caplet._errors",
    "BrokerError": "caplet._errors",
    "CallCycleError": "caplet._errors",
    "ConnectionFailedError": "caplet._errors",
    "ContextArgumentError": "caplet._errors",
    "ContextError": "caplet._errors",
    "ContextLimitError": "caplet._errors",
    "ContextUnavailableError": "caplet._errors",
    "DnsError": "caplet._errors",
    "FetchTimeoutError": "caplet._errors",
    "HostCallError": "caplet._errors",
    "InvalidUrlError": "caplet._errors",
    "NotGrantedError": "caplet._errors",
    "RateLimitError": "caplet._errors",
    "RedirectError": "caplet._errors",
    "ResponseError": "caplet._errors",
    "SizeLimitError": "caplet._errors",
    "TlsError": "caplet._errors",
    "AppCall": "caplet._host._apps",
    "AppHandler": "caplet._host._apps",
    "ContextLimits": "caplet._host._context_limits",
    "ConsentReason": "caplet._host._consent",
    "ConsentRequest": "caplet._host._consent",
    "Widening": "caplet._host._consent",
    "AgentTextChange": "caplet._host._agent_text",
    "DefaultChange": "caplet._host._defaults",
    "KvWrite": "caplet._trust._store",
    "NetworkPolicy": "caplet._broker._policy",
    "Resolver": "caplet._broker._resolver",
    "StaticResolver": "caplet._broker._static_resolver",
    "GuestError": "caplet._errors",
    "GuestLimits": "caplet._host._guest_limits",
    "GuestResult": "caplet._host._guest_result",
    "GuestStatus": "caplet._host._guest_result",
    "AsyncPluginHost": "caplet._host._async",
    "CallCancelledError": "caplet._errors",
    "EffectivePolicy": "caplet._host._policy_file",
    "PolicySetting": "caplet._host._policy_file",
    "LogLimits": "caplet._host._log_limits",
    "load_policy": "caplet._host._policy_file",
}


#: Public submodules, imported on first attribute access like the names above.
_SUBMODULES = frozenset({"audit", "plugin"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"caplet.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'caplet' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
