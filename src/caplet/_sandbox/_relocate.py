"""The runtime at neutral paths: no host path of caplet's own runtime inside a jail.

Issue 13, point 7. A jail shows its worker the Python runtime it runs on: the
interpreter's prefix, the site-packages directory and caplet's own package
directory. Bound from their host paths they name the host in every view a
plugin has: a bind mount's line in ``/proc/self/mountinfo`` carries the path
*inside its source file system* (so binding ``/root/.pyenv/versions/3.11.7``
at another mount point still prints it), ``/proc/self/maps`` and
``/proc/self/exe`` print the path the zygote opened the interpreter and its
extension modules by (they were mapped before the jail existed), and
``sys.path``, ``sys.executable`` and every module's ``__file__`` are strings
computed from those paths.

So the zygote itself is *executed* from neutral paths:

* The host starts it through a stage (:func:`stage`, run by the host's own
  interpreter with ``-I -S``) that makes a private mount namespace (with a
  user namespace mapping only the caller's own ids when the host is not
  root; a root host keeps the host's user namespace, which the jail's id
  model in :mod:`._identity` and the cgroup code need).
* In it the stage builds a new root: a tmpfs holding every top-level entry
  of the host's root, recursively bound at its own name (so every host path
  the zygote opens — grants, snapshots, ``/sys/fs/cgroup``, ``/proc``, the
  worker logs' directory — means what it means on the host, with no
  translation), plus :data:`RUNTIME_ROOT` with one overlayfs mount per
  runtime directory (:func:`runtime_layout`). Each overlay's lower layers
  are given as ``/proc/self/fd/N`` of descriptors (the runtime directory
  and an empty directory: a read-only overlay needs two layers), so
  mountinfo shows ``lowerdir=/proc/self/fd/5:/proc/self/fd/4`` and the
  overlay's own root, never the source path. The host's old root stays
  attached at :data:`HOST_ROOT`: a grant of ``/`` (pinned at enable to the
  host root's inode, not the mirror's) and a grant under a top-level
  directory made after the zygote started are opened there
  (:func:`host_path`).
* ``pivot_root(2)`` into that root, then ``execve(2)`` of the interpreter at
  its neutral path, ``-I -S`` with an explicit ``sys.path`` of neutral
  directories. From Linux 6.8 the kernel reports a file mapped through an
  overlay by its overlay path (``file_user_path``), so maps, exe,
  ``sys.prefix`` (found from the executable's location by its landmark
  ``lib/python3.X/os.py``) and every ``__file__`` are neutral; the jails then
  bind the overlays at the same paths (:func:`~._jail.runtime_grants`).

A Debian-style interpreter under ``/usr`` is not moved: its prefix is the
same on every host and the jail already shows ``/usr/lib`` (see
:data:`SYSTEM`). A virtual environment's ``bin/python`` is a symbolic link to
its base interpreter, and ``pyvenv.cfg`` names the base's host path, so the
venv itself is never mounted: only its site-packages directory is.
``-S`` skips ``.pth`` files; caplet's own directory (an editable install's
``src``) is put on ``sys.path`` explicitly, as the old bootstrap did.

When the stage cannot relocate (no user namespaces for an unprivileged host,
no overlayfs, an interpreter outside its prefix, a host with its own
``/caplet``) it starts the zygote the old way, from host paths, and tells it
why through :data:`PROBLEM_ENV`; ``caplet doctor`` shows the reason and the
selftest case ``mountinfo-host-paths`` reports the leak.

This module runs in the stage, a fresh interpreter without ``site``: stdlib
and :mod:`caplet._syscall` only.
"""

from __future__ import annotations

import json
import os
import site
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from caplet._syscall import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOSUID,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    MS_SLAVE,
    mount,
    pivot_root,
    umount2,
    unshare,
)

__all__ = [
    "HOST_ROOT",
    "HOST_ROOT_ENV",
    "PROBLEM_ENV",
    "RELOCATION",
    "RUNTIME_ROOT",
    "SYSTEM",
    "Layout",
    "host_path",
    "relocation_problem",
    "runtime_layout",
    "stage",
    "zygote_command",
    "zygote_started",
]

#: Where the runtime appears in the zygote and in every jail.
RUNTIME_ROOT = "/caplet"
#: Where a relocated zygote keeps the host's root.
HOST_ROOT = f"{RUNTIME_ROOT}/.host"
#: Set by the stage for the zygote it relocated (to :data:`HOST_ROOT`).
HOST_ROOT_ENV = "CAPLET_HOST_ROOT"
#: The empty directory every overlay has as its second lower layer.
_EMPTY = f"{RUNTIME_ROOT}/.empty"
#: The name in ``CAPLET_TEST_DISABLE_LAYERS`` that starts the zygote from host
#: paths (test-only: the fallback of a machine that cannot relocate).
RELOCATION = "relocation"
#: Set by the stage for a zygote it could not relocate: why (for ``caplet doctor``).
PROBLEM_ENV = "CAPLET_RELOCATION_PROBLEM"
#: Directories whose contents are the same on every host of a distribution:
#: a runtime there is not moved (a Debian interpreter's /usr prefix).
SYSTEM = ("/usr", "/lib", "/lib64", "/bin", "/sbin")
#: The host directory the stage's new root tmpfs is mounted over (in its own
#: mount namespace only; the host's /tmp is bound back inside it).
_STAGING = "/tmp"  # noqa: S108 - a mount point only, never a file
#: The stage's interpreter finds caplet here (the host's own copy).
_CAPLET_ROOT = str(Path(__file__).resolve().parents[2])

_STAGE = f"""\
import sys
sys.path.insert(0, {_CAPLET_ROOT!r})
from caplet._sandbox._relocate import stage
stage(sys.argv[1])
"""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each runtime directory appears, and how the zygote is executed."""

    #: (host directory, neutral directory), each mounted as its own overlay.
    layers: tuple[tuple[str, str], ...] = ()
    #: The interpreter the zygote is executed as (neutral, or a system path).
    executable: str = ""
    #: ``LD_LIBRARY_PATH`` for a shared libpython whose RUNPATH names the host prefix.
    library_path: str = ""
    #: ``sys.path`` entries before the standard library (caplet's directory) and after it.
    first: tuple[str, ...] = ()
    last: tuple[str, ...] = ()
    #: Why the runtime cannot be relocated; "" when it can.
    problem: str = ""


def _system(path: str) -> bool:
    return any(path == top or path.startswith(f"{top}/") for top in SYSTEM)


def _inside(path: str, outer: str) -> bool:
    return path == outer or path.startswith(outer.rstrip("/") + "/")


def _package_parent(name: str) -> str:
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) if module is not None else None
    if not origin:
        import importlib.util

        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
    return str(Path(origin).resolve().parent.parent) if origin else ""


def runtime_layout() -> Layout:
    """The layout of this (the host's) interpreter's runtime, computed in the host."""
    prefix = os.path.realpath(sys.base_prefix)
    executable = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    layers: list[tuple[str, str]] = []
    library_path = ""
    if not _system(prefix):
        if not _inside(executable, prefix):
            return Layout(problem=f"the interpreter {executable} lies outside its prefix {prefix}")
        if not _inside(os.path.realpath(sys.base_exec_prefix), prefix):
            return Layout(problem=f"the interpreter's exec prefix lies outside {prefix}")
        python = f"{RUNTIME_ROOT}/python"
        layers.append((prefix, python))
        executable = python + executable[len(prefix) :]
        if any(Path(prefix, "lib").glob("libpython*.so*")):
            # A shared build's RUNPATH names the host prefix; the loader
            # searches LD_LIBRARY_PATH first (ld.so(8)).
            library_path = f"{python}/lib"
    names: set[str] = set()

    def neutral(path: str, name: str) -> str:
        real = os.path.realpath(path)
        if _system(real):
            return real
        for host, inside in layers:
            if _inside(real, host):
                return inside + real[len(host) :]
        target, number = f"{RUNTIME_ROOT}/{name}", 2
        while target in names:
            target, number = f"{RUNTIME_ROOT}/{name}-{number}", number + 1
        names.add(target)
        layers.append((real, target))
        return target

    sites = [neutral(d, "site-packages") for d in site.getsitepackages() if Path(d).is_dir()]
    caplet = _package_parent("caplet")
    msgpack = _package_parent("msgpack")
    first = (neutral(caplet, "src"),) if caplet else ()
    last = [*sites, neutral(msgpack, "msgpack")] if msgpack else sites
    last = [entry for index, entry in enumerate(last) if entry not in (*first, *last[:index])]
    return Layout(tuple(layers), executable, library_path, first, tuple(last))


def zygote_command(
    module: str,
    fd: int,
    extra: tuple[str, ...],
    fallback: list[str],
    env: dict[str, str],
    *,
    disabled: str = "",
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that start ``module.main([fd, *extra])`` relocated.

    ``fallback`` is the argv that starts it from host paths, which the stage
    executes when it cannot relocate (:data:`PROBLEM_ENV` says why);
    ``disabled`` (test-only, see :data:`RELOCATION`) is why not to try.
    """
    layout = Layout(problem=disabled) if disabled else runtime_layout()
    if layout.problem:
        return fallback, {**env, PROBLEM_ENV: layout.problem}
    boot = (
        "import sys\n"
        f"sys.path[:0] = {list(layout.first)!r}\n"
        f"sys.path += {list(layout.last)!r}\n"
        # What site would have added to builtins (-S skips site, and with it
        # the base interpreter's own site-packages and .pth files).
        "import site\n"
        "site.setquit()\n"
        "site.sethelper()\n"
        "from importlib import import_module\n"
        "module = import_module(sys.argv.pop(1))\n"
        "raise SystemExit(module.main(sys.argv[1:]))\n"
    )
    relocated = [layout.executable, "-I", "-S", "-c", boot, module, str(fd), *extra]
    plan = {
        "layers": [list(layer) for layer in layout.layers],
        "library_path": layout.library_path,
        "relocated": relocated,
        "fallback": fallback,
        "env": env,
    }
    return [sys.executable, "-I", "-S", "-c", _STAGE, json.dumps(plan)], env


def stage(argument: str) -> None:
    """In the stage process: relocate, then execute the zygote (never returns)."""
    plan = json.loads(argument)
    env: dict[str, str] = plan["env"]
    try:
        _enter([(host, inside) for host, inside in plan["layers"]])
        relocated_env = {**env, HOST_ROOT_ENV: HOST_ROOT}
        if plan["library_path"]:
            relocated_env["LD_LIBRARY_PATH"] = plan["library_path"]
        os.execve(plan["relocated"][0], plan["relocated"], relocated_env)  # noqa: S606
    except OSError as exc:
        detail = exc.strerror or str(exc)
        if exc.filename:
            detail += f" ({exc.filename})"
        problem = detail
        if exc.errno:
            problem += (
                "; relocating the runtime needs a mount namespace and overlayfs (for a "
                "host that is not root: unprivileged user namespaces, Linux >= 5.11)"
            )
    # The host's paths still mean the same here (the mirror binds them all).
    fallback: list[str] = plan["fallback"]
    os.execve(fallback[0], fallback, {**env, PROBLEM_ENV: problem})  # noqa: S606


def _enter(layers: list[tuple[str, str]]) -> None:
    """Make the mount namespace with the runtime at its neutral paths, and pivot into it."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        unshare(CLONE_NEWNS)
    else:
        unshare(CLONE_NEWUSER | CLONE_NEWNS)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # mount_namespaces(7): slave, so the host's later mounts and unmounts still
    # reach this copy and nothing here propagates back; pivot_root(2) refuses
    # shared mounts.
    mount(None, "/", None, MS_REC | MS_SLAVE)
    staging = os.path.realpath(_STAGING)
    names = sorted(entry.name for entry in Path("/").iterdir())
    if RUNTIME_ROOT.lstrip("/") in names:
        raise OSError(0, f"the host has a {RUNTIME_ROOT} of its own", RUNTIME_ROOT)
    # The top-level entry the staging tmpfs lies in is bound from a
    # descriptor taken before the tmpfs covers it, and first of all, while
    # the copy of the staging mount that a recursive bind of it takes along
    # is still empty; that copy is then unmounted.
    top = staging.strip("/").split("/")[0]
    opened: list[int] = []
    try:
        # Every source is opened before the tmpfs covers the staging point
        # (a runtime under /tmp: a virtual environment in a CI checkout).
        covered = _opened(opened, f"/{top}", os.O_PATH)
        directory = os.O_RDONLY | os.O_DIRECTORY
        lowers = [(_opened(opened, host, directory), inside) for host, inside in layers]
        mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        try:
            _mirror(staging, top, covered, [name for name in names if name != top])
            _runtime(staging, lowers)
            pivot_root(staging, staging + HOST_ROOT)
        except BaseException:
            umount2(staging, MNT_DETACH)
            raise
    finally:
        for fd in opened:
            os.close(fd)
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _opened(opened: list[int], path: str, flags: int) -> int:
    fd = os.open(path, flags | os.O_CLOEXEC)
    opened.append(fd)
    return fd


def _mirror(staging: str, top: str, covered: int, names: list[str]) -> None:
    """Every top-level entry of the host's root, at its own name in ``staging``."""
    Path(staging, top).mkdir(mode=0o755)
    mount(f"/proc/self/fd/{covered}", f"{staging}/{top}", None, MS_BIND | MS_REC)
    umount2(staging + staging, MNT_DETACH)
    for name in names:
        source, target = f"/{name}", f"{staging}/{name}"
        info = os.lstat(source)
        if stat.S_ISLNK(info.st_mode):
            Path(target).symlink_to(Path(source).readlink())
        elif stat.S_ISDIR(info.st_mode):
            Path(target).mkdir(mode=0o755)
            mount(source, target, None, MS_BIND | MS_REC)
        elif stat.S_ISREG(info.st_mode):
            Path(target).touch(mode=0o644)
            mount(source, target, None, MS_BIND | MS_REC)


def _runtime(staging: str, lowers: list[tuple[int, str]]) -> None:
    """One read-only overlay per runtime directory, its layers named by descriptors only."""
    for path in (RUNTIME_ROOT, _EMPTY):
        Path(staging + path).mkdir(mode=0o755)
    Path(staging + HOST_ROOT).mkdir(mode=0o700)
    empty = os.open(staging + _EMPTY, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for lower, inside in lowers:
            Path(staging + inside).mkdir(mode=0o755)
            # overlayfs(5): without an upper directory at least two lower
            # layers; the source on top, an empty directory under it.
            mount(
                "overlay",
                staging + inside,
                "overlay",
                MS_RDONLY | MS_NOSUID | MS_NODEV,
                f"lowerdir=/proc/self/fd/{lower}:/proc/self/fd/{empty}",
            )
    finally:
        os.close(empty)


def _write(path: str, text: str) -> None:
    # One write(2): the id map files reject a map split over several writes.
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


_PROBLEM = "the zygote was not started through the relocating stage"
_HOST_ROOT = ""


def zygote_started() -> None:
    """In the zygote, before it clears its environment: what the stage left for it."""
    global _PROBLEM, _HOST_ROOT
    if os.environ.get(HOST_ROOT_ENV) == HOST_ROOT:
        _HOST_ROOT, _PROBLEM = HOST_ROOT, ""
    else:
        _PROBLEM = os.environ.get(PROBLEM_ENV) or _PROBLEM


def relocation_problem() -> str:
    """In the zygote: "" when it runs relocated, else why not."""
    return _PROBLEM


def host_path(path: str) -> str:
    """Where this process reaches the host path ``path`` (absolute, normalised).

    In a relocated zygote (and a jail's pid 1 before it pivots) the root is
    the stage's mirror, which holds the host's top-level entries as they
    were when the zygote started: ``/`` itself, and a path under a top-level
    entry made later, are reached through the host's root at
    :data:`HOST_ROOT`. Anywhere else: ``path``.
    """
    if not _HOST_ROOT:
        return path
    top = path.split("/")[1] if path != "/" else ""
    if top and os.path.lexists(f"/{top}"):
        return path
    return _HOST_ROOT + path.rstrip("/")
