"""npm's install lifecycle run from a Python package (blind17, b17-np-npm-postinstall).

A Python package may ship a JavaScript folder with a ``package.json`` and run ``npm
install`` in it from setup.py or at import: npm then runs the ``preinstall``, ``install``
and ``postinstall`` scripts the file names (Phylum and Socket 2023-2024 on cross-ecosystem
droppers). The Python only runs npm; the payload is the script npm starts, a JavaScript
file that sends the whole environment, or a command that downloads and runs. So a
lifecycle script's file counts as started by the package's code when a Python source of
the package runs an installer of npm's, and an inline command is read as a started
script's text is (``_shell_scripts``).
"""

from __future__ import annotations

import json
from typing import Final

import re2

__all__ = [
    "LIFECYCLE_FILE",
    "js_sends_environment",
    "lifecycle_scripts",
    "runs_npm_install",
]

#: The file npm reads a package's scripts from.
LIFECYCLE_FILE: Final = "package.json"
#: The scripts ``npm install`` runs in the package it installs.
_LIFECYCLE: Final = ("preinstall", "install", "postinstall")
#: A script file a lifecycle command runs (``node build/prepare.js``, ``sh x.sh``).
_SCRIPT_FILE: Final = re2.compile(r"([\w./-]+\.(?:js|cjs|mjs|sh|bash|ps1|bat|cmd))\b")

#: npm's, yarn's, pnpm's or jlpm's (JupyterLab's yarn, recall18) install run by Python (a
#: list's words, or a command string); yarn and jlpm install when given no command at all
#: (``["jlpm"]``, ``"jlpm --silent"``).
_NPM_INSTALL: Final = re2.compile(
    r"""['"](?:npm|npm\.cmd|yarn|pnpm|jlpm)['"]\s*,\s*['"](?:install|i|ci|add)['"]|"""
    r"""['"](?:npm|yarn|pnpm|jlpm)\s+(?:install|i|ci)\b|"""
    r"""\[\s*['"](?:yarn|jlpm)['"]\s*\]|\(\s*['"](?:yarn|jlpm)['"]\s*,\s*\)|"""
    r"""['"\s;&|](?:yarn|jlpm)(?:\s+--?[\w-]+)+\s*['"]|[\s;&|](?:yarn|jlpm)\s*['"]"""
)
#: JavaScript that sends the whole environment: ``process.env`` as a value (not one of its
#: variables), beside a request.
_JS_WHOLE_ENV: Final = re2.compile(
    r"process\.env\s*[,)}\];]|\.\.\.\s*process\.env\b|JSON\.stringify\(\s*process\.env\b"
)
_JS_SEND: Final = re2.compile(
    r"\b(?:https?\s*\.\s*request|fetch|axios\s*\.\s*post|XMLHttpRequest)\s*\(|"
    r"""require\(\s*['"](?:node-fetch|axios|got)['"]\s*\)"""
)


def lifecycle_scripts(text: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The files (relative to its folder) a ``package.json``'s install lifecycle runs, and its
    lifecycle commands themselves; nothing for a file that is no JSON object."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return frozenset(), ()
    scripts = data.get("scripts") if isinstance(data, dict) else None
    if not isinstance(scripts, dict):
        return frozenset(), ()
    commands = tuple(c for k in _LIFECYCLE if isinstance(c := scripts.get(k), str))
    names = {m.removeprefix("./") for c in commands for m in _SCRIPT_FILE.findall(c[:4096])}
    return frozenset(names), commands


def runs_npm_install(text: str) -> bool:
    """Whether Python source runs an installer of npm's (``["npm", "install"]``)."""
    return _NPM_INSTALL.search(text) is not None


def js_sends_environment(text: str) -> tuple[int, str] | None:
    """JavaScript that sends the whole environment: the line naming it."""
    found = _JS_WHOLE_ENV.search(text)
    if found is None or _JS_SEND.search(text) is None:
        return None
    number = text.count("\n", 0, found.start()) + 1
    return number, text.split("\n")[number - 1].strip()[:120]
