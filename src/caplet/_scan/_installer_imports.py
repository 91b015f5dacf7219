"""The modules an install script imports from its own folder: install-time code too.

pip runs ``setup.py``; whatever it imports from beside it (``from _helper
import *``, ``import mypkg``, a helper imported inside a ``cmdclass`` command)
runs at install time as well. Moving the payload out of ``setup.py`` into
such a module must not move it out of the installer's rules
(benchmarks/mutate_recall.py's ``sibling-*`` rewrites, issue 16), so those
modules are scanned as install scripts too: transitively, bounded.

Only imports by a literal name count (statements, and ``__import__`` /
``importlib.import_module`` of a string constant); a name computed at run
time is the data flow's business inside each file.

A PEP 517 build backend kept in the tree (``pyproject.toml``'s ``[build-system]``
``build-backend`` found on its ``backend-path``) is what pip imports to build the
package, as it runs ``setup.py``: its module is an install script too (a second stage
installed by pip from it is the same family as from setup.py, issue 16, class 1).
"""

from __future__ import annotations

import ast
import tomllib
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator

from caplet._marks import parse
from caplet._toml import TomlLimitError, parse_toml

__all__ = [
    "MAX_INSTALLER_MODULES",
    "build_backends",
    "build_hooks",
    "command_modules",
    "installer_modules",
]

#: How many modules at most are followed from the install scripts (a package whose
#: setup.py pulls in more is scanned with the rest as ordinary modules).
MAX_INSTALLER_MODULES = 32

_DYNAMIC = {"__import__", "import_module"}


def _imported(text: str) -> set[str]:
    """The dotted module names ``text`` imports by a literal name (submodule candidates
    of ``from a import b`` included)."""
    try:
        with warnings.catch_warnings():
            # "1if" or "\d" warn while parsing: a warning must not escape into the host
            # (printed, or raised under -W error; attack11), as _filepass parses
            warnings.simplefilter("ignore")
            tree = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # a setup.py nested past the parser's depth ("'a'" + ".__add__('b')" * 5000, 65 kB)
        # raised RecursionError out of the scan (attack11); the scan of the file itself
        # reports what it cannot parse
        return set()
    names: set[str] = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
    if text.isascii() and not any(word in text for word in _DYNAMIC):
        # Neither name is written (an identifier outside ASCII may be either once
        # NFKC-folded, so such a text is walked whole): no call below can be one of
        # them, and the walk of every expression was most of a large setup.py's scan
        # (attack36's 0.9 MB file of calls: 8.6 of 12 s).
        return names
    for call in ast.walk(tree):
        if (
            isinstance(call, ast.Call)
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
            and (
                getattr(call.func, "id", None) in _DYNAMIC
                or getattr(call.func, "attr", None) in _DYNAMIC
            )
        ):
            names.add(call.args[0].value)
    return names


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and in the blocks below it (a function's, a class's,
    a branch's, a handler's, a ``match`` case's): an import is a statement, and no
    statement sits inside an expression, so these are all of a module's imports."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        blocks: list[ast.stmt] = []
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.stmt):
                        blocks.append(item)
                    elif isinstance(item, ast.ExceptHandler | ast.match_case):
                        blocks.extend(item.body)
        stack.extend(reversed(blocks))


def _files_of(name: str, folder: str, present: Collection[str]) -> Iterable[str]:
    """The files of this tree a dotted module name may be, under ``folder``: each
    package on the way (its ``__init__.py``) and the module itself."""
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        base = folder + "/".join(parts[:end])
        for candidate in (base + ".py", base + "/__init__.py"):
            if candidate in present:
                yield candidate


def installer_modules(
    scripts: Iterable[str], present: Collection[str], read: Callable[[str], str | None]
) -> frozenset[str]:
    """The files of the tree (relative paths in ``present``) that the install
    ``scripts`` import from their own folder, directly or through each other;
    ``read`` gives a file's text (``None`` when it cannot be read)."""
    found: set[str] = set()
    queue = [(s, s.rpartition("/")[0] + "/" if "/" in s else "") for s in scripts]
    while queue and len(found) < MAX_INSTALLER_MODULES:
        relative, folder = queue.pop(0)
        text = read(relative)
        if text is None:
            continue
        for name in sorted(_imported(text)):
            for candidate in _files_of(name, folder, present):
                if candidate not in found and len(found) < MAX_INSTALLER_MODULES:
                    found.add(candidate)
                    queue.append((candidate, folder))
    return frozenset(found)


def build_backends(present: Collection[str], read: Callable[[str], str | None]) -> frozenset[str]:
    """The files of the tree that are an in-tree PEP 517 build backend: for each
    ``pyproject.toml`` at the root or one folder down (where an sdist keeps it), the
    module its ``build-backend`` names (before any ``:``) on each ``backend-path``
    folder, a package's ``__init__.py`` on the way included. A backend that is not in
    the tree (setuptools, hatchling) is an installed library, not the package's code."""
    found: set[str] = set()
    for relative in sorted(present):
        if relative.rsplit("/", 1)[-1] != "pyproject.toml" or relative.count("/") > 1:
            continue
        text = read(relative)
        try:
            table = parse_toml(text) if text is not None else {}
        except (tomllib.TOMLDecodeError, TomlLimitError):
            # not TOML: pip refuses it too; past caplet's bounds: CPL-SCAN-002 (danger) is
            # the file's finding (_build_requirements, attack29)
            continue
        system = table.get("build-system")
        if not isinstance(system, dict):
            continue
        backend, paths = system.get("build-backend"), system.get("backend-path")
        if not isinstance(backend, str) or not isinstance(paths, list):
            continue
        folder = relative.rpartition("/")[0] + "/" if "/" in relative else ""
        module = backend.partition(":")[0].strip()
        for path in paths[:8]:
            if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
                continue  # pip requires backend-path inside the tree
            inner = path.strip().removeprefix("./").strip("/")
            base = folder if inner in {"", "."} else folder + inner + "/"
            found.update(_files_of(module, base, present))
    return frozenset(found)


def build_hooks(present: Collection[str], read: Callable[[str], str | None]) -> frozenset[str]:
    """The files of the tree that are a build backend's hooks, for each ``pyproject.toml``
    at the root or one folder down: hatchling's custom hooks (``[tool.hatch.build.hooks.
    custom]``, a target's, ``[tool.hatch.metadata.hooks.custom]``; ``path``, by default
    ``hatch_build.py``) and pdm-backend's (``pdm_build.py``, or ``[tool.pdm.build]``'s
    ``custom-hook``, when pdm-backend builds). The backend imports the file and calls its
    hooks while pip builds the package, as setuptools runs a ``cmdclass`` command: an
    install script (pip run from it, a shipped program started, network at its module
    level are the installer's), not an entry, its network chains a module's, as a
    command's: a hook fetches build inputs (nbconvert's stylesheets). blind15's
    b15-ls-pdm-build-hook and -hatch-build-hook; recall16."""
    found: set[str] = set()
    for relative in sorted(present):
        folder, _, name = relative.rpartition("/")
        if name != "pyproject.toml" or relative.count("/") > 1:
            continue
        text = read(relative)
        try:
            table = parse_toml(text) if text is not None else {}
        except (tomllib.TOMLDecodeError, TomlLimitError):
            continue
        base = folder + "/" if folder else ""
        for path in _hook_paths(table)[:MAX_INSTALLER_MODULES]:
            inner = path.strip().removeprefix("./")
            if not inner.startswith("/") and ".." not in inner.split("/"):
                found.update({base + inner} & set(present))
    return frozenset(found)


def _hook_paths(table: dict[str, object]) -> list[str]:
    """The hook files a parsed ``pyproject.toml`` names (relative to its folder)."""
    paths: list[str] = []
    hatch = _table(_table(table, "tool"), "hatch")
    build = _table(hatch, "build")
    owners = [build, _table(hatch, "metadata")]
    owners += [t for t in _table(build, "targets").values() if isinstance(t, dict)]
    for owner in owners:
        hooks = _table(owner, "hooks")
        if isinstance(hooks.get("custom"), dict):  # hatchling refuses any other value
            hook = _table(hooks, "custom").get("path", "hatch_build.py")
            paths += [hook] if isinstance(hook, str) else []
    backend = _table(table, "build-system").get("build-backend")
    if isinstance(backend, str) and backend.startswith(("pdm.backend", "pdm.pep517")):
        hook = _table(_table(_table(table, "tool"), "pdm"), "build").get("custom-hook")
        paths.append(hook if isinstance(hook, str) else "pdm_build.py")
    return paths


def _table(table: dict[str, object], key: str) -> dict[str, object]:
    """``table[key]`` when it is a table, else an empty one."""
    value = table.get(key)
    return value if isinstance(value, dict) else {}


def command_modules(present: Collection[str], read: Callable[[str], str | None]) -> frozenset[str]:
    """The files of the tree that hold setuptools commands a configuration file names:
    ``[tool.setuptools.cmdclass]`` in ``pyproject.toml`` and ``cmdclass`` under
    ``[options]`` in ``setup.cfg`` (``build_py = _build_cmds.BuildPy``), at the root or
    one folder down. setuptools imports them and runs the commands to build, with no
    ``setup.py`` importing them: a pip install at their module level was a module's,
    clean in both forms (attack8). Install scripts, not entries: their chains stay a
    module's, as for a module setup.py imports."""
    found: set[str] = set()
    for relative in sorted(present):
        folder, _, name = relative.rpartition("/")
        if name not in {"pyproject.toml", "setup.cfg"} or relative.count("/") > 1:
            continue
        text = read(relative)
        if text is None:
            continue
        targets = _toml_commands(text) if name == "pyproject.toml" else _cfg_commands(text)
        base = folder + "/" if folder else ""
        for target in targets[:MAX_INSTALLER_MODULES]:
            module = target.strip().rpartition(".")[0]
            if module:
                found.update(_files_of(module, base, present))
    return frozenset(found)


def _toml_commands(text: str) -> list[str]:
    """The classes ``[tool.setuptools.cmdclass]`` names (nothing if it is not TOML)."""
    try:
        table = parse_toml(text)
    except (tomllib.TOMLDecodeError, TomlLimitError):
        return []
    tool = table.get("tool")
    setuptools = tool.get("setuptools") if isinstance(tool, dict) else None
    commands = setuptools.get("cmdclass") if isinstance(setuptools, dict) else None
    if not isinstance(commands, dict):
        return []
    return [v for v in commands.values() if isinstance(v, str)]


def _cfg_commands(text: str) -> list[str]:
    """The classes ``cmdclass`` under ``[options]`` of a ``setup.cfg`` names (one
    ``command = module.Class`` a line, as setuptools reads that option)."""
    # Imported by the first setup.cfg, not by every `caplet scan` (issue 16: start-up).
    import configparser

    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
        value = parser.get("options", "cmdclass", fallback="")
    except configparser.Error:
        return []
    return [line.partition("=")[2] for line in value.splitlines() if "=" in line]
