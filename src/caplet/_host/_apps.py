"""Application capabilities: services the embedding application brokers for plugins.

Seed 002's EmDash example: the application defines ``email:send``, a plugin
declares it, the administrator approves it, and only then does the plugin's
``ctx`` have a way to send mail -- through the application's own code, never
SMTP. In caplet the application registers a handler::

    host.register_capability("app:email.send", send, schema={...})

and a plugin granted ``app:email.send`` calls ``ctx.app("email.send", {...})``.
For each call the host (:meth:`AppRegistry.invoke`):

1. checks the grant: the capability is approved for the plugin, directly
   or through ``implies`` ("write implies read where the app declares it":
   ``app:content.write`` registered with ``implies=("app:content.read",)``
   lets a plugin holding the first call the second);
2. checks that the application provides it;
3. validates the arguments against the declared JSON Schema (Draft
   2020-12, ``pattern`` on RE2, no remote references: the same setup as the
   manifest's function schemas, :mod:`caplet._host._validate`) *before*
   the handler runs, so a handler never sees arguments it did not promise
   to handle;
4. runs the handler with an :class:`AppCall` (which plugin, which
   capability, the arguments). :class:`~caplet._errors.AppError` raised by
   the handler reaches the plugin as written; any other exception is logged
   in the host and reaches the plugin only as
   :class:`~caplet._errors.AppHandlerError`, without its text (which may
   hold the application's internals); caplet's own refusals raised inside
   the handler (a :class:`~caplet._errors.CallCycleError` when it calls
   back into the plugin waiting for it) pass through unchanged;
5. checks the result crosses the channel and is within
   ``ContextLimits.app_max_result_bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from caplet._capabilities._model import AppCapability
from caplet._capabilities._parse import parse_capability
from caplet._errors import (
    AppError,
    AppHandlerError,
    CapabilityError,
    ContextArgumentError,
    ContextError,
    NotGrantedError,
    ProtocolError,
)
from caplet._host._validate import compile_schema, first_error
from caplet._logs import caplet_logger
from caplet._sandbox._protocol import check_value

__all__ = ["AppCall", "AppHandler", "AppRegistry"]

logger = caplet_logger()


@dataclass(frozen=True, slots=True)
class AppCall:
    """One request of a plugin to an application capability, as its handler sees it.

    ``capability`` is the full name (``"app:email.send"``); ``args`` the
    arguments, already validated against the declared schema (JSON-like
    values and bytes; lists, never tuples).
    """

    plugin: str
    capability: str
    args: Any


#: An application capability handler: takes the call, returns a result that can
#: cross the boundary (or raises AppError to refuse with a message).
AppHandler = Callable[[AppCall], object]


@dataclass(frozen=True, slots=True)
class _Service:
    capability: AppCapability
    handler: AppHandler
    validator: Any
    implies: tuple[str, ...]


def _app_name(text: object, what: str) -> AppCapability:
    """Parse ``app:<name>`` (the prefix is required: it is the capability's spelling)."""
    if not isinstance(text, str) or not text.startswith("app:"):
        raise CapabilityError(
            f"{what} must be an application capability such as 'app:email.send', got {text!r}"
        )
    capability = parse_capability(text)
    if not isinstance(capability, AppCapability):  # pragma: no cover - the prefix says app
        raise CapabilityError(f"{what} {text!r} is not an application capability")
    return capability


class AppRegistry:
    """The application capabilities one host provides."""

    def __init__(self) -> None:
        self._services: dict[str, _Service] = {}

    def register(
        self,
        capability: str,
        handler: AppHandler,
        *,
        schema: Mapping[str, Any] | None = None,
        implies: Sequence[str] = (),
    ) -> None:
        """Provide ``capability`` (``"app:<name>"``), served by ``handler``.

        ``schema`` (a JSON Schema, Draft 2020-12) is checked and compiled
        now; ``implies`` lists the capabilities a plugin holding this one may
        also use (they may be registered later). Raises
        :class:`~caplet._errors.CapabilityError` for a bad name, schema or
        handler, or a capability registered twice.
        """
        parsed = _app_name(capability, "the capability to register")
        if not callable(handler):
            raise CapabilityError(
                f"the handler for {parsed} must be callable (it receives an AppCall), got "
                f"{type(handler).__name__}"
            )
        if parsed.name in self._services:
            raise CapabilityError(
                f"{parsed} is already registered; register each application capability once"
            )
        implied = tuple(
            _app_name(text, f"implies of {parsed}").name
            for text in (implies if not isinstance(implies, str) else (implies,))
        )
        validator = None
        if schema is not None:

            def refuse(problem: str) -> CapabilityError:
                return CapabilityError(
                    f"the schema of {parsed} is not a usable JSON Schema: {problem}; fix the "
                    "schema passed to register_capability (Draft 2020-12)"
                )

            validator = compile_schema(schema, refuse)
        self._services[parsed.name] = _Service(parsed, handler, validator, implied)

    def names(self) -> list[str]:
        """The registered capabilities (``"app:<name>"``), sorted."""
        return sorted(f"app:{name}" for name in self._services)

    def reachable(self, held: Iterable[str]) -> frozenset[str]:
        """The app names a plugin holding ``held`` may call: those plus what they imply."""
        reached = set(held)
        frontier = list(reached)
        while frontier:
            service = self._services.get(frontier.pop())
            if service is None:
                continue
            for name in service.implies:
                if name not in reached:
                    reached.add(name)
                    frontier.append(name)
        return frozenset(reached)

    def invoke(
        self, plugin: str, held: Iterable[str], name: object, args: object, *, max_result_bytes: int
    ) -> object:
        """Run ``ctx.app(name, args)`` for ``plugin``, which holds the app capabilities ``held``."""
        if not isinstance(name, str):
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': ctx.app takes the capability name as "
                f"a str, got {type(name).__name__}",
                plugin=plugin,
            )
        try:
            wanted = _app_name(f"app:{name}", "the capability").name
        except CapabilityError as exc:
            raise ContextArgumentError(
                f"invalid arguments: plugin '{plugin}': ctx.app({name[:80]!r}): {exc}",
                plugin=plugin,
            ) from None
        capability = f"app:{wanted}"
        if wanted not in self.reachable(held):
            raise NotGrantedError(
                f"not granted: plugin '{plugin}' was not granted {capability}; declare it in "
                "the manifest's capabilities and have it approved",
                plugin=plugin,
            )
        service = self._services.get(wanted)
        if service is None:
            raise NotGrantedError(
                f"not granted: plugin '{plugin}' asked for {capability}, which this application "
                "does not provide; check the capability name against the application's "
                "documentation",
                plugin=plugin,
            )
        if service.validator is not None:
            problem = first_error(service.validator, args)
            if problem is not None:
                where, message, schema_path = problem
                raise ContextArgumentError(
                    f"invalid arguments: plugin '{plugin}': the arguments of {capability} do "
                    f"not match the application's schema: at {where}: {message} (schema path "
                    f"{schema_path}); pass arguments that match it",
                    plugin=plugin,
                )
        try:
            result = service.handler(AppCall(plugin, capability, args))
        except AppError as exc:
            raise AppError(
                f"refused by the application: plugin '{plugin}': {capability}: {exc}",
                plugin=plugin,
            ) from exc
        except ContextError:
            # caplet's own refusals from inside the handler (a call cycle when
            # it calls back into the plugin that is waiting for it): they carry
            # their category and no application internals.
            raise
        except Exception as exc:
            logger.warning(
                "application handler for %s failed on a request of plugin %r",
                capability,
                plugin,
                exc_info=True,
            )
            raise AppHandlerError(
                f"app handler failed: plugin '{plugin}': the application's handler for "
                f"{capability} raised {type(exc).__name__}; the host logged the details",
                plugin=plugin,
            ) from exc
        return _checked_result(plugin, capability, result, max_result_bytes)


def _checked_result(plugin: str, capability: str, result: object, limit: int) -> object:
    try:
        check_value(result, "the result")
    except ProtocolError as exc:
        logger.warning(
            "application handler for %s returned an unsendable result: %s", capability, exc
        )
        raise AppHandlerError(
            f"app handler failed: plugin '{plugin}': the application's handler for "
            f"{capability} returned a result that cannot cross the boundary; the host logged "
            "the details",
            plugin=plugin,
        ) from None
    size = len(msgpack.packb(result))
    if size > limit:
        logger.warning(
            "application handler for %s returned %d bytes, over the limit of %d",
            capability,
            size,
            limit,
        )
        raise AppHandlerError(
            f"app handler failed: plugin '{plugin}': the application's handler for "
            f"{capability} returned {size} bytes, over the limit of {limit} bytes",
            plugin=plugin,
        )
    return result
