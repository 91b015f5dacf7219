"""Code and text rules of the scanner, one family at a time (scan_source)."""

from __future__ import annotations

import base64
import textwrap
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from caplet._capabilities._model import (
    Capability,
    CapabilityKind,
    EnvReadCapability,
    FsCapability,
    NetHttpCapability,
    ProcExecCapability,
)
from caplet._findings import Finding, Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source, scan_tree

GIT = ProcExecCapability(program="git", declared="proc.exec:git")
TOKEN = EnvReadCapability(name="TOKEN", declared="env.read:TOKEN")
READ_DATA = FsCapability(kind=CapabilityKind.FS_READ, path="/data", declared="fs.read:/data")
WRITE_OUT = FsCapability(kind=CapabilityKind.FS_WRITE, path="/out", declared="fs.write:/out")
READ_ETC = FsCapability(kind=CapabilityKind.FS_READ, path="/etc/app", declared="fs.read:/etc/app")
HTTP = NetHttpCapability(
    scheme="https", host="example.org", port=443, path_prefix="", declared="net.http:x"
)
EVERYTHING: tuple[Capability, ...] = (GIT, TOKEN, READ_DATA, WRITE_OUT, HTTP)


def scan(
    source: str, capabilities: Sequence[Capability] = (), local_modules: Collection[str] = ()
) -> list[Finding]:
    return scan_source(
        textwrap.dedent(source), "plugin.py", capabilities, local_modules=local_modules
    )


def only(findings: list[Finding], rule_id: str) -> Finding:
    matching = [f for f in findings if f.rule_id == rule_id]
    assert len(matching) == 1, findings
    return matching[0]


def rule_ids(findings: list[Finding]) -> set[str]:
    return {f.rule_id for f in findings}


# -- process execution ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "api"),
    [
        ("import subprocess\nsubprocess.run(['ls'])", "subprocess.run"),
        ("import subprocess\nsubprocess.call(['ls'])", "subprocess.call"),
        ("import subprocess\nsubprocess.check_call(['ls'])", "subprocess.check_call"),
        ("import subprocess\nsubprocess.check_output(['ls'])", "subprocess.check_output"),
        ("import subprocess\nsubprocess.Popen(['ls'])", "subprocess.Popen"),
        ("import subprocess\nsubprocess.getoutput('ls')", "subprocess.getoutput"),
        ("import subprocess\nsubprocess.getstatusoutput('ls')", "subprocess.getstatusoutput"),
        ("import os\nos.system('ls')", "os.system"),
        ("import os\nos.popen('ls')", "os.popen"),
        ("import os\nos.execv('/bin/ls', ['ls'])", "os.execv"),
        ("import os\nos.execlp('ls', 'ls')", "os.execlp"),
        ("import os\nos.spawnl(os.P_WAIT, '/bin/ls', 'ls')", "os.spawnl"),
        ("import os\nos.posix_spawn('/bin/ls', ['ls'], {})", "os.posix_spawn"),
        ("import os\nos.fork()", "os.fork"),
        ("import pty\npty.spawn('sh')", "pty.spawn"),
        # aliases
        ("import subprocess as sp\nsp.Popen(['ls'])", "subprocess.Popen"),
        ("from os import system\nsystem('ls')", "os.system"),
        ("from subprocess import run as r\nr(['ls'])", "subprocess.run"),
        ("import os\ngetattr(os, 'system')('ls')", "os.system"),
        ("import os\nf = getattr(os, 'sys' + 'tem')", "os.system"),
        ("__import__('os').system('ls')", "os.system"),
        ("import os\nrunner = os.system\nrunner('ls')", "os.system"),
        ("import subprocess\nsp = subprocess\nsp.run(['ls'])", "subprocess.run"),
        ("def f():\n    return sp.run(['ls'])\nimport subprocess as sp", "subprocess.run"),
        ("from os import *\nsystem('ls')", "os.system"),
    ],
)
def test_process_execution_is_danger(source: str, api: str) -> None:
    # `runner = os.system; runner("ls")` reports both the alias and the call.
    findings = [f for f in scan(source) if f.rule_id == "CPL-PROC-001"]
    assert findings
    for finding in findings:
        assert finding.severity is Severity.DANGER
        assert f"{api} executes a program" in finding.message
        assert "declare proc.exec:<program>" in finding.message
        assert not finding.covered


@pytest.mark.parametrize(
    "source",
    [
        "import os\n# os.system('ls')\n",
        "import os\nx = \"os.system('ls')\"\n",
        'import os\ndef f():\n    """Never call os.system("ls")."""\n',
        "def system(cmd):\n    return cmd\nsystem('ls')\n",
        "import os\nos.path.join('a', 'b')\n",
        "import json\njson.run(['ls'])\n",
        "class Runner:\n    def run(self): ...\nRunner().run()\n",
    ],
)
def test_process_negatives(source: str) -> None:
    assert "CPL-PROC-001" not in rule_ids(scan(source))


def test_process_import_is_a_warning_and_info_when_covered() -> None:
    both = [f for f in scan("import subprocess\nimport pty\n") if f.rule_id == "CPL-PROC-002"]
    assert [(f.line, f.severity) for f in both] == [(1, Severity.WARNING), (2, Severity.WARNING)]
    covered = only(scan("import subprocess\n", [GIT]), "CPL-PROC-002")
    assert (covered.severity, covered.covered) == (Severity.INFO, True)


def test_process_covered_by_the_named_program_only() -> None:
    covered = only(
        scan("import subprocess\nsubprocess.run(['git', 'status'])", [GIT]), "CPL-PROC-001"
    )
    assert (covered.severity, covered.covered) == (Severity.WARNING, True)
    assert covered.capability == "proc.exec:git"
    assert "(covered by proc.exec:git)" in covered.message

    other = only(scan("import subprocess\nsubprocess.run(['curl', 'x'])", [GIT]), "CPL-PROC-001")
    assert (other.severity, other.covered) == (Severity.DANGER, False)
    assert other.capability == "proc.exec:curl"

    shell = only(scan("import os\nos.system('git status')", [GIT]), "CPL-PROC-001")
    assert shell.covered
    absolute = only(scan("import os\nos.execv('/usr/bin/git', ['git'])", [GIT]), "CPL-PROC-001")
    assert absolute.covered


def test_process_with_unknown_program_is_covered_by_any_proc_exec() -> None:
    finding = only(scan("import subprocess\nsubprocess.run(cmd)", [GIT]), "CPL-PROC-001")
    assert (finding.severity, finding.capability) == (Severity.WARNING, "proc.exec")
    bare = only(scan("import subprocess\nsubprocess.run(cmd)"), "CPL-PROC-001")
    assert (bare.severity, bare.capability) == (Severity.DANGER, "proc.exec")


def test_templated_capability_covers_its_kind_but_no_literal() -> None:
    tool = ProcExecCapability(program="${config.tool}", declared="x", templated=True)
    configured = only(scan("import subprocess\nsubprocess.run(cmd)", [tool]), "CPL-PROC-001")
    assert configured.severity is Severity.WARNING
    literal = only(scan("import subprocess\nsubprocess.run(['curl'])", [tool]), "CPL-PROC-001")
    assert literal.severity is Severity.DANGER
    root = FsCapability(
        kind=CapabilityKind.FS_READ, path="${config.root}", declared="x", templated=True
    )
    (read,) = scan("open(path).read()", [root])
    assert read.covered
    assert read.severity is Severity.INFO
    assert any(not f.covered for f in scan("open('/etc/shadow').read()", [root]))


# -- dynamic code ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "rule_id", "api"),
    [
        ("eval('1')", "CPL-DYN-001", "eval"),
        ("exec('x = 1')", "CPL-DYN-001", "exec"),
        ("compile('1', 'f', 'eval')", "CPL-DYN-001", "compile"),
        ("import builtins\nbuiltins.eval('1')", "CPL-DYN-001", "eval"),
        ("import builtins\nbuiltins.__dict__['eval']('1')", "CPL-DYN-001", "eval"),
        ("import builtins\nvars(builtins)['ev' + 'al']('1')", "CPL-DYN-001", "eval"),
        ("__import__('json')", "CPL-DYN-002", "__import__"),
        ("import importlib\nimportlib.import_module('json')", "CPL-DYN-002", "import_module"),
        ("from importlib import import_module\nimport_module(n)", "CPL-DYN-002", "import_module"),
        ("import marshal\nmarshal.loads(b'')", "CPL-DYN-003", "marshal.loads"),
        ("import pickle\npickle.loads(b'')", "CPL-DYN-003", "pickle.loads"),
        ("import pickle\npickle.load(f)", "CPL-DYN-003", "pickle.load"),
        ("from pickle import loads\nloads(b'')", "CPL-DYN-003", "pickle.loads"),
        ("import types\ntypes.CodeType(0)", "CPL-DYN-004", "types.CodeType"),
        # Loaders and hooks that take code from files the scan does not read as
        # modules (a zip on sys.path ran `import ctypes` past the gate).
        ("import zipimport\nzipimport.zipimporter('x.zip')", "CPL-DYN-002", "zipimporter"),
        ("from zipimport import zipimporter\nzipimporter(p)", "CPL-DYN-002", "zipimporter"),
        ("import sys, zipimport\nsys.path_hooks.append(h)", "CPL-DYN-002", "sys.path_hooks"),
        ("import sys\nsys.meta_path.insert(0, finder)", "CPL-DYN-002", "sys.meta_path"),
        (
            "import importlib.util\nimportlib.util.spec_from_file_location('m', 'a.txt')",
            "CPL-DYN-002",
            "spec_from_file_location",
        ),
        (
            "from importlib.machinery import SourceFileLoader\nSourceFileLoader('m', 'a.txt')",
            "CPL-DYN-002",
            "SourceFileLoader",
        ),
    ],
)
def test_dynamic_code_is_danger_even_with_every_capability(
    source: str, rule_id: str, api: str
) -> None:
    finding = only(scan(source, EVERYTHING), rule_id)
    assert (finding.severity, finding.covered, finding.capability) == (Severity.DANGER, False, None)
    assert api in finding.message
    assert "no capability allows this" in finding.message


@pytest.mark.parametrize(
    "source",
    [
        "from re import compile\ncompile('a+')",
        "import re\nre.compile('a+')",
        "import ast\nast.literal_eval('1')",
        "model.compile()\nself.eval()",
        "def eval(x):\n    return x\n",
        "text = 'eval(1)'  # eval(2)",
    ],
)
def test_dynamic_code_negatives(source: str) -> None:
    assert not {f.rule_id for f in scan(source) if f.rule_id.startswith("CPL-DYN")}


def test_literal_dynamic_import_counts_as_an_import() -> None:
    findings = scan("import importlib\nimportlib.import_module('subprocess')")
    assert {"CPL-DYN-002", "CPL-PROC-002"} <= rule_ids(findings)
    assert "CPL-NET-001" in rule_ids(scan("__import__('socket')"))


# -- native code -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import ctypes", "ctypes"),
        ("from ctypes import CDLL", "ctypes"),
        ("import ctypes.util", "ctypes"),
        ("import cffi", "cffi"),
    ],
)
def test_native_imports_are_danger(source: str, module: str) -> None:
    finding = only(scan(source, EVERYTHING), "CPL-NAT-001")
    assert finding.severity is Severity.DANGER
    assert f"import of {module}" in finding.message


def test_native_negative() -> None:
    assert "CPL-NAT-001" not in rule_ids(scan("import ctypesgen_helpers as c\nx = 'ctypes'"))


# -- introspection ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "rule_id", "api"),
    [
        ("().__class__.__base__.__subclasses__()", "CPL-INTRO-001", "__subclasses__"),
        ("f.__globals__['x']", "CPL-INTRO-001", "__globals__"),
        ("__builtins__", "CPL-INTRO-001", "__builtins__"),
        ("m.__builtins__", "CPL-INTRO-001", "__builtins__"),
        ("f.__code__", "CPL-INTRO-001", "__code__"),
        ("f.__closure__", "CPL-INTRO-001", "__closure__"),
        ("frame.f_back", "CPL-INTRO-001", "f_back"),
        ("frame.f_globals", "CPL-INTRO-001", "f_globals"),
        ("gen.gi_frame", "CPL-INTRO-001", "gi_frame"),
        ("getattr(f, '__glob' + 'als__')", "CPL-INTRO-001", "__globals__"),
        ("import sys\nsys._getframe(1)", "CPL-INTRO-002", "sys._getframe"),
        ("import gc\ngc.get_referrers(x)", "CPL-INTRO-002", "gc.get_referrers"),
        ("import gc\ngc.get_objects()", "CPL-INTRO-002", "gc.get_objects"),
    ],
)
def test_introspection_escapes_are_danger(source: str, rule_id: str, api: str) -> None:
    finding = only(scan(source, EVERYTHING), rule_id)
    assert (finding.severity, finding.covered) == (Severity.DANGER, False)
    assert api in finding.message


@pytest.mark.parametrize(
    "source",
    ["obj.__class__.__name__", "obj.__dict__", "x = '__globals__'", "import gc\ngc.collect()"],
)
def test_introspection_negatives(source: str) -> None:
    assert not {f.rule_id for f in scan(source) if f.rule_id.startswith("CPL-INTRO")}


# -- global mutation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "api"),
    [
        ("import builtins\nbuiltins.open = fake", "builtins.open = ..."),
        ("import builtins\nsetattr(builtins, 'open', fake)", "setattr(builtins, 'open')"),
        ("import builtins\nbuiltins.__dict__['open'] = fake", "builtins.__dict__[...] = ..."),
        ("import sys\nsys.modules['os'] = fake", "sys.modules[...] = ..."),
        ("import sys\ndel sys.modules['os']", "sys.modules[...] = ..."),
        ("import sys\nsys.modules['json'].dumps = fake", "sys.modules[...].dumps = ..."),
        ("import sys\nsys.meta_path.insert(0, Finder())", "sys.meta_path.insert"),
        ("import sys\nsys.path_hooks.append(hook)", "sys.path_hooks.append"),
        ("import sys\nsys.meta_path = []", "sys.meta_path = ..."),
        ("import os\nos.system = fake", "os.system = ..."),
        ("import socket as s\ns.socket = Fake", "socket.socket = ..."),
    ],
)
def test_global_mutation_is_danger(source: str, api: str) -> None:
    finding = only(scan(source, EVERYTHING), "CPL-GLOB-001")
    assert (finding.severity, finding.covered) == (Severity.DANGER, False)
    assert api in finding.message


@pytest.mark.parametrize(
    "source",
    [
        "self.value = 1",
        "config.value = 2",
        "import sys\nsys.argv = ['x']",
        "import sys\nsys.path.insert(0, here)",
        "import helpers\nhelpers.DEBUG = True",
        "import sys\nx = sys.modules['os']",
        "import sys\nsys.meta_path.index(finder)",
    ],
)
def test_global_mutation_negatives(source: str) -> None:
    assert "CPL-GLOB-001" not in rule_ids(scan(source, local_modules={"helpers"}))


# -- network ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import socket", "socket"),
        ("import ssl", "ssl"),
        ("import urllib.request", "urllib.request"),
        ("from urllib import request", "urllib.request"),
        ("from urllib.request import urlopen", "urllib.request"),
        ("import http.client", "http.client"),
        ("import requests", "requests"),
        ("import httpx", "httpx"),
        ("import aiohttp", "aiohttp"),
        ("import urllib3", "urllib3"),
        ("import websockets", "websockets"),
        ("import smtplib", "smtplib"),
        ("import ftplib", "ftplib"),
        ("import telnetlib", "telnetlib"),
        ("import urllib\nurllib.request.urlopen(u)", "urllib.request"),
    ],
)
def test_network_imports_are_danger_whatever_is_declared(source: str, module: str) -> None:
    finding = only(scan(source, EVERYTHING), "CPL-NET-001")
    assert (finding.severity, finding.covered, finding.capability) == (Severity.DANGER, False, None)
    assert f"import of {module}" in finding.message
    assert "use ctx.http (brokered) instead" in finding.message


@pytest.mark.parametrize(
    "source",
    [
        "import asyncio\nasyncio.open_connection('h', 1)",
        "from asyncio import open_connection\nopen_connection('h', 1)",
    ],
)
def test_raw_streams_are_danger(source: str) -> None:
    finding = only(scan(source, EVERYTHING), "CPL-NET-002")
    assert "asyncio.open_connection opens a raw network stream" in finding.message
    assert "use ctx.http (brokered) instead" in finding.message


@pytest.mark.parametrize(
    "source", ["import urllib.parse", "import http.cookies", "import json", "x = 'import socket'"]
)
def test_network_negatives(source: str) -> None:
    assert not {f.rule_id for f in scan(source) if f.rule_id.startswith("CPL-NET")}


# -- filesystem ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        "open(p, 'w')",
        "open(p, 'a')",
        "open(p, 'x')",
        "open(p, 'r+')",
        "open(p, 'wb')",
        "open(p, mode='w')",
        "open(p, m)",
        "import io\nio.open(p, 'w')",
        "import os\nos.open(p, os.O_WRONLY | os.O_CREAT)",
    ],
)
def test_open_for_writing_needs_fs_write(call: str) -> None:
    bare = only(scan(call), "CPL-FS-001")
    assert (bare.severity, bare.capability) == (Severity.WARNING, "fs.write")
    assert "declare fs.write:<directory>" in bare.message
    assert only(scan(call, [READ_DATA]), "CPL-FS-001").severity is Severity.WARNING
    covered = only(scan(call, [WRITE_OUT]), "CPL-FS-001")
    assert (covered.severity, covered.covered) == (Severity.INFO, True)


@pytest.mark.parametrize(
    "call",
    ["open(p)", "open(p, 'rb')", "import os\nos.open(p, os.O_RDONLY)", "path.read_text()"],
)
def test_reading_is_info_behind_any_fs_capability(call: str) -> None:
    bare = only(scan(call), "CPL-FS-002")
    assert (bare.severity, bare.capability) == (Severity.WARNING, "fs.read")
    for caps in ([READ_DATA], [WRITE_OUT]):
        covered = only(scan(call, caps), "CPL-FS-002")
        assert (covered.severity, covered.covered) == (Severity.INFO, True)


@pytest.mark.parametrize(
    ("call", "api"),
    [
        ("import os\nos.remove(p)", "os.remove"),
        ("import os\nos.unlink(p)", "os.unlink"),
        ("import os\nos.rmdir(p)", "os.rmdir"),
        ("import os\nos.rename(a, b)", "os.rename"),
        ("import os\nos.replace(a, b)", "os.replace"),
        ("import os\nos.makedirs(p)", "os.makedirs"),
        ("import os\nos.mkdir(p)", "os.mkdir"),
        ("import os\nos.chmod(p, 0o777)", "os.chmod"),
        ("import os\nos.chown(p, 0, 0)", "os.chown"),
        ("import shutil\nshutil.rmtree(p)", "shutil.rmtree"),
        ("import shutil\nshutil.copy2(a, b)", "shutil.copy2"),
        ("import shutil\nshutil.move(a, b)", "shutil.move"),
        ("Path(p).write_text('x')", ".write_text()"),
        ("Path(p).write_bytes(b'x')", ".write_bytes()"),
        ("p.unlink()", ".unlink()"),
        ("p.rmdir()", ".rmdir()"),
        ("p.mkdir(parents=True)", ".mkdir()"),
        ("p.touch()", ".touch()"),
        ("p.rename(q)", ".rename()"),
    ],
)
def test_file_changes_need_fs_write(call: str, api: str) -> None:
    bare = only(scan(call), "CPL-FS-003")
    assert bare.severity is Severity.WARNING
    assert f"{api} creates, changes or deletes files" in bare.message
    covered = only(scan(call, [WRITE_OUT]), "CPL-FS-003")
    assert (covered.severity, covered.covered, covered.capability) == (
        Severity.INFO,
        True,
        "fs.write",
    )


@pytest.mark.parametrize(
    "literal",
    [
        "/etc/passwd",
        "/etc",
        "/proc/self/environ",
        "/root/.bashrc",
        "/home/alice/notes",
        "~/.ssh/id_rsa",
        "~/.aws/credentials",
        "keys/.ssh/id_ed25519",
    ],
)
def test_sensitive_path_literals_are_warnings(literal: str) -> None:
    finding = only(scan(f"x = {literal!r}", [READ_DATA]), "CPL-FS-004")
    assert (finding.severity, finding.covered) == (Severity.WARNING, False)
    assert repr(literal) in finding.message


def test_sensitive_path_is_covered_only_by_a_prefix_capability() -> None:
    covered = only(scan("x = '/etc/app/config.toml'", [READ_ETC]), "CPL-FS-004")
    assert (covered.severity, covered.covered) == (Severity.INFO, True)
    sibling = only(scan("x = '/etc/apparmor.d/x'", [READ_ETC]), "CPL-FS-004")
    assert sibling.severity is Severity.WARNING
    globbed = FsCapability(
        kind=CapabilityKind.FS_WRITE, path="/etc/app/*.log", declared="x", is_glob=True
    )
    assert only(scan("x = '/etc/app/a.log'", [globbed]), "CPL-FS-004").covered


def test_sensitive_path_in_fstring_part() -> None:
    assert "CPL-FS-004" in rule_ids(scan("x = f'/home/{user}/.bashrc'"))


@pytest.mark.parametrize(
    "source", ["x = '/tmp/work'", "x = 'notes.md'", "x = '/v1/items'", "# open('/etc/passwd')"]
)
def test_filesystem_negatives(source: str) -> None:
    assert not {f.rule_id for f in scan(source) if f.rule_id.startswith("CPL-FS")}


def test_an_undeclared_absolute_path_is_reported_and_a_declared_one_covered() -> None:
    bare = only(scan("x = '/data/file'"), "CPL-FS-005")
    assert (bare.severity, bare.covered) == (Severity.WARNING, False)
    assert "declare fs.read or fs.write for the directory" in bare.message
    covered = FsCapability(kind=CapabilityKind.FS_READ, path="/data", declared="fs.read:/data")
    assert only(scan("x = '/data/file'", [covered]), "CPL-FS-005").severity is Severity.INFO


# -- environment -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ['TOKEN']",
        "import os\nos.environ.get('TOKEN')",
        "import os\nos.getenv('TOKEN')",
        "import os\nos.getenv(key='TOKEN')",
        "from os import environ\nenviron['TOKEN']",
        "from os import getenv\ngetenv('TOKEN', 'default')",
        "import os\n'TOKEN' in os.environ",
        "import os\nos.environb[b'TOKEN']",
        "import os\nos.environ['TO' + 'KEN']",
    ],
)
def test_env_read_token_covers_exactly_token(source: str) -> None:
    bare = only(scan(source), "CPL-ENV-001")
    assert (bare.severity, bare.capability) == (Severity.DANGER, "env.read:TOKEN")
    assert "declare env.read:<NAME>" in bare.message
    assert "'TOKEN'" in bare.message
    covered = only(scan(source, [TOKEN]), "CPL-ENV-001")
    assert (covered.severity, covered.covered) == (Severity.INFO, True)
    assert "(covered by env.read:TOKEN)" in covered.message
    other = only(scan(source.replace("TO", "OT"), [TOKEN]), "CPL-ENV-001")
    assert (other.severity, other.covered, other.capability) == (
        Severity.DANGER,
        False,
        "env.read:OTKEN",
    )


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ[name]",
        "import os\nos.getenv(name)",
        "import os\ndict(os.environ)",
        "import os\nfor k in os.environ:\n    pass",
        "import os\nos.environ.copy()",
        "import os\nos.putenv(name, v)",
    ],
)
def test_env_with_a_non_literal_name(source: str) -> None:
    bare = only(scan(source), "CPL-ENV-002")
    assert (bare.severity, bare.capability) == (Severity.DANGER, "env.read")
    some = only(scan(source, [TOKEN]), "CPL-ENV-002")
    assert (some.severity, some.covered) == (Severity.WARNING, True)


def test_environment_negatives() -> None:
    assert not {
        f.rule_id
        for f in scan("environ = {}\nenviron['TOKEN']\nx = 'os.environ'\n# os.getenv('A')")
        if f.rule_id.startswith("CPL-ENV")
    }


# -- obfuscation -----------------------------------------------------------------------

BLOB = base64.b64encode(bytes(range(256))).decode()  # 344 characters


@pytest.mark.parametrize(
    "literal",
    [
        BLOB,
        bytes(range(120)).hex(),
        "\n".join(BLOB[i : i + 76] for i in range(0, len(BLOB), 76)),
    ],
)
def test_long_encoded_strings_are_warnings(literal: str) -> None:
    finding = only(scan(f"x = {literal!r}"), "CPL-OBF-001")
    assert finding.severity is Severity.WARNING
    assert "looks like an encoded blob (base64 or hex)" in finding.message


def test_bytes_blob_is_a_warning() -> None:
    assert "CPL-OBF-001" in rule_ids(scan(f"x = {BLOB.encode()!r}"))


@pytest.mark.parametrize(
    "literal",
    [
        BLOB[:199],
        "=" * 300,
        "1" * 300,
        "the quick brown fox jumps over the lazy dog " * 10,
    ],
)
def test_encoded_blob_negatives(literal: str) -> None:
    assert "CPL-OBF-001" not in rule_ids(scan(f"x = {literal!r}"))


@pytest.mark.parametrize(
    "source",
    [
        "s = ''.join(chr(c) for c in codes)",
        "s = ''.join([chr(c) for c in codes])",
        "s = ''.join(map(chr, codes))",
        "s = {chr(c ^ 42) for c in codes}",
    ],
)
def test_chr_joins_are_warnings(source: str) -> None:
    finding = only(scan(source), "CPL-OBF-002")
    assert finding.severity is Severity.WARNING
    assert "builds a string character by character" in finding.message


@pytest.mark.parametrize("source", ["x = chr(65)", "codes = [ord(c) for c in s]"])
def test_chr_negatives(source: str) -> None:
    assert "CPL-OBF-002" not in rule_ids(scan(source))


def test_lines_longer_than_1000_characters() -> None:
    long_line = "x = [" + "1, " * 400 + "]"
    finding = only(scan(f"a = 1\n{long_line}\n"), "CPL-OBF-003")
    assert (finding.line, finding.column, finding.severity) == (2, 1, Severity.WARNING)
    assert f"line 2 ({len(long_line)} characters)" in finding.message
    assert "CPL-OBF-003" not in rule_ids(scan("x = '" + "a" * 994 + "'"))  # exactly 1000


# -- supply chain ----------------------------------------------------------------------


def test_third_party_imports_are_supply_chain_warnings() -> None:
    findings = scan("import yaml\nfrom numpy import array\n")
    assert [(f.rule_id, f.line, f.severity) for f in findings] == [
        ("CPL-SUP-001", 1, Severity.WARNING),
        ("CPL-SUP-001", 2, Severity.WARNING),
    ]
    assert "third-party import yaml (supply chain" in findings[0].message


@pytest.mark.parametrize(
    "source",
    [
        "import json, os.path, collections.abc",
        "from __future__ import annotations",
        "import caplet",
        "from caplet.api import Context",
        "from . import helpers",
        "from .helpers import x",
        "import helpers",
    ],
)
def test_supply_chain_negatives(source: str) -> None:
    assert "CPL-SUP-001" not in rule_ids(scan(source, local_modules={"helpers"}))


# -- finding fields --------------------------------------------------------------------


def test_position_excerpt_and_file() -> None:
    finding = only(scan("import os\n\nif x:\n    os.system('ls')  # run it\n"), "CPL-PROC-001")
    assert (finding.file, finding.line, finding.column) == ("plugin.py", 4, 5)
    assert finding.excerpt == "os.system('ls')  # run it"


def test_column_counts_characters_not_utf8_bytes() -> None:
    line = "x = 'ééé'; os.system('ls')"
    finding = only(scan(f"import os\n{line}\n"), "CPL-PROC-001")
    assert finding.column == line.index("os.system") + 1


def test_long_excerpt_is_truncated_to_120_characters() -> None:
    line = "os.system('ls')  # " + "x" * 300
    finding = only(scan(f"import os\n{line}\n"), "CPL-PROC-001")
    assert len(finding.excerpt) == 120
    assert finding.excerpt.endswith("…")
    assert finding.excerpt.startswith("os.system('ls')")


def test_line_numbers_ignore_form_feeds_and_unicode_separators() -> None:
    # str.splitlines() would count \f and \u2028 as line breaks; Python does not.
    finding = only(scan("x = 1\f\ny = '\u2028'\nimport os\nos.system('ls')\n"), "CPL-PROC-001")
    assert finding.line == 4
    assert finding.excerpt == "os.system('ls')"


def test_identical_findings_are_deduplicated() -> None:
    source = "import os as x\nimport os as x\nx.system('ls')\n"
    assert len([f for f in scan(source) if f.rule_id == "CPL-PROC-001"]) == 1
    two = scan("import os\nos.system('a'); os.system('b')\n")
    assert [f.column for f in two if f.rule_id == "CPL-PROC-001"] == [1, 17]


def test_findings_are_sorted() -> None:
    source = "import yaml\nimport os\nopen(p)\nos.system('ls')\neval('1')\n"
    findings = scan(source)
    assert findings == sorted(findings, key=Finding.sort_key)
    assert [(f.severity, f.line) for f in findings] == [
        (Severity.DANGER, 4),
        (Severity.DANGER, 5),
        (Severity.WARNING, 1),
        (Severity.WARNING, 3),
    ]


def test_invalid_escape_warnings_do_not_escape_the_scan() -> None:
    # filterwarnings=error would turn the parser's warning into an exception.
    assert scan("x = '\\d'\n") == []


@pytest.mark.parametrize(
    ("source", "rule_id"),
    [
        # A module's own imports are its attributes: each of these passed the gate.
        ("import shutil\nshutil.os.system('id')", "CPL-PROC-001"),
        ("import tempfile\ntempfile._os.system('id')", "CPL-PROC-001"),
        ("import logging\nlogging.os.popen('id')", "CPL-PROC-001"),
        ("import platform\nplatform.subprocess.run(['id'])", "CPL-PROC-001"),
        ("import importlib\nimportlib.sys.modules['os'].system('id')", "CPL-PROC-001"),
        ("import json\njson.decoder.sys.modules['subprocess'].run(['id'])", "CPL-PROC-001"),
        ("import email.utils as u\nu.os.system('id')", "CPL-PROC-001"),
        ("import numpy\nnumpy.ctypeslib.ctypes.CDLL(None)", "CPL-NAT-001"),
        ("import numpy.ctypeslib as c\nc.load_library('x', '.')", "CPL-NAT-001"),
        ("import asyncio\nasyncio.subprocess.create_subprocess_exec('id')", "CPL-PROC-001"),
        # Standard-library functions that run a program for you.
        ("import pydoc\npydoc.pipepager('x', 'sh')", "CPL-PROC-001"),
        ("import webbrowser\nwebbrowser.open('file:///')", "CPL-PROC-001"),
        ("import multiprocessing\nmultiprocessing.Process(target=print).start()", "CPL-PROC-001"),
        ("import concurrent.futures as f\nf.ProcessPoolExecutor()", "CPL-PROC-001"),
    ],
)
def test_a_module_reached_through_another_module_is_still_that_module(
    source: str, rule_id: str
) -> None:
    finding = only(scan(source), rule_id)
    assert finding.severity is Severity.DANGER


@pytest.mark.parametrize(
    "source",
    [
        "import json\njson.decoder.JSONDecodeError",
        "import urllib.error\ntry:\n    pass\nexcept urllib.error.HTTPError as e:\n    e.code",
        "def f(self):\n    return self.os.system('id')\n",  # not a module this file imports
        "import logging\nlogging.os.path.join('a', 'b')",
    ],
)
def test_attributes_that_only_share_a_modules_name_are_not_that_module(source: str) -> None:
    assert not [f for f in scan(source) if f.rule_id in {"CPL-PROC-001", "CPL-DYN-001"}]


@pytest.mark.parametrize(
    "source",
    [
        # A module handed on as a value: what is called on it is not in the code.
        "import os\ndef run(name):\n    return getattr(os, name)('id')\n",
        "import os\nfor n in ['system']:\n    getattr(os, n)('id')\n",
        "import functools, os\nfunctools.reduce(getattr, ['system'], os)('id')",
        "import operator, os\noperator.methodcaller('system', 'id')(os)",
        "import os\ndef g():\n    return os\ng().system('id')\n",
        "import os\nx = [os]\nx[0].system('id')",
        "import os\nx = (lambda: os)()\nx.system('id')",
        "import os, types\ntypes.SimpleNamespace(o=os).o.system('id')",
        "import ctypes\nstore(lib=ctypes)",
        "import shutil\nhelper(shutil.os)",
        "import posix\nrun(posix)",
    ],
)
def test_a_sensitive_module_used_as_a_value_is_danger(source: str) -> None:
    finding = only(scan(source), "CPL-DYN-006")
    assert finding.severity is Severity.DANGER
    assert "what is called on it cannot be read from the code" in finding.message


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.getcwd()",
        "import os\nm = os\nm.getcwd()",
        "import os\ngetattr(os, 'getcwd')()",
        "import os\ngetattr(os, 'O_BINARY', 0)",
        "import os\nhasattr(os, 'fork')",
        "import os, sys\nprint(os, file=sys.stderr)",
        "import os\nif mod is os:\n    pass",
        "import sys\nisinstance(sys, type(sys))",
        "import json\nfrom . import rules\nrules.code",
        "def f(os):\n    return g(os)\n",
    ],
)
def test_modules_used_only_in_ways_the_rules_read_are_not_opaque(source: str) -> None:
    assert [f for f in scan(source) if f.rule_id == "CPL-DYN-006"] == []


def test_opaque_modules_are_only_observed_in_package_mode(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("import os\ndef run(n):\n    return getattr(os, n)()\n")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert all(f.severity is not Severity.DANGER for f in report.findings)


@pytest.mark.parametrize(
    ("source", "rule_id"),
    [
        ("import sh\nsh.ls()", "CPL-PROC-001"),
        ("from plumbum import local\nlocal['ls']()", "CPL-PROC-001"),
        ("import pexpect\npexpect.spawn('sh')", "CPL-PROC-001"),
        ("import invoke", "CPL-PROC-001"),
        ("import numba", "CPL-NAT-001"),
        ("import pyximport\npyximport.install()", "CPL-NAT-001"),
    ],
)
def test_third_party_program_runners_and_compilers_are_not_only_a_supply_chain_warning(
    source: str, rule_id: str
) -> None:
    assert only(scan(source), rule_id).severity is Severity.DANGER


def test_modules_that_only_start_like_a_program_runner_are_not_one() -> None:
    assert not [
        f for f in scan("import shlex, shutil\nshlex.split('a b')") if f.rule_id == "CPL-PROC-001"
    ]
