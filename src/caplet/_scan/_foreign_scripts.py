"""Files of other languages a package's code starts, beyond the shell's (blind32).

Read like the scripts of :mod:`caplet._scan._shell_scripts` when a Python source of the
package that can start a process names them in a literal:

* a Go source run from source (``go run tools/gen.go`` from an install command): a
  program that fetches from the network (``net/http``'s ``http.Get``, a raw ``net.Dial``)
  and starts a program (``os/exec``'s ``exec.Command``) is a download-and-run loader
  (CPL-THR-015), whatever the Python around it does;
* a Ruby, Perl or PHP script started with its interpreter (``ruby tools/gen_docs.rb``): one
  that opens a connection or fetches (a socket, an HTTP client) and starts a program or a
  shell (``Open3``, ``system``, ``exec``, backticks, ``proc_open``) is a remote shell or a
  download-and-run loader (CPL-THR-015), as the Go source is (blind35);
* a registry file imported (``reg import data\\defaults.reg``, ``regedit /s``): one that
  writes a value under an autostart key (``...\\CurrentVersion\\Run``, ``RunOnce``,
  Winlogon's ``Shell``/``Userinit``, a program's ``Image File Execution Options``
  debugger) is persistence (CPL-THR-009), as ``winreg.SetValueEx`` there is.

A Go, Ruby, Perl or PHP source that only fetches or only runs, and a registry file that sets
an application's own settings, are neither.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["FOREIGN_SUFFIXES", "PERSISTENCE_SUFFIXES", "foreign_payload"]

#: The suffixes read here.
FOREIGN_SUFFIXES: Final = (".go", ".reg", ".rb", ".pl", ".php")
#: Those whose finding is persistence rather than a download that runs.
PERSISTENCE_SUFFIXES: Final = (".reg",)

#: Go that fetches: net/http's helpers and clients, a raw connection.
_GO_FETCH: Final = re.compile(
    r"\bhttp\s*\.\s*(?:Get|Post|NewRequest(?:WithContext)?|DefaultClient)\b|"
    r"\bnet\s*\.\s*Dial(?:Timeout)?\s*\("
)
#: Go that starts a program.
_GO_RUN: Final = re.compile(r"\bexec\s*\.\s*Command(?:Context)?\s*\(|\bsyscall\s*\.\s*Exec\s*\(")
#: Ruby, Perl and PHP that connect or fetch, and that start a program, by suffix: the two
#: halves of a reverse shell or a loader in each language's usual spelling.
_SCRIPT_HALVES: Final = {
    ".rb": (
        re.compile(
            r"\b(?:TCPSocket|UDPSocket|Socket)\s*\.\s*(?:new|open|tcp)\b|\bNet::HTTP\b|"
            r"\bURI\s*\.\s*open\b|\bopen-uri\b"
        ),
        re.compile(
            r"\bOpen3\b|\bIO\s*\.\s*popen\b|\b(?:system|exec|spawn)\s*[( ]|%x[({\[]|`[^`\n]+`"
        ),
    ),
    ".pl": (
        re.compile(r"\bIO::Socket\b|\bsocket\s*\(|\bLWP::|\bHTTP::Tiny\b"),
        re.compile(r"\b(?:system|exec)\s*[( ]|open\s*\([^)\n]*\|['\"]|`[^`\n]+`|qx[({/]"),
    ),
    ".php": (
        re.compile(
            r"\b(?:fsockopen|stream_socket_client|socket_create|curl_exec)\s*\(|"
            r"\bfile_get_contents\s*\(\s*['\"]https?://"
        ),
        re.compile(r"\b(?:shell_exec|exec|system|passthru|proc_open|popen)\s*\("),
    ),
}
#: A registry key section naming an autostart location (``[HKEY_...\\Run]``).
_AUTOSTART_KEY: Final = re.compile(
    r"(?im)^\s*\[[^\]\n]*\\(?:CurrentVersion\\(?:Run|RunOnce|RunServices|RunOnceEx|"
    r"Policies\\Explorer\\Run)|Winlogon|Image File Execution Options\\[^\]\n]+)\]\s*$"
)
#: A value set in a section (``"Name"="data"``, ``@="data"``), not a deletion (``=-``).
_VALUE: Final = re.compile(r"""(?m)^\s*(?:"[^"\n]*"|@)\s*=\s*(?!-)\S""")


def foreign_payload(text: str, suffix: str) -> tuple[int, str] | None:
    """The line of a Go (Ruby, Perl, PHP) source that downloads and runs, or of a registry
    file's value written under an autostart key; ``None`` for anything else."""
    if suffix == ".go":
        if _GO_FETCH.search(text) is None:
            return None
        return _line_of(text, _GO_RUN.search(text))
    halves = _SCRIPT_HALVES.get(suffix)
    if halves is not None:
        if halves[0].search(text) is None:
            return None
        return _line_of(text, halves[1].search(text))
    if suffix == ".reg":
        for key in _AUTOSTART_KEY.finditer(text):
            end = text.find("\n[", key.end())
            section = text[key.end() : len(text) if end < 0 else end]
            value = _VALUE.search(section)
            if value is not None:
                at = key.end() + value.start()
                return _line_of(text, at)
    return None


def _line_of(text: str, found: re.Match[str] | int | None) -> tuple[int, str] | None:
    if found is None:
        return None
    at = found if isinstance(found, int) else found.start()
    while at < len(text) and text[at] in "\n \t":
        at += 1
    number = text.count("\n", 0, at) + 1
    return number, text.split("\n")[number - 1].strip()[:120]
