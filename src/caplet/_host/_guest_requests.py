"""The host's side of a guest snippet's ``host.<module>.<function>(...)`` calls.

A guest worker has no capability, so its request handler serves exactly one
op, ``guest.call``, and refuses every other (``ctx.kv``, ``ctx.http``, a
forged ``plugins.call`` ...) with :class:`~caplet._errors.NotGrantedError`.
Guest code shares its interpreter with the runner and can reach the
channel, so nothing the worker did is trusted; each call is checked here,
against the plugins' state *now* (an application thread may have disabled
a plugin since the snippet started):

1. the arguments have exactly the wire shape (``module``, ``function``,
   ``args`` list, ``kwargs`` map), else ``ContextArgumentError``;
2. an enabled plugin, the only one, declares the module, else
   ``NotGrantedError`` saying why (not enabled, ambiguous, unknown, with a
   did-you-mean) and what is importable;
3. the module declares the function, else ``NotGrantedError`` with the
   declared ones;
4. the arguments match the function's declared ``args`` schema, else
   ``ContextArgumentError`` (named without the host's manifest path);
5. the call goes through ``PluginHost``'s ordinary path (the plugin's own
   worker, breaker and schemas), its deadline cut to what is left of the
   snippet's; any failure there is a ``HostCallError`` with its reason.

Every call and refusal is in the permission log as action ``guest.call``,
under the providing plugin (or :data:`GUEST_LOG_NAME` when there is none).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from caplet._errors import (
    BrokerError,
    ContextArgumentError,
    ContextError,
    HostCallError,
    HostError,
    NotGrantedError,
    SandboxError,
    StoreError,
    WorkerCrashedError,
)
from caplet._host._failures import request_failure
from caplet._host._guest_catalog import GuestCatalog
from caplet._host._validate import FunctionValidator, first_error
from caplet._logs import caplet_logger
from caplet._sandbox._guest_wire import GUEST_PLUGIN
from caplet._sandbox._protocol import ContextOp, ContextRequest, WireValue
from caplet._suggest import did_you_mean

__all__ = ["GUEST_LOG_NAME", "GuestCaller", "GuestRequests"]

logger = caplet_logger()

#: The decision log's plugin column for refusals no plugin is behind (not a
#: valid plugin name, so it never mixes with a real plugin's lines).
GUEST_LOG_NAME: Final = "(guest)"
#: Kept back from what is left of the snippet, so the answer can still be sent.
_REPLY_MARGIN_S: Final = 0.05
_KEYS: Final = frozenset({"module", "function", "args", "kwargs"})


class GuestCaller(Protocol):
    """Runs ``target`` of the enabled plugin ``provider`` (``PluginHost``'s call path).

    ``timeout_s`` caps the call's own deadline.
    """

    def __call__(
        self,
        provider: str,
        target: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        timeout_s: float,
    ) -> object: ...


class GuestRequests:
    """Answers one guest worker's requests (implements ``RequestHandler``).

    ``catalog`` returns what is importable now; ``validators`` the compiled
    schemas of an enabled plugin; ``log`` writes one permission-log line
    ``(plugin, action, target, allowed, detail)``.
    """

    __slots__ = ("_call", "_catalog", "_log", "_validators")

    def __init__(
        self,
        catalog: Callable[[], GuestCatalog],
        call: GuestCaller,
        validators: Callable[[str], Mapping[str, FunctionValidator]],
        log: Callable[[str, str, str, bool, str], None],
    ) -> None:
        self._catalog = catalog
        self._call = call
        self._validators = validators
        self._log = log

    def __call__(self, request: ContextRequest, deadline: float) -> WireValue:
        try:
            return self._serve(request, deadline)
        except (ContextError, BrokerError):
            raise  # the refusals the guest is meant to see
        except StoreError as exc:
            # The permission log could not be written (a locked database):
            # the guest learns the host failed, not the host's details.
            logger.warning("guest.call failed in the state store: %s", exc)
            raise ContextError(
                "host error: the host could not record the call (its state store is "
                "unavailable); try again later",
                plugin=GUEST_PLUGIN,
                category="host error",
            ) from exc
        except Exception as exc:
            # A bug of the host's (issue 13): the guest gets a ContextError, and
            # host.exec a result; any other exception would escape host.exec.
            raise request_failure(GUEST_PLUGIN, request.op.value, exc) from exc

    def _serve(self, request: ContextRequest, deadline: float) -> WireValue:
        if request.op is not ContextOp.GUEST_CALL:
            reason = (
                f"not granted: guest code has no ctx.{request.op.value}; it has no capability "
                "of its own and may only call the functions of enabled plugins "
                "(import host.<module>)"
            )
            self._log(GUEST_LOG_NAME, request.op.value, request.op.value, False, reason)
            raise NotGrantedError(reason, plugin=GUEST_PLUGIN)
        module_name, function, args, kwargs = self._arguments(request.args)
        qualified = f"host.{module_name}.{function}"
        catalog = self._catalog()
        module = catalog.module(module_name)
        if module is None:
            reason = f"not granted: {qualified}: {catalog.missing(module_name)}"
            self._log(GUEST_LOG_NAME, "guest.call", qualified[:200], False, reason)
            raise NotGrantedError(reason, plugin=GUEST_PLUGIN)
        plugin = module.plugin
        target = f"{module_name}.{function}"
        if function not in module.function_names:
            reason = (
                f"not granted: module 'host.{module_name}' has no function {function!r}"
                f"{did_you_mean(function, module.function_names)}; plugin {plugin!r} "
                f"declares: {', '.join(module.function_names) or 'nothing'}"
            )
            self._log(plugin, "guest.call", target[:200], False, reason)
            raise NotGrantedError(reason, plugin=GUEST_PLUGIN)
        self._check_schema(plugin, target, qualified, args, kwargs)
        left = deadline - time.monotonic() - _REPLY_MARGIN_S
        if not left > 0:
            reason = f"host.call failed: {qualified}: no time is left of the snippet's deadline"
            self._log(plugin, "guest.call", target, False, reason)
            raise HostCallError(reason, plugin=GUEST_PLUGIN)
        try:
            value = self._call(plugin, target, tuple(args), dict(kwargs), left)
        except (SandboxError, HostError, BrokerError, ContextError) as exc:
            reason = f"host.call failed: {qualified} (plugin {plugin!r}): {_reason(exc)}"
            self._log(plugin, "guest.call", target, False, reason)
            raise HostCallError(reason, plugin=GUEST_PLUGIN) from exc
        self._log(plugin, "guest.call", target, True, "called by guest code")
        return value

    @staticmethod
    def _arguments(
        body: Mapping[str, object],
    ) -> tuple[str, str, list[object], Mapping[str, object]]:
        module, function = body.get("module"), body.get("function")
        args, kwargs = body.get("args"), body.get("kwargs")
        if (
            set(body) != _KEYS
            or not isinstance(module, str)
            or not isinstance(function, str)
            or not isinstance(args, list)
            or not isinstance(kwargs, dict)
        ):
            raise ContextArgumentError(
                "invalid arguments: guest.call takes module (str), function (str), args "
                f"(list) and kwargs (map), got {', '.join(sorted(body)) or 'nothing'}",
                plugin=GUEST_PLUGIN,
            )
        return module, function, args, kwargs

    def _check_schema(
        self,
        plugin: str,
        target: str,
        qualified: str,
        args: list[object],
        kwargs: Mapping[str, object],
    ) -> None:
        """The declared ``args`` schema, worded for the guest (the call path checks again)."""
        try:
            validator = self._validators(plugin).get(target)
        except HostError:  # gone since the catalog was built: the call path says so
            return
        if validator is None or validator.args is None:
            return
        if kwargs:
            problem = (
                f"{qualified} declares a schema for its positional arguments, so pass "
                f"{', '.join(sorted(kwargs))} positionally"
            )
        else:
            found = first_error(validator.args, list(args))
            if found is None:
                return
            where, message, _ = found
            problem = f"the arguments of {qualified} do not match its schema: at {where}: {message}"
        reason = f"invalid arguments: {problem}"
        self._log(plugin, "guest.call", target, False, reason)
        raise ContextArgumentError(reason, plugin=GUEST_PLUGIN)


def _reason(exc: Exception) -> str:
    """The failure's message, without a dead worker's stderr (the host's private log)."""
    text = str(exc)
    if isinstance(exc, WorkerCrashedError):
        text = text.split("; its stderr", 1)[0]
    return text
