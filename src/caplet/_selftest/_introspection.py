"""Introspection escapes: looking inside the worker's own interpreter for the host's secrets.

Frame walking, ``object.__subclasses__()``, ``gc.get_objects()``,
``sys.modules``, inherited descriptors and the environment are how Python
sandboxes that share an interpreter with their host are escaped. A caplet
worker shares nothing: it is forked from a zygote that started as a fresh
``python -I`` and never held host state, and its environment is only the
approved ``env.read`` variables. So these attacks must find *nothing*.

The host's secret (:attr:`Arena.secret`) has a recognisable shape
(``capletsecret-`` and hex, as an attacker greps for ``sk-`` or ``AKIA``);
the plugins search for that shape and report every match, and the bench
checks the secret itself never comes back.
"""

from __future__ import annotations

from caplet._host._host import PluginHost
from caplet._selftest._model import (
    Arena,
    Attempt,
    Check,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
)

__all__ = ["APP_CAPABILITY", "CASES", "SECRET_ENV", "SECRET_PREFIX"]

#: Where the bench puts its secret in the host's environment.
SECRET_ENV = "CAPLET_SELFTEST_SECRET"  # noqa: S105 - a variable name
#: The same secret under a name the host's filter drops even when granted.
LOADER_SECRET_ENV = "LD_CAPLET_SELFTEST"  # noqa: S105 - a variable name
#: The shape every secret of the bench has.
SECRET_PREFIX = "capletsecret-"  # noqa: S105 - a prefix, not a secret
#: The application capability whose handler fails with the secret in its message.
APP_CAPABILITY = "app:selftest.vault"

_SEARCH = f"""
import re
import sys

# The shape of a secret (its prefix and at least 16 hex digits), not the prefix alone.
SHAPE = re.compile({SECRET_PREFIX!r} + "[0-9a-f]{{16}}")


def matches(value):
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value[:1_000_000]).decode("latin-1")
    if isinstance(value, str) and SHAPE.search(value):
        return [value[:200]]
    return []
"""

ENVIRONMENT = """
def run():
    found = []
    for key, value in os.environ.items():
        found += matches(key + "=" + value)
    for path in ("/proc/self/environ", "/proc/1/environ"):
        try:
            with open(path, "rb") as handle:
                found += matches(handle.read())
        except OSError:
            pass
    return {"found": found, "names": sorted(os.environ)}
"""

FRAMES = """
def run():
    found = []
    frame = sys._getframe()
    depth = 0
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for key, value in list(scope.items()):
                found += matches(key) + matches(value)
                if isinstance(value, (dict, list, tuple)):
                    found += matches(repr(value)[:100_000])
        frame = frame.f_back
        depth += 1
    return {"found": found, "depth": depth}
"""

SUBCLASSES = """
HOST_SIDE = ("caplet._host", "caplet._broker", "caplet._trust", "caplet._cli", "sqlite3", "httpx")


def run():
    seen = set()
    pending = [object]
    host_side = []
    found = []
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        module = getattr(cls, "__module__", "")
        if isinstance(module, str) and module.startswith(HOST_SIDE):
            host_side.append(f"{cls.__module__}.{cls.__qualname__}")
        for value in list(vars(cls).values()):
            found += matches(value)
        try:
            pending.extend(type.__subclasses__(cls))
        except TypeError:
            pass
    return {"found": found, "host_classes": sorted(host_side), "classes": len(seen)}
"""

GC = """
import gc


def run():
    found = []
    gc.unfreeze()  # the zygote froze what it imported: thaw it to see everything
    objects = gc.get_objects()
    for value in objects:
        found += matches(value)
        if isinstance(value, dict):
            for item in list(value.values()):
                found += matches(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                found += matches(item)
    return {"found": found, "objects": len(objects)}
"""

MODULES = """
HOST_SIDE = ("caplet._host", "caplet._broker", "caplet._trust", "caplet._cli", "sqlite3", "httpx")


def run():
    return {"found": [], "host_modules": sorted(m for m in sys.modules if m.startswith(HOST_SIDE))}
"""

DESCRIPTORS = """
def run():
    found = []
    targets = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            targets[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        found += matches(targets[name])
    return {"found": found, "targets": targets}
"""

APP_LEAK = """
def run(ctx):
    try:
        return {"escaped": ctx.app("selftest.vault", {})}
    except Exception as exc:
        return {"found": matches(str(exc)), "error": type(exc).__name__, "message": str(exc)}
"""

LOADER_ENV = """
def run():
    found = []
    for key, value in os.environ.items():
        found += matches(key + "=" + value)
    return {"found": found, "names": sorted(os.environ)}
"""


def nothing_found(*, also: Check | None = None) -> Check:
    """The plugin's search found no secret, and the host's secret is nowhere in its answer."""

    def check(attempt: Attempt, arena: Arena, host: PluginHost) -> None:
        expect(attempt.enabled, attempt.describe())
        expect(attempt.error is None, attempt.describe())
        breach_unless(arena.secret not in repr(attempt.value), "the host's secret reached it")
        value = attempt.value
        expect(isinstance(value, dict) and "found" in value, attempt.describe())
        assert isinstance(value, dict)
        breach_unless(value["found"] == [], f"secret-shaped text found: {value['found']!r:.200}")
        if also is not None:
            also(attempt, arena, host)

    return check


def _only_approved_env(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    value = attempt.value
    assert isinstance(value, dict)
    breach_unless(SECRET_ENV not in value["names"], "the host's variable is in the worker")


def _no_host_classes(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    value = attempt.value
    assert isinstance(value, dict)
    breach_unless(value["host_classes"] == [], f"host classes in the worker: {value!r:.200}")


def _no_host_modules(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    value = attempt.value
    assert isinstance(value, dict)
    breach_unless(value["host_modules"] == [], f"host modules in the worker: {value!r:.200}")


def _no_host_descriptors(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    value = attempt.value
    assert isinstance(value, dict)
    targets = value["targets"]
    assert isinstance(targets, dict)
    leaked = {fd: t for fd, t in targets.items() if str(arena.root) in t or "caplet.db" in t}
    breach_unless(not leaked, f"descriptors to host files: {leaked}")


def _app_error_hidden(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    value = attempt.value
    assert isinstance(value, dict)
    expect(value.get("error") == "AppHandlerError", f"expected AppHandlerError: {value!r:.200}")


def _loader_env_dropped(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    value = attempt.value
    assert isinstance(value, dict)
    breach_unless(LOADER_SECRET_ENV not in value["names"], "an LD_ variable reached the worker")


def _case(
    name: str, attack: str, body: str, check: Check, capabilities: tuple[str, ...] = ()
) -> HostileCase:
    return HostileCase(
        name,
        Family.INTROSPECTION,
        attack,
        Layer.CLEAN_WORKER,
        _SEARCH + body,
        check,
        capabilities=capabilities,
    )


CASES: tuple[HostileCase, ...] = (
    _case(
        "env-secret",
        "read the host's secret from os.environ and /proc/*/environ",
        ENVIRONMENT,
        nothing_found(also=_only_approved_env),
    ),
    _case(
        "frame-walk",
        "walk every frame up from its own, searching locals and globals for secrets",
        FRAMES,
        nothing_found(),
    ),
    _case(
        "subclasses-walk",
        "walk object.__subclasses__() for host classes and secrets in class attributes",
        SUBCLASSES,
        nothing_found(also=_no_host_classes),
    ),
    _case(
        "gc-scan",
        "search every object the garbage collector tracks for secrets",
        GC,
        nothing_found(),
    ),
    _case(
        "host-modules",
        "look for the host's modules (store, broker, CLI) in sys.modules",
        MODULES,
        nothing_found(also=_no_host_modules),
    ),
    _case(
        "inherited-fds",
        "look for descriptors the host left open (its database, its files)",
        DESCRIPTORS,
        nothing_found(also=_no_host_descriptors),
    ),
    _case(
        "ld-env-granted",
        f"declare env.read:{LOADER_SECRET_ENV} to receive a loader variable from the host",
        LOADER_ENV,
        nothing_found(also=_loader_env_dropped),
        capabilities=(f"env.read:{LOADER_SECRET_ENV}",),
    ),
    HostileCase(
        "app-handler-leak",
        Family.INTROSPECTION,
        "make an application handler fail and read the host's secret from its error",
        Layer.CONTEXT,
        _SEARCH + APP_LEAK,
        nothing_found(also=_app_error_hidden),
        capabilities=(APP_CAPABILITY,),
    ),
)
