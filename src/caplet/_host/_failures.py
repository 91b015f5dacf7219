"""The host's own failures, turned into caplet errors where they cross its API (issue 13).

Only :class:`~caplet._errors.CapletError` crosses caplet's API. Each path
translates the foreign exceptions it can foresee where they happen (an
``OSError`` of the state store, msgpack's errors for a damaged value, the
HTTP stack's in the broker); what is left is a bug of caplet's, or an
environment that broke in a way nobody foresaw. The host's entry points
catch those last, here in one shape each: logged with the traceback, and
raised as the caplet error of the path that failed, ``from`` the original.

- :func:`request_failure`: a ``ctx`` request of a plugin or a guest. The
  worker gets a :class:`~caplet._errors.ContextError` (category
  ``host error``) and lives on; any other exception would kill it and
  leave ``host.call`` or ``host.exec`` as itself.
- :func:`call_failure`: a call of a plugin function. A
  :class:`~caplet._errors.WorkerStartError` when no worker could be
  started, else a :class:`~caplet._errors.WorkerCrashedError` (the channel
  kills a worker whose exchange failed half-way): both count for the
  plugin's circuit breaker like the failures they stand for, since what the
  plugin sent may be what broke the host.

The messages name the plugin, what failed and what to do, and only the
exception's class: its text may hold host internals (paths, addresses),
and these messages reach plugins and guest code.
"""

from __future__ import annotations

from caplet._errors import ContextError, SandboxError, WorkerCrashedError, WorkerStartError
from caplet._logs import caplet_logger

__all__ = ["call_failure", "request_failure"]

logger = caplet_logger()

_REPORT = "the host logged the details; report it as a caplet bug if it repeats"


def request_failure(plugin: str, what: str, exc: Exception) -> ContextError:
    """The error for a request (``what``: ``ctx.kv.get``, ``guest.call``) the host failed."""
    logger.error("%s of %r failed in the host", what, plugin, exc_info=exc)
    return ContextError(
        f"host error: plugin '{plugin}': {what} failed in the host ({type(exc).__name__}); "
        f"try again; {_REPORT}",
        plugin=plugin,
        category="host error",
    )


def call_failure(plugin: str, target: str, exc: Exception, *, started: bool) -> SandboxError:
    """The error for a call of ``target`` that failed in the host; ``started``: a worker ran it."""
    logger.error("call of %s of %r failed in the host", target, plugin, exc_info=exc)
    if not started:
        return WorkerStartError(
            f"plugin '{plugin}': {target} was not called: its worker could not be started "
            f"({type(exc).__name__} in the host); {_REPORT}"
        )
    return WorkerCrashedError(
        f"plugin '{plugin}': {target} failed in the host ({type(exc).__name__}); the worker "
        f"was stopped and the next call starts a new one; {_REPORT}"
    )
