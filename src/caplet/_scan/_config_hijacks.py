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

__all__ = ["CONFIG_TOKENS", "hijacked_config"]

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


#: The directives as a string spells them, for the prefilter (a solo pattern).
CONFIG_TOKENS: Final = r"(?:LocalCommand|ProxyCommand|KnownHostsCommand)\b|index[-_]url[ \t]*="
