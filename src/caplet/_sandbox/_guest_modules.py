"""The ``host`` package inside a guest worker: ``import host.fsread``.

Guest code reaches plugins only through ``host.<module>``, the modules the
enabled plugins declare (seed 000's ``require("host:name")``). A meta-path
finder, first on ``sys.meta_path`` so nothing on ``sys.path`` can shadow it,
serves the package ``host`` and one submodule per importable module; each
declared function is a proxy whose call is one ``guest.call`` request to the
host, which checks it again (plugin enabled, function declared, argument
schema) and runs it in the plugin's own sandbox.

Nothing here is a security boundary (guest code shares this interpreter and
could send requests of its own); the host is. What this module adds is the
clear error at the guest's call site: importing a module of a plugin that
is not enabled, or calling a function its manifest does not declare, raises
at once, naming it, what is available and the closest match.

This module runs inside guest workers: standard library, msgpack and
caplet's base and sandbox modules only.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from caplet._errors import ProtocolError
from caplet._sandbox._context_parts import ContextTransport
from caplet._sandbox._guest_wire import HostFunction, HostModule
from caplet._sandbox._protocol import ALLOWED_VALUES, ContextOp, check_value

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["PACKAGE", "HostModules", "install"]

#: The package guest code imports host modules from.
PACKAGE: Final = "host"


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none (no enabled plugin declares a module)"


def _did_you_mean(name: str, candidates: Sequence[str]) -> str:
    # Imported here: only an error needs it, and every guest worker pays for
    # what this module imports before its snippet runs.
    from caplet._suggest import did_you_mean

    return did_you_mean(name, candidates)


class HostModules:
    """Finds and builds ``host`` and ``host.<module>`` for one snippet.

    A meta-path finder and loader by protocol (importlib's abstract base
    classes would cost every guest worker an import of importlib.resources).
    """

    def __init__(
        self,
        transport: ContextTransport,
        modules: Sequence[HostModule],
        unavailable: Mapping[str, str],
    ) -> None:
        self._transport = transport
        self._modules = {m.name: m for m in modules}
        self._unavailable = dict(unavailable)
        #: This object, typed as the Loader it is by protocol.
        self._loader = cast("Loader", self)

    # -- finder ------------------------------------------------------------------------

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == PACKAGE:
            spec = importlib.machinery.ModuleSpec(PACKAGE, self._loader, is_package=True)
            spec.submodule_search_locations = []
            return spec
        package, _, name = fullname.partition(".")
        if package != PACKAGE:
            return None
        if name in self._modules:
            return importlib.machinery.ModuleSpec(fullname, self._loader)
        # Raised here rather than returning None, so the guest reads why
        # instead of Python's bare "No module named ...".
        raise ModuleNotFoundError(self.missing(name), name=fullname)

    def missing(self, name: str) -> str:
        """Why ``host.<name>`` cannot be imported, and what can."""
        available = sorted(self._modules)
        why = self._unavailable.get(name)
        if why is None:
            hint = _did_you_mean(name, [*available, *sorted(self._unavailable)])
            why = f"no plugin declares a module {name!r}{hint}"
        return (
            f"No module named '{PACKAGE}.{name}': {why}; importable host modules: "
            f"{_listing(available)}"
        )

    # -- loader ------------------------------------------------------------------------

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == PACKAGE:
            self._fill_package(module)
            return
        self._fill_module(module, self._modules[module.__name__.partition(".")[2]])

    def _fill_package(self, package: types.ModuleType) -> None:
        modules = sorted(self._modules)
        package.__doc__ = (
            "Functions of the enabled plugins; every call runs in the plugin's own sandbox. "
            f"Modules: {_listing(modules)}."
        )
        package.__all__ = modules  # type: ignore[attr-defined]
        finder = self

        def __getattr__(name: str) -> types.ModuleType:  # noqa: N807 - PEP 562
            # ``import host`` then ``host.fsread.read_file(...)`` works too.
            if name.startswith("__"):
                raise AttributeError(f"module '{PACKAGE}' has no attribute {name!r}")
            if name not in finder._modules:
                raise AttributeError(finder.missing(name))
            return importlib.import_module(f"{PACKAGE}.{name}")

        def __dir__() -> list[str]:  # noqa: N807 - PEP 562
            return modules

        package.__getattr__ = __getattr__  # type: ignore[method-assign]
        package.__dir__ = __dir__  # type: ignore[method-assign]

    def _fill_module(self, module: types.ModuleType, spec: HostModule) -> None:
        names = spec.function_names
        module.__doc__ = spec.description or f"Functions of plugin {spec.plugin!r}."
        module.__all__ = list(names)  # type: ignore[attr-defined]
        for function in spec.functions:
            setattr(module, function.name, self._proxy(spec.name, function))

        def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562
            if name.startswith("__"):
                raise AttributeError(f"module '{PACKAGE}.{spec.name}' has no attribute {name!r}")
            raise AttributeError(
                f"module '{PACKAGE}.{spec.name}' has no function {name!r}"
                f"{_did_you_mean(name, names)}; plugin {spec.plugin!r} declares: "
                f"{', '.join(names) or 'nothing'}"
            )

        module.__getattr__ = __getattr__  # type: ignore[method-assign]

    def _proxy(self, module: str, function: HostFunction) -> Any:
        transport = self._transport
        name = function.name
        qualified = f"{PACKAGE}.{module}.{name}"

        def call(*args: Any, **kwargs: Any) -> Any:
            # Checked here only for the message at the call site: the channel
            # would refuse the request anyway.
            try:
                check_value(list(args), "the arguments")
                check_value(kwargs, "the keyword arguments")
            except ProtocolError as exc:
                raise TypeError(f"{qualified}: {exc}") from None
            return transport.request(
                ContextOp.GUEST_CALL,
                {"module": module, "function": name, "args": list(args), "kwargs": kwargs},
            )

        call.__name__ = name
        call.__qualname__ = name
        call.__module__ = f"{PACKAGE}.{module}"
        call.__doc__ = (
            f"{function.description}\n\n" if function.description else ""
        ) + f"Runs in the plugin's sandbox; arguments are {ALLOWED_VALUES}."
        return call


def install(finder: HostModules) -> None:
    """Put ``finder`` first on ``sys.meta_path`` and forget any ``host`` imported before."""
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, finder)
