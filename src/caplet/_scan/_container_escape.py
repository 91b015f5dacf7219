"""A container made to escape to its host, through the Docker daemon (CPL-THR-028).

Whoever can talk to ``/var/run/docker.sock`` is root on the host: a container created
privileged, with the host's ``/`` mounted, or in the host's process namespace reaches
everything outside it (``chroot /h sh``, ``nsenter -t 1``). blind15's
b15-ot-docker-sock-escape posts ``{"HostConfig": {"Binds": ["/:/h"], "Privileged":
true}}`` to ``/containers/create`` over the socket by hand; the Docker SDK spells the
same ``client.containers.run(..., privileged=True, volumes={"/": {...}})``. Clean on
main (recall16).

A container specification is a dict literal keyed as the Engine API spells a host
configuration (``Privileged``, ``Binds``, ``PidMode``, ``CapAdd``, ``Mounts``) or a
call's keywords as the SDK spells them (``privileged``, ``volumes``, ``binds``,
``mounts``, ``pid_mode``, ``cap_add``). It escapes when it holds two of the ways out,
written as literals: privileged, the host's root mounted writable, the host's process
namespace, ``SYS_ADMIN`` (or every capability) added. One alone is what
Docker-in-Docker, a node exporter (``/`` mounted read-only beside ``pid: host``) or a
debugging tool asks for; a read-only mount of ``/`` is no way out. Only in a file that
talks to the daemon: the socket's path written in it, or the SDK imported
(:data:`~caplet._scan._triggers.DOCKER_API`, a side of the prefilter's pair).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from caplet._scan._flow import Flow
from caplet._scan._triggers import DOCKER_API

__all__ = ["command_escape", "container_escapes"]

_API_TEXT = re.compile(DOCKER_API)
#: The ways out, by the key (API) or keyword (SDK) that asks for each.
_PRIVILEGED = frozenset({"Privileged", "privileged"})
_PID = frozenset({"PidMode", "pid_mode"})
_CAPABILITIES = frozenset({"CapAdd", "cap_add"})
_MOUNTS = frozenset({"Binds", "binds", "volumes", "Mounts", "mounts"})
#: Capabilities that are the host's root: mount, namespaces, every one.
_ROOT_CAPABILITIES = frozenset({"SYS_ADMIN", "CAP_SYS_ADMIN", "ALL"})
#: ``docker run``'s options that take a value as the next word.
_VALUED = frozenset(
    [
        "-v",
        "--volume",
        "--mount",
        "--pid",
        "--cap-add",
        "--cap-drop",
        "-e",
        "--env",
        "--env-file",
        "-p",
        "--publish",
        "--name",
        "-w",
        "--workdir",
        "--network",
        "--net",
        "-u",
        "--user",
        "--entrypoint",
        "-l",
        "--label",
        "-h",
        "--hostname",
        "--device",
        "--security-opt",
        "--ipc",
        "--userns",
        "--uts",
        "--cgroupns",
        "--platform",
        "--add-host",
        "--dns",
        "-m",
        "--memory",
        "--cpus",
        "--restart",
        "--log-driver",
        "--ulimit",
        "--tmpfs",
        "--shm-size",
        "--gpus",
        "--runtime",
        "--volumes-from",
    ]
)
#: The container programs whose ``run``/``create`` take Docker's flags.
_CONTAINER_PROGRAMS = frozenset({"docker", "podman", "nerdctl"})


def container_escapes(flow: Flow, text: str) -> list[tuple[ast.AST, str]]:
    """Each container specification of the file that escapes to the host, with the ways
    out it asks for (``privileged, the host's / mounted``)."""
    # every match of the pattern holds "docker": a substring test first (its `^` alternative
    # made the search try every line start of every parsed file: 1.4 ms a file, speed33)
    if "docker" not in text or _API_TEXT.search(text) is None:
        return []
    found: list[tuple[ast.AST, str]] = []
    for node in flow.of_kind(ast.Dict):
        assert isinstance(node, ast.Dict)
        pairs = [
            (k.value, v)
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        ]
        ways = _ways_out(flow, pairs)
        if len(ways) >= 2:
            found.append((node, ", ".join(ways)))
    for call in flow.calls():
        pairs = [(k.arg, k.value) for k in call.keywords if k.arg is not None]
        ways = _ways_out(flow, pairs)
        if len(ways) >= 2:
            found.append((call, ", ".join(ways)))
    return found


def _ways_out(flow: Flow, pairs: Iterable[tuple[str, ast.expr]]) -> list[str]:
    """The ways out a specification's ``(key, value)`` pairs ask for, in a fixed order."""
    ways: set[str] = set()
    for key, value in pairs:
        if key in _PRIVILEGED and isinstance(value, ast.Constant) and value.value is True:
            ways.add("privileged")
        elif key in _PID and flow.evaluate(value) == "host":
            ways.add("the host's processes")
        elif key in _CAPABILITIES and _ROOT_CAPABILITIES & set(_strings(flow, value)):
            ways.add("SYS_ADMIN")
        elif key in _MOUNTS and _mounts_root(flow, value):
            ways.add("the host's / mounted")
    order = ["privileged", "the host's / mounted", "the host's processes", "SYS_ADMIN"]
    return [w for w in order if w in ways]


def _strings(flow: Flow, value: ast.expr) -> list[str]:
    """The strings of a literal list, tuple or set (or one string)."""
    elements = value.elts if isinstance(value, ast.List | ast.Tuple | ast.Set) else [value]
    texts = (flow.evaluate(e) for e in elements[:64])
    return [t for t in texts if isinstance(t, str)]


def _mounts_root(flow: Flow, value: ast.expr) -> bool:
    """A mount list or mapping that mounts the host's ``/`` writable: ``"/:/h"``,
    ``{"/": {"bind": "/h"}}``, ``{"Source": "/", "Type": "bind"}``, ``Mount("/h", "/")``."""
    if isinstance(value, ast.Dict):
        for key, inner in zip(value.keys, value.values, strict=True):
            if key is not None and flow.evaluate(key) == "/" and not _read_only(flow, inner):
                return True
        return _is_root_mount(flow, value)
    elements = value.elts if isinstance(value, ast.List | ast.Tuple | ast.Set) else []
    for element in elements[:64]:
        text = flow.evaluate(element)
        if isinstance(text, str):
            source, _, rest = text.partition(":")
            modes = rest.split(":")[1].split(",") if rest.count(":") else []
            if source and source.rstrip("/") == "" and "ro" not in modes:
                return True
        elif isinstance(element, ast.Dict | ast.Call) and _is_root_mount(flow, element):
            return True
    return False


def _is_root_mount(flow: Flow, mount: ast.Dict | ast.Call) -> bool:
    """One mount (the API's dict, the SDK's ``Mount(target, source, ...)``) of the host's
    ``/``, not read-only."""
    if isinstance(mount, ast.Dict):
        fields = {
            k.value: v
            for k, v in zip(mount.keys, mount.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
        source, read_only = fields.get("Source"), fields.get("ReadOnly")
    else:
        fields = {k.arg: k.value for k in mount.keywords if k.arg is not None}
        source = mount.args[1] if len(mount.args) > 1 else fields.get("source")
        read_only = fields.get("read_only")
    return (
        source is not None
        and flow.evaluate(source) == "/"
        and not (isinstance(read_only, ast.Constant) and read_only.value is True)
    )


def _read_only(flow: Flow, volume: ast.expr) -> bool:
    """The SDK's ``{"bind": "/h", "mode": "ro"}`` (or ``"ro"`` alone)."""
    if isinstance(volume, ast.Dict):
        for key, inner in zip(volume.keys, volume.values, strict=True):
            if key is not None and flow.evaluate(key) == "mode":
                return str(flow.evaluate(inner) or "").split(",")[0] == "ro"
    return flow.evaluate(volume) == "ro"


def command_escape(words: list[str]) -> str | None:
    """The ways out a container started by a command line asks for when it has two
    (``docker run --privileged -v /:/h alpine``, a list or a string, in a shell's script
    too), else ``None``: the same ways as an API's specification (recall17)."""
    flat = [piece for word in words[:256] for piece in word.split()]
    names = [w.rsplit("/", 1)[-1].lower().removesuffix(".exe") for w in flat]
    at = next(
        (
            i
            for i, name in enumerate(names[:-1])
            if name in _CONTAINER_PROGRAMS and flat[i + 1] in {"run", "create"}
        ),
        None,
    )
    if at is None:
        return None
    ways: set[str] = set()
    flags = flat[at + 2 :]
    skip = False
    for i, flag in enumerate(flags):
        option, equals, inline = flag.partition("=")
        value = inline if equals else (flags[i + 1] if i + 1 < len(flags) else "")
        if skip:
            skip = False
            continue
        if not flag.startswith("-"):
            break  # the image: what follows is the container's command
        skip = not equals and option in _VALUED
        if flag == "--privileged" or (option == "--privileged" and inline.lower() == "true"):
            ways.add("privileged")
        elif option == "--pid" and value == "host":
            ways.add("the host's processes")
        elif option == "--cap-add" and value.upper() in _ROOT_CAPABILITIES:
            ways.add("SYS_ADMIN")
        elif (option in {"-v", "--volume"} and _root_volume(value)) or (
            option == "--mount" and _root_bind(value)
        ):
            ways.add("the host's / mounted")
    order = ["privileged", "the host's / mounted", "the host's processes", "SYS_ADMIN"]
    found = [w for w in order if w in ways]
    return ", ".join(found) if len(found) >= 2 else None


def _root_volume(value: str) -> bool:
    """``-v /:/h`` (not ``:ro``)."""
    source, _, rest = value.partition(":")
    modes = rest.split(":")[1].split(",") if rest.count(":") else []
    return bool(rest) and source.rstrip("/") == "" and source != "" and "ro" not in modes


def _root_bind(value: str) -> bool:
    """``--mount type=bind,source=/,target=/h`` (not ``readonly``)."""
    fields = dict(f.partition("=")[::2] for f in value.split(","))
    source = fields.get("source", fields.get("src", ""))
    read_only = "readonly" in fields or "ro" in fields
    return source != "" and source.rstrip("/") == "" and not read_only
