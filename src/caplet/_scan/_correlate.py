"""Chains: capabilities and indicators that mean intent only together.

Single-API rules cannot tell a stealer from a library: ``os.environ``,
``socket`` and ``subprocess`` each appear in a large share of the most
downloaded PyPI packages. What malware has and libraries lack is the
*combination* in one file: the whole environment plus a network call
(harvesting), a socket plus ``os.dup2`` (reverse shell), an autostart path
plus a file write (persistence). GuardDog 3 made the same observation and
correlates capability and threat rules per file; caplet does it here, on
the tags the AST pass records, so each chain is one table row.

Correlation is per file (not per function): droppers often spread the
steps over helpers in one module, and a per-file chain still leaves
benign packages clean because the tags are specific.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = ["TAG_APIS", "Chain", "Tag", "correlate"]


class Tag(enum.Enum):
    """Something a file does that matters only in combination."""

    EGRESS = "egress"
    SOCKET = "socket"
    DUP2 = "dup2"
    PTY_SPAWN = "pty-spawn"
    DOWNLOAD = "download"
    HOST_INFO = "host-info"
    ENV_DUMP = "env-dump"
    CREDENTIAL_FILE = "credential-file"
    PERSISTENCE = "persistence"
    DOWNLOAD_EXEC = "download-exec"
    CLIPBOARD = "clipboard"
    WALLET_PATTERN = "wallet-pattern"
    PROCESS = "process"
    SHELL = "shell"
    #: A downloader or script host started (curl, wget, powershell, certutil, mshta ...).
    DOWNLOADER = "downloader"
    READ = "read"
    EXFIL_ENDPOINT = "exfil-endpoint"
    #: A persistence location that is written (an open for writing, a crontab
    #: or schtasks command), not merely mentioned.
    PERSISTENCE_WRITE = "persistence-write"
    #: A downloaded program started: os.startfile, or a program in /tmp or *.exe.
    LAUNCH = "launch"
    #: ``os.environ.items()`` and friends: the environment walked.
    ENV_ITER = "env-iter"
    #: A secret-looking variable read by name (``AWS_SECRET_ACCESS_KEY``).
    SECRET_ENV = "secret-env"  # noqa: S105 -- a tag name, not a password
    #: A network call to a URL written into the code, not passed in.
    FIXED_ENDPOINT = "fixed-endpoint"
    #: A process running Python (``sys.executable``, ``python3``).
    PYTHON_RUN = "python-run"
    #: A custom setuptools/distutils command class in setup.py.
    CUSTOM_INSTALL = "custom-install"
    #: A decoder call (b64decode, decompress, fromhex ...).
    DECODE = "decode"
    WRITE = "write"
    REGISTRY_WRITE = "registry-write"
    #: Memory mapped executable (``mmap.PROT_EXEC``, ``VirtualAlloc``).
    EXEC_MEMORY = "exec-memory"
    #: A native function pointer made from an address (``ctypes.CFUNCTYPE``, ``CreateThread``).
    NATIVE_CALL = "native-call"
    #: Every class of the interpreter walked (``object.__subclasses__()``).
    SUBCLASS_WALK = "subclass-walk"
    #: What such a walk is after: a class or global that reaches os or subprocess.
    ESCAPE_TARGET = "escape-target"
    #: Keystrokes hooked or the screen captured (keyloggers and screen grabbers).
    SURVEILLANCE = "surveillance"


#: Fully qualified names whose mere reference records a tag.
TAG_APIS: Final[Mapping[str, Tag]] = MappingProxyType(
    {
        "socket.socket": Tag.SOCKET,
        "socket.create_connection": Tag.SOCKET,
        "socket.fromfd": Tag.SOCKET,
        "os.dup2": Tag.DUP2,
        "pty.spawn": Tag.PTY_SPAWN,
        "urllib.request.urlretrieve": Tag.DOWNLOAD,
        "urllib.urlretrieve": Tag.DOWNLOAD,
        "wget.download": Tag.DOWNLOAD,
        "socket.gethostname": Tag.HOST_INFO,
        "socket.getfqdn": Tag.HOST_INFO,
        "getpass.getuser": Tag.HOST_INFO,
        "os.getlogin": Tag.HOST_INFO,
        "os.uname": Tag.HOST_INFO,
        "platform.node": Tag.HOST_INFO,
        "platform.uname": Tag.HOST_INFO,
        "pyperclip.paste": Tag.CLIPBOARD,
        "pyperclip.copy": Tag.CLIPBOARD,
        "win32clipboard.GetClipboardData": Tag.CLIPBOARD,
        "win32clipboard.SetClipboardText": Tag.CLIPBOARD,
        # a Tk window's clipboard (tkinter clippers, blind14) and win32's raw data call
        "tkinter.Tk().clipboard_get": Tag.CLIPBOARD,
        "tkinter.Tk().clipboard_append": Tag.CLIPBOARD,
        "win32clipboard.SetClipboardData": Tag.CLIPBOARD,
        "os.startfile": Tag.LAUNCH,
        "winreg.SetValueEx": Tag.REGISTRY_WRITE,
        "winreg.SetValue": Tag.REGISTRY_WRITE,
        "_winreg.SetValueEx": Tag.REGISTRY_WRITE,
        "_winreg.SetValue": Tag.REGISTRY_WRITE,
        # the Win32 calls themselves, through ctypes or pywin32 (blind16: b16-ot-advapi32-run-key)
        **{
            f"{owner}.{call}{suffix}": Tag.REGISTRY_WRITE
            for owner in ("ctypes.windll.advapi32", "win32api")
            for call in ("RegSetValueEx", "RegSetKeyValue", "RegSetValue")
            for suffix in ("", "A", "W")
        },
        "mmap.PROT_EXEC": Tag.EXEC_MEMORY,
        "ctypes.windll.kernel32.VirtualAlloc": Tag.EXEC_MEMORY,
        "ctypes.windll.kernel32.VirtualProtect": Tag.EXEC_MEMORY,
        "ctypes.CFUNCTYPE": Tag.NATIVE_CALL,
        "ctypes.WINFUNCTYPE": Tag.NATIVE_CALL,
        "ctypes.PYFUNCTYPE": Tag.NATIVE_CALL,
        "ctypes.windll.kernel32.CreateThread": Tag.NATIVE_CALL,
        # the same in another process: memory allocated executable there, a thread started
        # at it (classic injection into explorer.exe; blind32)
        "ctypes.windll.kernel32.VirtualAllocEx": Tag.EXEC_MEMORY,
        "ctypes.windll.kernel32.VirtualProtectEx": Tag.EXEC_MEMORY,
        "ctypes.windll.kernel32.CreateRemoteThread": Tag.NATIVE_CALL,
        "ctypes.windll.kernel32.CreateRemoteThreadEx": Tag.NATIVE_CALL,
        "ctypes.windll.kernel32.QueueUserAPC": Tag.NATIVE_CALL,
        "ctypes.windll.ntdll.NtCreateThreadEx": Tag.NATIVE_CALL,
        "ctypes.windll.ntdll.RtlCreateUserThread": Tag.NATIVE_CALL,
        # keyloggers and screen grabbers (ESET's 2023 PyPI backdoor took screenshots;
        # Socket's zebo, 2025: pynput keystrokes and ImageGrab screenshots uploaded)
        "pynput.keyboard.Listener": Tag.SURVEILLANCE,
        "keyboard.on_press": Tag.SURVEILLANCE,
        "keyboard.on_release": Tag.SURVEILLANCE,
        "keyboard.hook": Tag.SURVEILLANCE,
        "pyHook.HookManager": Tag.SURVEILLANCE,
        "PIL.ImageGrab.grab": Tag.SURVEILLANCE,
        "pyscreenshot.grab": Tag.SURVEILLANCE,
        "pyautogui.screenshot": Tag.SURVEILLANCE,
        "mss.mss": Tag.SURVEILLANCE,
    }
)


@dataclass(frozen=True, slots=True)
class Chain:
    """A correlated finding to emit: rule, the spelling shown, and its line."""

    rule_id: str
    api: str
    line: int


#: What a file sends to an exfiltration endpoint when it is a stealer.
_COLLECTED = (
    Tag.HOST_INFO,
    Tag.ENV_DUMP,
    Tag.ENV_ITER,
    Tag.CREDENTIAL_FILE,
    Tag.CLIPBOARD,
    Tag.SECRET_ENV,
    Tag.SURVEILLANCE,
)


def correlate(
    tags: Mapping[Tag, tuple[int, str]],
    *,
    setup_py: bool,
    credential_kinds: int = 0,
    secret_names: int = 0,
) -> list[Chain]:
    """The chains ``tags`` (tag -> first line and spelling) complete in one file.

    ``setup_py`` marks an install script: there, network access or
    credential paths are threats on their own (CPL-THR-011), because they
    run with the installing user's rights before anyone has looked.
    ``credential_kinds`` counts the distinct developer credentials named,
    ``secret_names`` the distinct secret-looking variables read.
    """
    chains: list[Chain] = []

    def has(*wanted: Tag) -> bool:
        return all(t in tags for t in wanted)

    def at(rule_id: str, tag: Tag, suffix: str = "") -> None:
        line, api = tags[tag]
        chains.append(Chain(rule_id, api + suffix, line))

    # the whole environment sent somewhere: dumped into a network call, or
    # walked in a file that calls a URL written into the code (a library
    # takes its URLs as parameters). Secrets read by name count only when
    # the data flow sees several of them reach one egress (caplet._scan._sinks):
    # one token per provider, sent to that provider, is how clients authenticate.
    if has(Tag.ENV_DUMP, Tag.EGRESS):
        at("CPL-THR-006", Tag.ENV_DUMP)
    elif has(Tag.ENV_ITER, Tag.FIXED_ENDPOINT):
        at("CPL-THR-006", Tag.ENV_ITER)
    # one credential file is a tool reading its own config; several, sent
    # somewhere, is a stealer
    if (credential_kinds >= 2 and has(Tag.EGRESS)) or (
        has(Tag.CREDENTIAL_FILE, Tag.FIXED_ENDPOINT) and (has(Tag.HOST_INFO) or secret_names >= 1)
    ):
        at("CPL-THR-007", Tag.CREDENTIAL_FILE)
    # keystrokes or screenshots in a file that calls a URL written into it: sent home
    if has(Tag.SURVEILLANCE, Tag.FIXED_ENDPOINT):
        at("CPL-THR-017", Tag.SURVEILLANCE)
    if Tag.EXFIL_ENDPOINT in tags:
        if any(t in tags for t in _COLLECTED):
            at("CPL-THR-004", Tag.EXFIL_ENDPOINT)
        else:
            at("CPL-NET-004", Tag.EXFIL_ENDPOINT)
    # socket + dup2 alone is a daemon or a test; with a shell it is a reverse shell
    if has(Tag.SOCKET, Tag.DUP2) and (has(Tag.SHELL) or has(Tag.PTY_SPAWN)):
        at("CPL-THR-008", Tag.DUP2)
    if Tag.PERSISTENCE_WRITE in tags:
        at("CPL-THR-009", Tag.PERSISTENCE_WRITE)
    elif has(Tag.PERSISTENCE, Tag.REGISTRY_WRITE):
        at("CPL-THR-009", Tag.PERSISTENCE)
    elif Tag.PERSISTENCE in tags:
        at("CPL-PER-001", Tag.PERSISTENCE)
    # download and run is followed by the data flow (caplet._scan._sinks): a
    # file-wide "downloads something, runs something" flagged build scripts
    # a download piped to a shell in text shown to a user is advice; in setup.py
    # or in a command a process call runs (caplet._scan._sinks) it is the payload
    if Tag.DOWNLOAD_EXEC in tags and setup_py:
        at("CPL-THR-015", Tag.DOWNLOAD_EXEC)
    if has(Tag.EXEC_MEMORY, Tag.NATIVE_CALL):
        at("CPL-THR-023", Tag.EXEC_MEMORY)
    if has(Tag.SUBCLASS_WALK, Tag.ESCAPE_TARGET):
        at("CPL-THR-024", Tag.ESCAPE_TARGET)
    if has(Tag.CLIPBOARD, Tag.WALLET_PATTERN):
        at("CPL-THR-014", Tag.WALLET_PATTERN)
    if setup_py:
        if Tag.EGRESS in tags:
            at("CPL-THR-011", Tag.EGRESS, " (network access)")
        if Tag.CREDENTIAL_FILE in tags:
            at("CPL-THR-011", Tag.CREDENTIAL_FILE, " (credential path)")
        if Tag.DOWNLOADER in tags:
            at("CPL-THR-011", Tag.DOWNLOADER, " (a downloader or script host)")
        if Tag.LAUNCH in tags:
            at("CPL-THR-011", Tag.LAUNCH, " (a dropped program)")
        # a custom install command that builds something runs compilers;
        # one that fetches or decodes at install is the typosquat recipe
        if Tag.CUSTOM_INSTALL in tags and any(t in tags for t in (Tag.DECODE, Tag.EGRESS)):
            at(
                "CPL-THR-011",
                Tag.CUSTOM_INSTALL,
                " (a custom install command that reaches the network or decodes data)",
            )
    return chains
