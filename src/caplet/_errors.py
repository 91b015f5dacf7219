"""The one exception tree of caplet.

Every error caplet raises on purpose is a :class:`CapletError`. Each layer has
one base class (``ManifestError``, ``TrustError``, ``SandboxError`` ...) so a
caller can catch a whole subsystem, and every message names the offending
input (plugin, file, field), what was expected, and what to do about it.
Foreign exceptions (``OSError``, ``sqlite3.Error``, pydantic's
``ValidationError``) are translated at the boundary with ``raise ... from exc``
so the original stays attached for debugging.
"""

from __future__ import annotations

__all__ = [
    "AuditError",
    "CallTimeoutError",
    "CapabilityError",
    "CapletError",
    "CircuitOpenError",
    "ConfigError",
    "HostError",
    "InvalidOutputError",
    "LifecycleError",
    "LockedModeError",
    "LockfileError",
    "ManifestError",
    "PluginCallError",
    "PluginNotFoundError",
    "PluginTreeError",
    "ProtocolError",
    "SandboxError",
    "ScanError",
    "SignatureError",
    "StoreError",
    "TrustError",
    "UpdateError",
    "WorkerCrashedError",
    "WorkerStartError",
]


class CapletError(Exception):
    """Base class of every error caplet raises deliberately."""


# -- manifest layer -----------------------------------------------------------


class ConfigError(CapletError):
    """A configuration schema or value is invalid (names plugin and field)."""


class CapabilityError(CapletError):
    """A capability string does not parse, or cannot be substituted."""


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


class CallTimeoutError(SandboxError):
    """A call exceeded its deadline; the worker was killed."""


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


class LockedModeError(HostError):
    """Strict loading found plugins that cannot load; ``problems`` has one line each."""

    def __init__(self, message: str, *, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class UpdateError(HostError):
    """An update could not be staged, applied or recovered (the message says which step)."""
