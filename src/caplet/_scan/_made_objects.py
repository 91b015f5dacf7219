"""The objects a call makes whose methods the rules know, by the call: what
:class:`caplet._scan._resolve.Resolver` reads a call's result as (a C library's handle, a
crontab, a Tk window, a ``.env`` reader, a TLS context).

Data apart from the resolver's machinery: split out of ``_resolve`` when blind19's TLS
context took it past 600 lines (the sixteenth session).
"""

from __future__ import annotations

from typing import Final

__all__ = ["C_LIBRARIES", "C_LOADERS", "C_PROGRAM_RUNNERS", "MADE_OBJECTS"]

#: Calls that load a C library through ctypes, and the handles of the C library itself:
#: ``ctypes.CDLL(None).system(cmd)`` is ``os.system(cmd)`` spelled through libc (blind14).
C_LOADERS: Final = frozenset(
    {"ctypes.CDLL", "ctypes.PyDLL", "ctypes.cdll.LoadLibrary", "ctypes.pydll.LoadLibrary"}
)
C_LIBRARIES: Final = frozenset({"ctypes.CDLL()", "ctypes.cdll.msvcrt", "ctypes.cdll.libc"})
#: The C library's functions that run a program, each the ``os`` function of its name.
C_PROGRAM_RUNNERS: Final = frozenset(
    {"system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp"}
)

#: Objects a call makes whose methods the rules know, by the call (blind14): a C
#: library's handle (its ``system()`` runs a program), a crontab (its ``new()`` adds a job
#: cron runs), a Tk window (its ``clipboard_get``/``clipboard_append`` read and replace
#: what the user copied).
MADE_OBJECTS: Final = {
    **dict.fromkeys(C_LOADERS, "ctypes.CDLL()"),
    "crontab.CronTab": "crontab.CronTab()",
    "tkinter.Tk": "tkinter.Tk()",
    "tkinter.Tcl": "tkinter.Tk()",
    "tkinter.Toplevel": "tkinter.Tk()",
    # a .env file's reader, whose .dict() is its values (ENV_FILE_READERS, recall18)
    "dotenv.main.DotEnv": "dotenv.main.DotEnv()",
    "dotenv.DotEnv": "dotenv.main.DotEnv()",
    # a cloud SDK's session, whose get_credentials() resolves the keys (blind31)
    "boto3.Session": "boto3.Session()",
    "boto3.session.Session": "boto3.Session()",
    "botocore.session.Session": "botocore.session.Session()",
    "botocore.session.get_session": "botocore.session.Session()",
    # a TLS context: no connection (NOT_EGRESS), but its wrap_socket makes one (blind19)
    "ssl.create_default_context": "ssl.SSLContext()",
    "ssl.SSLContext": "ssl.SSLContext()",
    "ssl._create_unverified_context": "ssl.SSLContext()",
}
