"""MSBuild project files that run code of their own (blind18).

MSBuild's inline tasks (MITRE T1127.001): a ``.csproj``, ``.proj`` or ``.targets`` file whose
``UsingTask`` is built by ``CodeTaskFactory`` (or ``RoslynCodeTaskFactory``) holds C# that
``MSBuild.exe`` compiles and runs when it builds the project, so a signed Windows program runs
whatever the project carries. Shipped in a package and started by its code (tune
b18-np-msbuild-inline-task: an in-tree build backend running ``MSBuild.exe`` on a shipped
project whose task downloads a program and starts it), such a project is a loader: read like
the other scripts of :mod:`caplet._scan._shell_scripts` when the package's code names it. An
inline task that only builds (no process started, nothing fetched, no assembly loaded) is
not one.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MSBUILD_SUFFIXES", "msbuild_payload"]

#: The suffixes of the project files ``MSBuild.exe`` is handed.
MSBUILD_SUFFIXES: Final = (".csproj", ".proj", ".targets")
#: An inline task: C# (or VB) compiled from the project by MSBuild itself.
_INLINE_TASK: Final = re.compile(r"TaskFactory\s*=\s*[\"'](?:Roslyn)?CodeTaskFactory[\"']")
#: What makes an inline task a loader: a program started, a download, code loaded from bytes.
_LOADS: Final = re.compile(
    r"\bProcess\s*\.\s*Start\b|\bProcessStartInfo\b|\bWebClient\b|\bDownload(?:File|Data|String)\b|"
    r"\bHttpClient\b|\bAssembly\s*\.\s*Load\b|\bVirtualAlloc\b|\bCreateThread\b"
)


def msbuild_payload(text: str) -> tuple[int, str] | None:
    """The line of an MSBuild project's inline task that starts a program, downloads or
    loads code (its first such line), when the project has an inline task."""
    if _INLINE_TASK.search(text) is None:
        return None
    found = _LOADS.search(text)
    if found is None:
        return None
    number = text.count("\n", 0, found.start()) + 1
    return number, text.split("\n")[number - 1].strip()[:120]
