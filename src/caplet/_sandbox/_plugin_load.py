"""A plugin loaded inside its worker: the entry imported, its functions registered.

The entry file is imported from the snapshot as ``caplet_plugin.<stem>``
(the snapshot is the package's only search location, and is also on
``sys.path`` so ``import helpers`` of a sibling file works), with the zip
importer removed and every other path hook asked only about the snapshot's and
the runtime's directories (a module the plugin wrote is never imported);
``create_functions(config)`` is called and only the modules and functions
INIT declares are registered, a function that takes ``ctx`` first getting
the context bound once. Also how a plugin's
exceptions are described (bounded, never raising) and how an awaitable it
returns is run (one event loop per worker), for the load and for every call.

Runs in every worker (imported by :mod:`caplet._sandbox._worker`): the
standard library and the sandbox's context only.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from caplet._sandbox._code_origin import guard_code_origin
from caplet._sandbox._context import PluginContext
from caplet._sandbox._protocol import Init, crossing

__all__ = [
    "PLUGIN_PACKAGE",
    "wants_context",
]

#: The package the snapshot is imported as.
PLUGIN_PACKAGE = "caplet_plugin"


# Messages coming from plugin code are cut to this many characters: enough to
# read, small enough that a hostile exception message costs nothing.
_MAX_MESSAGE_CHARS = 4096
_MAX_TYPE_CHARS = 200

_Function = Callable[..., object]


@dataclass(frozen=True, slots=True)
class _Loaded:
    """A loaded plugin: the dispatch table and what was rejected."""

    table: Mapping[str, Mapping[str, _Function]]
    rejected: tuple[str, ...]


class _LoadError(Exception):
    """The plugin cannot be loaded; the message is sent as FATAL."""


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"


def _describe_exception(exc: BaseException) -> tuple[str, str]:
    """(type name, message) of a plugin exception, both bounded, never raising."""
    exc_type = _truncate(crossing(type(exc).__name__), _MAX_TYPE_CHARS)
    try:
        message = crossing(str(exc))  # a lone surrogate could not be encoded (attack14)
    except Exception:  # a hostile __str__ must not take the worker down
        message = f"<unprintable {exc_type}>"
    return exc_type, _truncate(message, _MAX_MESSAGE_CHARS)


def _print_traceback() -> None:
    """Put the full traceback in the worker's log; only the summary crosses."""
    import contextlib
    import traceback  # only on this error path: keeps worker start-up lean

    with contextlib.suppress(Exception):  # stderr closed or replaced by the plugin
        traceback.print_exc()


def _entry_parts(entry: str) -> tuple[str, ...]:
    """``"sub/plugin.py"`` -> ``("sub", "plugin")``; _LoadError if it escapes.

    Plain string work rather than pathlib: this runs in every worker, and
    pathlib's import is not free.
    """
    parts = entry.split("/")
    if (
        not entry.endswith(".py")
        or entry.startswith("/")
        or "\\" in entry
        or "\0" in entry
        or any(part in ("", ".", "..") for part in parts)
        or parts[-1] == ".py"
    ):
        raise _LoadError(
            f"entry {entry!r} must be a relative path to a .py file inside the plugin "
            "(for example 'plugin.py')"
        )
    *packages, leaf = parts
    for part in packages:
        if not part.isidentifier():
            raise _LoadError(f"entry {entry!r}: directory {part!r} is not a Python package name")
    return (*packages, leaf[: -len(".py")])


def _no_zip_imports() -> None:
    """Import only from directories: drop ``zipimport`` from the path hooks.

    The static scan reads a plugin's ``.py`` files; a zip archive in the
    plugin (any name: zipimport finds a zip by its trailing directory) put on
    ``sys.path`` would import code it never read: `import ctypes` inside
    ``lib.zip`` passed the danger gate that way. Code that puts the hook back
    names ``zipimport``, ``sys.path_hooks`` or ``sys.meta_path``, which the
    scanner refuses (CPL-DYN-002).

    The importer cache loses only its zip importers: a path the hook
    served then finds no importer. A directory's finder stays cached;
    clearing them all (as first done) made the plugin's imports list every
    directory on ``sys.path`` again and free the zygote's cached listings,
    copy-on-write faults included: ~0.3 ms of every worker start.
    """
    import zipimport

    sys.path_hooks[:] = [hook for hook in sys.path_hooks if hook is not zipimport.zipimporter]
    cache = sys.path_importer_cache
    for path, finder in list(cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del cache[path]


def _read_directories_only(snapshot: str) -> None:
    """Import only from the snapshot and the directories the runtime imports from.

    The static scan read the snapshot's ``.py`` files, and the runtime is read-only;
    everything else a worker can write (its private ``/tmp``, its working directory, a
    writable grant). A plugin copied its ``helpers.txt`` (``import ctypes``: a text file
    the scanner does not read as code) to ``/tmp/x/evil.py``, put ``/tmp/x`` on
    ``sys.path`` and imported it: three warnings, a MEDIUM static audit, and ctypes ran
    (steer22). So every path hook left (zip's is gone) is asked only for a directory
    inside the snapshot or inside a ``sys.path`` entry of the runtime as the worker
    starts (absolute ones: an empty entry would be the working directory); any other
    directory has no finder, and its modules are not found. Code that puts another hook
    in names ``sys.path_hooks`` or ``sys.meta_path`` (CPL-DYN-002), as for the zip hook.
    """
    given = [entry for entry in (snapshot, *sys.path) if isinstance(entry, str)]
    # os.path rather than pathlib, as in _entry_parts: strings in, strings out.
    given = [entry for entry in given if os.path.isabs(entry)]  # noqa: PTH117
    # Each root as given and resolved: most directories asked about are spelled under an
    # entry as given, and a string test spares the resolution of every cached one at
    # every worker start.
    roots = tuple(
        dict.fromkeys(
            root.rstrip(os.sep) + os.sep
            for entry in given
            for root in (os.path.normpath(entry), os.path.realpath(entry))
        )
    )

    def guarded(hook: Callable[[str], Any]) -> Callable[[str], Any]:
        @functools.wraps(hook)
        def guard(directory: str) -> Any:
            # The finder is given the folder resolved now unless spelled under a root: it
            # lists its path at every import, and a link the plugin planted to the
            # snapshot, the hook's answer made, was then swapped for a folder of its own
            # (attack23).
            return hook(_within(directory, roots))

        return guard

    # The runtime alone: where code may make code objects (types.coroutine does).
    runtime = tuple(
        dict.fromkeys(
            root.rstrip(os.sep) + os.sep
            for entry in given[1:]
            for root in (os.path.normpath(entry), os.path.realpath(entry))
        )
    )
    # The guard below is Python attributes a plugin can set again; the audit hook is
    # not (attack24), and checks what importlib compiles against the file it names.
    guard_code_origin(roots, runtime)
    sys.path_hooks[:] = [guarded(hook) for hook in sys.path_hooks]
    cache = sys.path_importer_cache
    for directory in list(cache):
        try:
            _within(directory, roots)
        except ImportError:
            del cache[directory]
    # No hook is asked when a loader is reused: the class of a sibling module's loader
    # made for /tmp/x/evil.py, or that loader's path changed, read the file the plugin
    # wrote (attack23; neither names an import API the scanner reads). So the file
    # loaders read only files inside the roots, resolved (a link swapped after the read
    # serves no later read: each read resolves again).
    # FileLoader is private to importlib: found on the public class (setattr: a type).
    for cls in importlib.machinery.SourceFileLoader.__mro__:
        if "get_data" in vars(cls):
            setattr(cls, "get_data", _reads_inside(vars(cls)["get_data"], roots))  # noqa: B010
            break


def _reads_inside(
    get_data: Callable[[Any, str], bytes], roots: tuple[str, ...]
) -> Callable[[Any, str], bytes]:
    """``FileLoader.get_data`` that reads only files resolved inside ``roots``."""

    @functools.wraps(get_data)
    def guard(loader: Any, path: str) -> bytes:
        return get_data(loader, _within(path, roots))

    return guard


def _within(path: str, roots: tuple[str, ...]) -> str:
    """``path`` as a hook or a loader is to read it, inside ``roots``: as given when it is
    spelled under a root (the roots are read-only, the snapshot and the runtime, so no
    link in them was put there by the plugin; and a snapshot outside a jail may be
    reached only as spelled, its resolved folders need not be searchable by the worker),
    else resolved, links and all. :class:`ImportError` when it lies outside them."""
    spelled = os.path.normpath(path) + os.sep
    if os.path.isabs(path) and spelled.startswith(roots):  # noqa: PTH117
        return path
    resolved = os.path.realpath(path or ".")
    if not (resolved + os.sep).startswith(roots):
        raise ImportError(f"{path} is neither the plugin's snapshot nor the runtime")
    return resolved


def _import_entry(snapshot: str, entry: str) -> object:
    """Import the entry file as ``caplet_plugin.<stem>`` from the snapshot."""
    parts = _entry_parts(entry)
    # os.path rather than pathlib: see _entry_parts.
    path = os.path.join(snapshot, entry)  # noqa: PTH118
    if not os.path.isfile(path):  # noqa: PTH113
        raise _LoadError(f"entry file {entry} not found in the plugin snapshot {snapshot}")
    _no_zip_imports()
    _read_directories_only(snapshot)
    sys.path.insert(0, snapshot)
    package_spec = importlib.machinery.ModuleSpec(PLUGIN_PACKAGE, None, is_package=True)
    package_spec.submodule_search_locations = [snapshot]
    sys.modules[PLUGIN_PACKAGE] = importlib.util.module_from_spec(package_spec)
    name = PLUGIN_PACKAGE
    for package in parts[:-1]:
        name = f"{name}.{package}"
        importlib.import_module(name)
    name = f"{name}.{parts[-1]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise _LoadError(f"entry file {entry} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _shape(result: object, entry: str) -> dict[str, dict[str, _Function]]:
    """Check ``create_functions``' result is {str: {str: callable}}; copy it."""
    expected = "expected a dict mapping module names to dicts of function name -> callable"
    where = f"create_functions in {entry}"
    if not isinstance(result, Mapping):
        raise _LoadError(f"{where} returned {type(result).__name__}, {expected}")
    shaped: dict[str, dict[str, _Function]] = {}
    for module, functions in result.items():
        if not isinstance(module, str):
            raise _LoadError(
                f"{where} returned a module name of type {type(module).__name__}, {expected}"
            )
        if not isinstance(functions, Mapping):
            raise _LoadError(
                f"{where} returned {type(functions).__name__} for module {module!r}, {expected}"
            )
        table: dict[str, _Function] = {}
        for name, function in functions.items():
            if not isinstance(name, str):
                raise _LoadError(
                    f"{where} returned a function name of type {type(name).__name__} "
                    f"in module {module!r}, {expected}"
                )
            if not callable(function):
                raise _LoadError(
                    f"{where} returned {type(function).__name__} for {module}.{name}, "
                    "which is not callable"
                )
            table[name] = function
        shaped[module] = table
    return shaped


def wants_context(function: object) -> bool:
    """True when ``function``'s first positional parameter is named ``ctx``.

    The rule (docs/architecture.md, "the plugin context"): a plain function
    or lambda whose first positional parameter is ``ctx``, or a bound method
    whose first one after ``self`` is. Read from the code object, without
    ``inspect`` (an import every worker would pay for); anything else (a
    ``functools.partial``, a callable object) gets no ``ctx`` argument and
    uses ``caplet.plugin.context()``.
    """
    try:
        skip = 1 if isinstance(function, types.MethodType) else 0
        code = getattr(function, "__code__", None)
        if not isinstance(code, types.CodeType):
            return False
        return code.co_argcount > skip and code.co_varnames[skip] == "ctx"
    except Exception:  # a hostile __getattr__ on a callable object
        return False


def _register(
    provided: Mapping[str, Mapping[str, _Function]],
    declared: Mapping[str, tuple[str, ...]],
    context: PluginContext | None = None,
) -> _Loaded:
    """Keep only declared modules and functions (design.md section 4, layer 11).

    With a ``context``, functions that take ``ctx`` first get it bound here,
    once, so the call path stays one plain call.
    """
    table: dict[str, dict[str, _Function]] = {}
    rejected: list[str] = []
    for module, functions in provided.items():
        allowed = declared.get(module)
        if allowed is None:
            rejected.append(module)
            continue
        for name, function in functions.items():
            if name in allowed:
                bound = (
                    functools.partial(function, context)
                    if context is not None and wants_context(function)
                    else function
                )
                table.setdefault(module, {})[name] = bound
            else:
                rejected.append(f"{module}.{name}")
    return _Loaded(table, tuple(rejected))


def _load(init: Init, context: PluginContext | None = None) -> _Loaded:
    """Import the plugin and call ``create_functions``; _LoadError on failure."""
    try:
        module = _import_entry(init.snapshot, init.entry)
    except _LoadError:
        raise
    except BaseException as exc:  # SystemExit at import time is a load failure too
        _print_traceback()
        exc_type, message = _describe_exception(exc)
        raise _LoadError(f"{exc_type}: {message} (while importing {init.entry})") from None
    create = getattr(module, "create_functions", None)
    if not callable(create):
        raise _LoadError(
            f"{init.entry} does not define create_functions(config); add it and return "
            "{module: {function: callable}}"
        )
    try:
        made = create(dict(init.config))
        if hasattr(type(made), "__await__"):
            made = _awaited(made)
        provided = _shape(made, init.entry)
    except _LoadError:
        raise
    except BaseException as exc:
        _print_traceback()
        exc_type, message = _describe_exception(exc)
        raise _LoadError(f"{exc_type}: {message} (in create_functions)") from None
    return _register(provided, init.modules, context)


class _Loop:
    """The worker's own event loop, made at the first ``async def`` a plugin returns."""

    runner: Any = None


def _awaited(value: object) -> object:
    """Run an awaitable a plugin function (or ``create_functions``) returned to completion.

    ``async def`` functions and hooks run on one event loop per worker (an
    ``asyncio.Runner``, kept across calls, so a client the plugin made on it
    stays usable), in the thread that serves the call: ``ctx`` works from
    them as from any function of the call, and the call ends when the
    coroutine does. asyncio is imported only then (its import is not free,
    and most plugins never need it); the seccomp allowlist has what its loop
    needs (docs/architecture.md). What the coroutine leaves running is not
    awaited: it runs only while a later call runs the loop again.
    """
    if _Loop.runner is None:
        import asyncio

        _Loop.runner = asyncio.Runner()

    async def wait() -> object:
        return await value  # type: ignore[misc]

    return _Loop.runner.run(wait())
