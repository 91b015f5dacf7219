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
from typing import Final

__all__ = ["cloned_folder"]

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


def _text(element: ast.expr | str) -> str | None:
    if isinstance(element, str):
        return element
    if isinstance(element, ast.Constant) and isinstance(element.value, str):
        return element.value
    return None


def _remote(url: str) -> bool:
    """A repository fetched over the network: a URL or scp-like ``user@host:path``."""
    return "://" in url or ("@" in url and ":" in url.split("@", 1)[1])
