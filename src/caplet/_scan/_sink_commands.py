"""The checks of :class:`caplet._scan._sinks.Sinks` at a process call's command: what data
reaches it, what its known text says (a download piped to a shell, a reverse shell, pip
installing another package, a shipped program started, credentials uploaded, host data sent
by a network program), and a script given on standard input (python or a shell reading its
program from stdin, blind18).

A mixin (the state is the sinks' own), split out of ``_sinks`` when that grew past 600 lines
(blind18, recall18).
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import PurePosixPath

from caplet._scan._commands import PYTHONS, encoded_command, string_parts
from caplet._scan._indicators import IndicatorKind
from caplet._scan._shipped_programs import shipped_start
from caplet._scan._sink_egress import test_file
from caplet._scan._sink_pip import installs_other
from caplet._scan._sink_stages import StageSinks
from caplet._scan._sink_startup import sending_line
from caplet._scan._sink_uploads import uploaded_credentials
from caplet._scan._sources import NETWORK_PROGRAMS, SHELLS, Source
from caplet._scan._syntax import shorten

__all__ = ["CommandSinks", "launches_payload", "remote_script"]


#: Programs that save what they download to the file an option names (the next word;
#: curl's ``-O`` takes no path, it keeps the URL's name).
_DOWNLOADERS = {
    "curl": frozenset({"-o", "--output"}),
    "wget": frozenset({"-O", "--output-document"}),
}


#: Runtimes whose ``run`` fetches a script given by URL and runs it (Deno runs
#: ``deno run -A https://host/agent.ts``; blind31, b31-np-deno-run-remote), and ``?``: a
#: program the file computes (``[_deno(), "run", url]``, a runtime it downloads first).
_URL_RUNTIMES = frozenset({"deno", "bun", "?"})
#: A URL of a script (JavaScript, TypeScript, Python, shell, PowerShell).
_SCRIPT_URL = re.compile(r"(?i)https?://\S+\.(?:[cm]?[jt]sx?|py|sh|ps1)(?:[?#]\S*)?")


def remote_script(words: list[str]) -> str | None:
    """The URL of a script a runtime is told to fetch and run: ``deno run [flags] URL``."""
    if len(words) < 3 or words[1] != "run":
        return None
    program = PurePosixPath(words[0].replace("\\", "/")).name.lower().removesuffix(".exe")
    if program not in _URL_RUNTIMES:
        return None
    for word in words[2:]:
        if _SCRIPT_URL.fullmatch(word):
            return word
        if not word.startswith("-"):
            return None
    return None


def launches_payload(program: str) -> bool:
    """A program that is a dropped payload: a Windows executable or something in /tmp."""
    lowered = program.lower()
    return lowered.endswith((".exe", ".scr", ".bat", ".ps1", ".vbs", ".msi")) or lowered.startswith(
        ("/tmp/", "/dev/shm/", "/var/tmp/")  # noqa: S108 -- patterns matched, not paths used
    )


class CommandSinks(StageSinks):
    """Process calls' commands (see the module docstring)."""

    def _command(self, node: ast.Call, api: str, command: ast.expr) -> None:
        """What a process call's command carries, and what its text says."""
        flow = self._flow
        line, col = node.lineno, node.col_offset
        # Data from the network or a decoder counts where it can be the command
        # itself (a shell string, a list's program, an interpreter's argument):
        # a version number fetched from an index and passed to pip is not a payload.
        self._by_source(node, f"{api}(...)", self._commands.program_labels(command))
        labels = flow.labels(command)
        recon = sorted({d for s, d in labels if s is Source.RECON})
        words = self._commands.words(command)
        if words is None:
            words = self._commands.literal_pieces(command)
        text = " ".join(words)
        if text:
            self._command_text(node, text)
        elif isinstance(command, ast.Name):
            # blind8: cmd = "curl ... -o %s && chmod +x %s" % (p, p) in each branch of an if:
            # the text of every value the command's name is bound to in the call's scope
            for bound in self._commands.bound_texts(command, flow.scope(node)):
                self._command_text(node, bound)
        script = encoded_command(words)
        if script:
            self._command_text(node, script)
        program = PurePosixPath(words[0]).name.lower() if words else ""
        options = _DOWNLOADERS.get(program.removesuffix(".exe"))
        if options is not None:
            self._downloaded_to(node, command, options)
        head = (
            command.elts[0] if isinstance(command, ast.List | ast.Tuple) and command.elts else None
        )
        if head is not None and "sys.executable" in flow.resolve(head):
            program = "python"
        if program.startswith(PYTHONS) and "-c" in words[:-1]:
            self._code_string(node, f"{api}({program} -c ...)", words[words.index("-c") + 1])
        elif program.startswith(PYTHONS) and all(w.startswith("-") for w in words[1:]):
            # python (or python -) reading its program from standard input
            for source in self._stdin_sources(node):
                value = flow.evaluate(source)
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                if isinstance(value, str):
                    self._code_string(node, f"{api}({program} < source)", value)
        elif program in SHELLS and all(w.startswith(("-", "/")) for w in words[1:]):
            # a shell reading its script from standard input (blind18: b18-ds-sh-stdin-input,
            # subprocess.run(["/bin/sh"], input=b32decode(...))): the script is the command
            self._stdin_script(node, api, program)
        # at install time, or when a package is imported (module level of an __init__.py),
        # or a URL at module level anywhere but a test: another package pulled in behind
        # the resolver (a benchmark script pip-installing the library it measures is not)
        import_time = flow.scope(node) == 0 and not test_file(self._scan.file)
        pulled = import_time and (
            self._scan.file.rsplit("/", 1)[-1] == "__init__.py"
            or any("://" in w or w.startswith("git+") for w in words)
        )
        remote = remote_script(words)
        if remote is not None:
            self._scan.emit("CPL-THR-002", f"{api}({program or '?'} run {remote})", line, col)
        if (self._scan.installer or pulled) and installs_other(words):
            self._scan.emit("CPL-THR-019", f"{api}(... pip install ...)", line, col)
        imported = import_time and self._scan.file.endswith("__init__.py")
        if self._scan.installer or imported:  # a shipped program started, CPL-THR-018
            started = shipped_start(flow, node, api, command, launches_payload, imported=imported)
            if started is not None:
                self._scan.emit("CPL-THR-018", started, line, col)
        for what in uploaded_credentials(flow, command) or self._written_sent(command, text):
            self._scan.emit("CPL-THR-007", f"{what} sent by {api}({program} ...)", line, col)
        if recon and (program in NETWORK_PROGRAMS or any(w in NETWORK_PROGRAMS for w in words)):
            shown = program or next(w for w in words if w in NETWORK_PROGRAMS)
            self._scan.emit(
                "CPL-THR-017", f"{', '.join(recon)} sent by {api}({shown} ...)", line, col
            )

    def _written_sent(self, command: ast.expr, text: str) -> list[str]:
        """The credentials in a file this code wrote and the command uploads: shell
        histories copied into a temporary file, then ``curl -F file=@<that file> URL``
        (blind32, b32-re-shell-history-0x0). The command must send (curl's or wget's
        upload options, and a URL) and name the file's path by a name the write used."""
        if sending_line(text.replace("\n", " ")) is None:
            return []
        named = {n.id for n in ast.walk(command) if isinstance(n, ast.Name)}
        flow = self._flow
        found: set[str] = set()
        for write in self._writes:
            if write.copied or not named & write.keys:
                continue
            data = list(write.data)
            if write.handle is not None:
                data += flow.contributed.get(write.handle, {}).get(write.scope, ())[:8]
            labels = set(write.labels)
            for item in data:
                labels |= flow.labels(item)
            found |= {d for s, d in labels if s is Source.CREDENTIAL}
        return sorted(found)

    def _downloaded_to(self, node: ast.Call, command: ast.expr, options: frozenset[str]) -> None:
        """``["curl", url, "-o", path]``: the file at ``path`` (an expression: a temporary
        name joined at run time) is written from the network, so starting it later is
        a downloaded program run (blind19, b19-dr-curl-uuid-tmp-chmod)."""
        if isinstance(command, ast.Name):
            bound = self._flow.bindings.assigned.get(command.id, ())
            command = bound[0] if len(bound) == 1 else command
        saved = {(Source.DOWNLOADED, "a download saved by curl/wget")}
        if isinstance(command, ast.List | ast.Tuple):
            for option, path in itertools.pairwise(command.elts):
                if isinstance(option, ast.Constant) and option.value in options:
                    self._write(node, path, (), saved)
                    return
            return
        # a shell string: f"curl -sL {url} -o {dst}", "wget -O %s %s" % (dst, url)
        for text, target in itertools.pairwise(string_parts(command)):
            if isinstance(text, str) and isinstance(target, ast.expr):
                words = text.split()
                if words and words[-1] in options and text[-1:].isspace():
                    self._write(node, target, (), saved)
                    return

    def _command_text(self, node: ast.Call, text: str) -> None:
        """A command's known text: a download piped to a shell in it is run, not shown."""
        for indicator in self._flow.indicators(text):
            if indicator.kind is IndicatorKind.DOWNLOAD_EXEC:
                self._scan.emit("CPL-THR-015", shorten(text), node.lineno, node.col_offset)
            elif indicator.kind in {IndicatorKind.NETWORK_PIPE, IndicatorKind.REVERSE_SHELL}:
                self._scan.indicators(text, node.lineno, node.col_offset)

    def _stdin_script(self, node: ast.Call, api: str, program: str) -> None:
        """A shell given its script on standard input: decoded or downloaded input is a
        command run (CPL-THR-001/-002/-020), and known input text is read as a command's."""
        for source in self._stdin_sources(node):
            self._by_source(node, f"{api}({program} < ...)", self._flow.labels(source))
            value = self._flow.evaluate(source)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if isinstance(value, str):
                self._command_text(node, value)

    def _stdin_sources(self, node: ast.Call) -> list[ast.expr]:
        """What a process is given on its standard input: ``input=``, ``.communicate(x)``,
        ``.stdin.write(x)`` on the name the process is bound to, ``.write(x)`` on a pipe
        ``os.popen`` opened."""
        found = [k.value for k in node.keywords if k.arg == "input"]
        handle = self._handle_of(node)
        if handle is None:
            return found
        # os.popen("/bin/sh", "w"): the file object is the shell's standard input, so its
        # own write is the script (blind35, b35-ds-popen-write-mode-gzip)
        piped = "os.popen" in self._flow.resolve(node.func)
        for n in self._flow.calls():
            if not isinstance(n.func, ast.Attribute):
                continue
            owner = n.func.value
            if n.func.attr == "communicate" and isinstance(owner, ast.Name) and owner.id == handle:
                found.extend([*n.args[:1], *(k.value for k in n.keywords if k.arg == "input")])
            elif n.func.attr in {"write", "writelines"} and (
                (
                    isinstance(owner, ast.Attribute)
                    and owner.attr == "stdin"
                    and isinstance(owner.value, ast.Name)
                    and owner.value.id == handle
                )
                or (piped and isinstance(owner, ast.Name) and owner.id == handle)
            ):
                found.extend(n.args[:1])
        return found[:8]
