"""A repository cloned by ``git``: a folder written from the network.

``git clone URL d`` fetches a repository nobody reviewed into ``d``; a program started
from under ``d`` afterwards (``[sys.executable, join(d, "main.py")]``) is a second stage
downloaded and run, as a file ``urlretrieve`` wrote and then started is (CPL-THR-002).
blind16's b16-dr-git-clone-run did so from setup.py's install command and was clean
(recall17). The clone is handed to the sinks as a write of the folder (as an archive
unpacked into one is), so only a program started from under it counts: a clone that is
only read (a documentation build's theme, a test's fixture repository) is no stage.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable
from typing import Final

__all__ = ["cloned_and_run", "cloned_folder", "runs_from_inside", "starts_under"]

#: ``git clone``'s options that take a value (the next word is not the repository).
_VALUED: Final = frozenset(
    {
        "-b",
        "--branch",
        "-o",
        "--origin",
        "-c",
        "--config",
        "--depth",
        "--reference",
        "--template",
        "-u",
        "--upload-pack",
        "-j",
        "--jobs",
        "--separate-git-dir",
        "--shallow-since",
        "--shallow-exclude",
        "--filter",
    }
)


def cloned_folder(command: ast.expr, words: list[str] | None) -> ast.expr | None:
    """The folder a ``git clone`` command writes (its expression, or a literal made for a
    folder named by the repository), or ``None`` when ``command`` clones nothing from a
    remote. ``words`` are the command's words when its whole text is known."""
    elements: list[ast.expr | str]
    if isinstance(command, ast.List | ast.Tuple):
        elements = list(command.elts[:64])
    elif words:
        elements = list(words[:64])
    else:
        return None
    texts = [_text(e) for e in elements]
    if len(texts) < 3 or posixpath.basename((texts[0] or "").lower()) not in {"git", "git.exe"}:
        return None
    try:
        at = texts.index("clone")
    except ValueError:
        return None
    positional: list[ast.expr | str] = []
    skip = False
    for element, text in zip(elements[at + 1 :], texts[at + 1 :], strict=True):
        if skip:
            skip = False
        elif text is not None and text.startswith("-"):
            skip = text in _VALUED
        else:
            positional.append(element)
    if not positional:
        return None
    url = _text(positional[0])
    if url is not None and not _remote(url):
        return None
    if len(positional) >= 2:
        folder = positional[1]
        return ast.Constant(folder) if isinstance(folder, str) else folder
    if url is None:
        return None
    name = posixpath.basename(url.rstrip("/")).removesuffix(".git")
    return ast.Constant(name) if name else None


#: Shell operators between a script's commands.
_SEPARATORS: Final = frozenset({"&&", "||", ";", "|", "&"})


def cloned_and_run(words: list[str]) -> str | None:
    """A shell command line that clones a remote repository and then starts a program
    from it (``git clone URL /tmp/b && python /tmp/b/main.py``, ``cd b && sh
    install.sh``, in a shell's ``-c`` script too): the folder, else ``None``. The clone
    and the run are one command here, so no write and run need pairing."""
    flat = [
        piece
        for word in words[:256]
        for piece in word.replace(";", " ; ").replace("&&", " && ").split()
    ]
    segments: list[list[str]] = [[]]
    for word in flat:
        if word in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    folders: list[str] = []
    inside = False
    for segment in segments:
        clone = _segment_clone(segment)
        if clone is not None:
            folders.append(clone)
            continue
        if not segment or not folders:
            continue
        if segment[0] == "cd" and len(segment) == 2:
            inside = segment[1].rstrip("/") in folders
            continue
        for folder in folders:
            under = _under(folder)
            if under(segment[0]) or (_runs_script(segment) and any(map(under, segment[1:]))):
                return folder  # the program, or the script a runner is given, is the clone's
        if inside and (segment[0].startswith("./") or _runs_script(segment)):
            return folders[-1]
    return None


def runs_from_inside(words: list[str]) -> bool:
    """Whether a command started in a clone (``cwd=d``) runs the clone's code: an
    interpreter or a shell given one of its files, ``make``, a ``./`` program, pip
    installing it (``pip install .``). ``git checkout`` or a linter in it runs none
    (recall18)."""
    if not words:
        return False
    if words[0].startswith("./") or _runs_script(words):
        return True
    return "install" in words[1:4] and any(w in {".", "./"} for w in words[2:8])


def starts_under(folder: str, words: list[str]) -> bool:
    """Whether a command starts a program under ``folder``, the literal folder a clone
    wrote (``git clone URL`` names it after the repository), or runs a script from it
    (``python helpers/x.py``; not ``ls helpers/docs``, recall18)."""
    if not folder or not words:
        return False
    under = _under(folder)
    return under(words[0]) or (_runs_script(words) and any(map(under, words[1:16])))


def _under(folder: str) -> Callable[[str], bool]:
    """Whether a word is a path under ``folder`` (``./`` before either is the same)."""
    prefix = folder.removeprefix("./").rstrip("/") + "/"
    return lambda word: word.removeprefix("./").startswith(prefix)


def _segment_clone(segment: list[str]) -> str | None:
    """The literal folder one shell command's ``git clone`` writes."""
    start = next((i for i, w in enumerate(segment[:4]) if w.lower() in {"git", "git.exe"}), None)
    if start is None:
        return None
    folder = cloned_folder(ast.Constant(""), segment[start:])
    if isinstance(folder, ast.Constant) and isinstance(folder.value, str):
        return folder.value
    return None


def _runs_script(segment: list[str]) -> bool:
    """An interpreter or a shell given a file (``python setup.py``, ``sh install.sh``)."""
    program = posixpath.basename(segment[0].lower()).removesuffix(".exe")
    runners = ("python", "py", "sh", "bash", "zsh", "node", "perl", "ruby", "pip")
    return (program.startswith(runners) and len(segment) >= 2) or program == "make"


def _text(element: ast.expr | str) -> str | None:
    if isinstance(element, str):
        return element
    if isinstance(element, ast.Constant) and isinstance(element.value, str):
        return element.value
    return None


def _remote(url: str) -> bool:
    """A repository fetched over the network: a URL or scp-like ``user@host:path``."""
    return "://" in url or ("@" in url and ":" in url.split("@", 1)[1])
