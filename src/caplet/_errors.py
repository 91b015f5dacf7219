"""The one exception tree of caplet.

Every error caplet raises on purpose is a :class:`CapletError`. Each layer has
one base class (``ManifestError``, ``TrustError``, ``SandboxError`` ...) so a
caller can catch a whole subsystem, and every message names the offending
input (plugin, file, field), what was expected, and what to do about it.
Foreign exceptions (``OSError``, ``sqlite3.Error``, pydantic's
``ValidationError``) are translated at the boundary with ``raise ... from exc``
so the original stays attached for debugging.

The root is :mod:`caplet._error_base`'s, and the errors of a plugin's requests
to its host (the broker's and the context's families, which cross the
worker's channel by class name with their category) are
:mod:`caplet._errors_request`'s; this module names the whole tree (mend19).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from caplet._error_base import CapletError
from caplet._errors_request import (
    AppError,
    AppHandlerError,
    BlockedByPolicyError,
    BrokerError,
    CallCycleError,
    ConnectionFailedError,
    ContextArgumentError,
    ContextError,
    ContextLimitError,
    ContextUnavailableError,
    DnsError,
    FetchTimeoutError,
    HostCallError,
    InvalidUrlError,
    NotGrantedError,
    RateLimitError,
    RedirectError,
    ResponseError,
    SizeLimitError,
    TlsError,
)

if TYPE_CHECKING:
    from caplet._validated import Problem

__all__ = [
    "AppError",
    "AppHandlerError",
    "AuditConfigError",
    "AuditError",
    "BlockedByPolicyError",
    "BrokerError",
    "CallCancelledError",
    "CallCycleError",
    "CallTimeoutError",
    "CapabilityError",
    "CapletError",
    "CircuitOpenError",
    "ConfigError",
    "ConnectionFailedError",
    "ContextArgumentError",
    "ContextError",
    "ContextLimitError",
    "ContextUnavailableError",
    "DnsError",
    "FetchTimeoutError",
    "GuestError",
    "HookError",
    "HookFailedError",
    "HookPayloadError",
    "HostCallError",
    "HostError",
    "InvalidOutputError",
    "InvalidUrlError",
    "LifecycleError",
    "LockedModeError",
    "LockfileError",
    "LockfileWriteError",
    "ManifestError",
    "NotGrantedError",
    "PluginCallError",
    "PluginNotFoundError",
    "PluginTreeError",
    "PolicyError",
    "PromptTooLargeError",
    "ProtocolError",
    "ProviderAuthError",
    "ProviderError",
    "RateLimitError",
    "RedirectError",
    "ResponseError",
    "SandboxError",
    "ScanError",
    "SelftestBreachError",
    "SelftestError",
    "SelftestMismatchError",
    "SignatureError",
    "SizeLimitError",
    "StoreError",
    "TlsError",
    "TrustError",
    "UpdateError",
    "WorkerBusyError",
    "WorkerCrashedError",
    "WorkerGoneError",
    "WorkerStartError",
]


# -- manifest layer -----------------------------------------------------------


class ConfigError(CapletError):
    """A configuration schema or value is invalid (names plugin and field)."""


class CapabilityError(CapletError):
    """A capability string does not parse, or cannot be substituted."""


class PolicyError(CapletError):
    """A policy value is invalid or cannot be honoured here (names the field and the fix).

    ``problems`` lists each invalid value apart (dotted field and message),
    when the policy objects refused them at construction.
    """

    def __init__(self, message: str, problems: tuple[Problem, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class ManifestError(CapletError):
    """A plugin manifest is missing, unreadable or invalid.

    ``path`` is the manifest file (or the plugin directory when no manifest
    exists) and ``field`` the dotted field path, when one is to blame.
    """

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.field = field


# -- scan / audit ---------------------------------------------------------------


class ScanError(CapletError):
    """The static scanner could not scan its input at all."""


class AuditError(CapletError):
    """An audit could not be produced or stored."""


class AuditConfigError(AuditError):
    """The LLM auditor is misconfigured (``CAPLET_LLM_*`` or :class:`ProviderSettings`).

    The message names the setting (or environment variable) and a valid value.
    """


class ProviderError(AuditError):
    """The LLM provider failed: unreachable, timed out, rate limited past the
    retries, a server error, or an answer of the wrong shape.

    A deep audit turns this into a static-only result labelled with the reason
    (design.md section 7); ``provider`` names the provider and model.
    """

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message)
        self.provider = provider


class ProviderAuthError(AuditError):
    """The LLM provider refused the credentials (HTTP 401/403).

    Deliberately *not* a :class:`ProviderError`: a wrong key is a setting to
    fix, so it stops the audit instead of degrading it to static-only.
    """

    def __init__(self, message: str, *, provider: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class PromptTooLargeError(AuditError):
    """The plugin does not fit the model's prompt budget; nothing is truncated.

    ``size`` and ``budget`` are in characters.
    """

    def __init__(self, message: str, *, size: int = 0, budget: int = 0) -> None:
        super().__init__(message)
        self.size = size
        self.budget = budget


# -- trust ------------------------------------------------------------------------


class TrustError(CapletError):
    """Base of the trust layer: hashing, snapshots and the state store."""


class PluginTreeError(TrustError):
    """A plugin's file tree cannot be hashed or snapshotted safely."""


class StoreError(TrustError):
    """The state database cannot be opened, read or written."""


class LockfileError(TrustError):
    """``caplet.lock`` cannot be read, parsed or written.

    ``path`` is the lock file, ``plugin`` the entry and ``field`` the key to
    blame, when one is.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        plugin: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.plugin = plugin
        self.field = field


class LockfileWriteError(LockfileError):
    """``caplet.lock`` could not be written (a full disk, permissions); the old file is intact.

    A failure of the environment rather than of the file's content, so the
    command line reports it like a state error (exit 3).
    """


class SignatureError(TrustError):
    """A key or signature file is malformed, or a signature does not verify."""


# -- sandbox ------------------------------------------------------------------------


class SandboxError(CapletError):
    """Base of the sandbox layer: workers, the channel and calls into them."""


class ProtocolError(SandboxError):
    """A frame on the worker channel is malformed, oversized or unexpected."""


class WorkerStartError(SandboxError):
    """A worker process could not be started or did not become ready."""


class WorkerCrashedError(SandboxError):
    """A worker process died while the host was waiting for it."""


class WorkerGoneError(WorkerCrashedError):
    """The worker had already exited when a call was about to be sent: nothing ran.

    :class:`~caplet.PluginHost` answers it by starting a new worker and
    making the call there; it reaches callers of a bare :class:`Worker` only.
    """


class CallTimeoutError(SandboxError):
    """A call exceeded its deadline; the worker was killed."""


class WorkerBusyError(SandboxError):
    """A nested call (another plugin's ``ctx.plugins.call``, guest code's ``host.*``) found
    the worker serving other calls for all the time its caller had left: nothing was
    sent, the worker runs on, and the circuit breaker counts nothing (attack31)."""


class CallCancelledError(SandboxError):
    """The caller cancelled the call (an asyncio task, ``AsyncPluginHost``): before it was
    sent (nothing ran), or while it ran (its worker was stopped). Never counted by the
    circuit breaker."""


class PluginCallError(SandboxError):
    """A plugin function raised an exception; the message is the plugin's.

    ``exc_type`` is the name of the exception class inside the worker; it is
    only a string because no object ever crosses the boundary.
    """

    def __init__(self, message: str, *, exc_type: str = "Exception") -> None:
        super().__init__(message)
        self.exc_type = exc_type


class CircuitOpenError(SandboxError):
    """The plugin's circuit breaker is open: the call was refused without running it.

    ``remaining_s`` is the cooldown left (0 while a half-open probe runs) and
    ``failures`` the consecutive failures that opened it.
    """

    def __init__(
        self, message: str, *, plugin: str = "", failures: int = 0, remaining_s: float = 0.0
    ) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.failures = failures
        self.remaining_s = remaining_s


class BudgetExceededError(SandboxError):
    """A plugin used up a budget of the policy (``Policy.budget``): the call was refused
    without running it, until the budget's window reopens.

    ``budget`` is the budget's field (``cpu_s``, ``broker_requests``, ``broker_bytes``),
    ``used`` and ``limit`` its use and bound in the current window of ``window_s``
    seconds, and ``reopens_in_s`` how long until the window reopens.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin: str = "",
        budget: str = "",
        used: float = 0.0,
        limit: float = 0.0,
        window_s: float = 0.0,
        reopens_in_s: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.budget = budget
        self.used = used
        self.limit = limit
        self.window_s = window_s
        self.reopens_in_s = reopens_in_s


class InvalidOutputError(SandboxError):
    """A plugin function returned a value its declared ``returns`` schema refuses.

    ``target`` is ``"module.function"`` and ``schema_path`` the JSON Schema
    keyword path that failed (``properties/n/type``).
    """

    def __init__(
        self, message: str, *, plugin: str = "", target: str = "", schema_path: str = ""
    ) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.target = target
        self.schema_path = schema_path


# -- host ---------------------------------------------------------------------------


class HostError(CapletError):
    """Base of the host layer: plugin lookup and lifecycle."""


class PluginNotFoundError(HostError):
    """No discovered plugin has this name (``suggestion`` holds the closest)."""

    def __init__(self, message: str, *, name: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.suggestion = suggestion


class LifecycleError(HostError):
    """A lifecycle step (enable, approve, call ...) was refused."""


class GuestError(HostError):
    """Guest code was not run because the request itself is wrong: the code is not
    a str or is over the policy's size limit, or the timeout is not a positive
    number within ``Policy.guest.max_timeout_ms``. What the code does once it
    runs is never raised: it is in the ``GuestResult``."""


class LockedModeError(HostError):
    """Strict loading found plugins that cannot load; ``problems`` has one line each."""

    def __init__(self, message: str, *, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class HookError(HostError):
    """An event could not be defined or emitted: a malformed or unknown event name,
    an unusable schema, a second definition. ``event`` names the event."""

    def __init__(self, message: str, *, event: str = "") -> None:
        super().__init__(message)
        self.event = event


class HookPayloadError(HookError):
    """The payload given to ``emit`` breaks the event's schema or cannot cross the
    boundary (not JSON-compatible); no plugin was called. ``schema_path`` is the
    JSON Schema keyword path that failed, when one did."""

    def __init__(self, message: str, *, event: str = "", schema_path: str = "") -> None:
        super().__init__(message, event=event)
        self.schema_path = schema_path


class HookFailedError(HookError):
    """Raised by ``HookResults.raise_for_errors()``: some subscribed plugins failed.

    ``plugins`` names them in call order; the message has each plugin's error.
    """

    def __init__(self, message: str, *, event: str = "", plugins: tuple[str, ...] = ()) -> None:
        super().__init__(message, event=event)
        self.plugins = plugins


class UpdateError(HostError):
    """An update could not be staged, applied or recovered (the message says which step)."""


# -- selftest -----------------------------------------------------------------------


class SelftestError(CapletError):
    """``caplet selftest`` could not run: its arena, a case's set-up, or the report file."""


class SelftestMismatchError(SelftestError):
    """A hostile case was contained, but not by the layer it expects (or not as expected).

    With every layer on this machine that is a regression of that layer; with
    a layer missing it is defence in depth holding where the missing one
    would have stopped the attack.
    """


class SelftestBreachError(SelftestMismatchError):
    """A hostile case was *not* contained: the attack did what it tried to do."""
