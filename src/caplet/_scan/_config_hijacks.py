"""Other programs' configuration written to run a command or to change where they fetch.

A start-up file runs what is written into it (``_sink_stages``); some programs'
configuration does the same by a directive: ssh runs a ``LocalCommand`` (with
``PermitLocalCommand``), a ``ProxyCommand`` or ``KnownHostsCommand`` at every connection,
and pip installs every later package from the ``index-url`` of its configuration file.
blind16's samples appended a ``LocalCommand`` that reports each connection to a fixed host
(b16-ot-ssh-config-proxycommand) and pointed the user's pip at an index of their own
(b16-ot-pip-conf-index). Such a directive counts when the code writes it with a host
written into it: a tool that configures a proxy or an index the user chose writes one it
was given, not a literal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

__all__ = ["CONFIG_TOKENS", "RUNNER_ENV_TOKENS", "hijacked_config", "runner_env_hijack"]

_SEP = r"[/\\]+"
#: (what the file is, its path, the directive that runs a command or picks a source).
_CONFIGS: Final = (
    (
        "an SSH command",
        re.compile(r"(?:^|[/\\])\.ssh" + _SEP + r"config$"),
        re.compile(
            r"(?im)^[ \t]*(?:LocalCommand|ProxyCommand|KnownHostsCommand|Match[ \t]+exec)\b.*$"
        ),
    ),
    (
        "a package index",
        re.compile(r"(?i)(?:^|[/\\])pip\.(?:conf|ini)$"),
        re.compile(r"(?im)^[ \t]*(?:extra[-_])?index[-_]url[ \t]*=.*$"),
    ),
)
#: A CI runner's files that set the environment (or the PATH) of every later step of the
#: job (GitHub Actions' ``$GITHUB_ENV``/``$GITHUB_PATH``, read by name: the runner hands
#: their paths in those variables), and the variables that make a later step's shell,
#: Node, Python, the loader or git run a file of the writer's choosing (blind32, after
#: StepSecurity/Wiz 2025 on CI-targeting packages): a directive without a host, a file is
#: what it names.
_RUNNER_FILES: Final = (
    (
        "a later CI step's environment",
        re.compile(r"^GITHUB_ENV$"),
        re.compile(
            r"(?m)^[ \t]*(?:BASH_ENV|ENV|NODE_OPTIONS|LD_PRELOAD|LD_AUDIT|PYTHONSTARTUP|"
            r"PYTHONHOME|PERL5OPT|RUBYOPT|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|GIT_SSH_COMMAND|"
            r"GIT_ASKPASS|GIT_EXEC_PATH|PROMPT_COMMAND|DYLD_INSERT_LIBRARIES)[ \t]*=.*$"
        ),
    ),
)
#: Hosts a directive may name without taking anything over: the real index, this host.
_OWN_HOSTS = frozenset({"pypi.org", "files.pythonhosted.org", "localhost", "127.0.0.1"})
_HOST = re.compile(r"\b(?:https?|ftp)://([^/\s'\"?:]+)|\b((?:\d{1,3}\.){3}\d{1,3})\b")


def hijacked_config(paths: Sequence[str], texts: Sequence[str]) -> str | None:
    """What a write of ``texts`` to a file known by ``paths`` (its text, or the literals
    it is built from) makes another program do, or None: a directive of that program's
    configuration naming a host written into the code."""
    for label, path_pattern, directive in _CONFIGS:
        if not any(path_pattern.search(p) for p in paths):
            continue
        for text in texts:
            for line in directive.findall(text):
                hosts = {a or b for a, b in _HOST.findall(line)}
                if hosts - _OWN_HOSTS:
                    return f"{label} ({line.strip()[:60]!r})"
    return None


def runner_env_hijack(paths: Sequence[str], texts: Sequence[str]) -> str | None:
    """What a write of ``texts`` to a file known by ``paths`` (the names and literals it
    is built from: ``os.environ["GITHUB_ENV"]``) makes a later CI step run, or None."""
    for label, path_pattern, directive in _RUNNER_FILES:
        if not any(path_pattern.search(p) for p in paths):
            continue
        for text in texts:
            found = directive.search(text)
            if found is not None:
                return f"{label} ({found.group(0).strip()[:60]!r})"
    return None


#: The directives as a string spells them, for the prefilter (a solo pattern).
CONFIG_TOKENS: Final = r"(?:LocalCommand|ProxyCommand|KnownHostsCommand)\b|index[-_]url[ \t]*="

#: The same for the runner's environment file: its variable's name beside an injected name.
RUNNER_ENV_TOKENS: Final = r"\bGITHUB_ENV\b"
