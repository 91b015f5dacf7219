"""``import host.<module>`` inside a guest: the finder, the proxies and their errors.

Run in this process with a recording transport; the same code answering a
real host is tested through ``PluginHost.exec`` (tests/_host/test_guest.py).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import pytest

from caplet._sandbox._guest_modules import HostModules, install
from caplet._sandbox._guest_wire import HostFunction, HostModule
from caplet._sandbox._protocol import ContextOp, WireValue

MODULES = (
    HostModule(
        "fsread",
        "fs-read",
        "Read files under a base directory.",
        (HostFunction("read_file", "Read a text file."), HostFunction("list_dir")),
    ),
)
UNAVAILABLE = {"fswrite": "plugin 'fs-write' declares it but is not enabled"}


class Recorder:
    """A ContextTransport that records requests and answers with their arguments."""

    def __init__(self) -> None:
        self.requests: list[tuple[ContextOp, dict[str, WireValue]]] = []

    @property
    def in_call(self) -> bool:
        return True

    def request(self, op: ContextOp, args: dict[str, WireValue]) -> WireValue:
        self.requests.append((op, args))
        return ["answer", args["args"]]


@pytest.fixture
def transport() -> Iterator[Recorder]:
    recorder = Recorder()
    saved_path = list(sys.meta_path)
    install(HostModules(recorder, MODULES, UNAVAILABLE))
    try:
        yield recorder
    finally:
        sys.meta_path[:] = saved_path
        for name in [n for n in sys.modules if n == "host" or n.startswith("host.")]:
            del sys.modules[name]


def test_a_declared_function_is_one_guest_call_request(transport: Recorder) -> None:
    fsread = importlib.import_module("host.fsread")
    assert fsread.read_file("notes.md", limit=3) == ["answer", ["notes.md"]]
    assert transport.requests == [
        (
            ContextOp.GUEST_CALL,
            {
                "module": "fsread",
                "function": "read_file",
                "args": ["notes.md"],
                "kwargs": {"limit": 3},
            },
        )
    ]
    assert fsread.read_file.__doc__.startswith("Read a text file.\n\n")
    assert fsread.__all__ == ["read_file", "list_dir"]
    assert fsread.__doc__ == "Read files under a base directory."


def test_the_package_gives_its_modules_as_attributes(transport: Recorder) -> None:
    host = importlib.import_module("host")
    assert host.fsread.list_dir() == ["answer", []]
    assert dir(host) == ["fsread"]
    with pytest.raises(AttributeError, match="no plugin declares a module 'fsreed'"):
        host.fsreed  # noqa: B018


def test_an_undeclared_function_names_what_is_declared(transport: Recorder) -> None:
    fsread = importlib.import_module("host.fsread")
    with pytest.raises(AttributeError) as info:
        fsread.write_file("x")
    assert str(info.value) == (
        "module 'host.fsread' has no function 'write_file'; plugin 'fs-read' declares: "
        "read_file, list_dir"
    )
    with pytest.raises(AttributeError, match=r"'read_fil' \(did you mean 'read_file'\?\)"):
        fsread.read_fil  # noqa: B018
    assert not hasattr(fsread, "delete")
    assert transport.requests == []


def test_a_module_of_a_plugin_that_is_not_enabled_says_so(transport: Recorder) -> None:
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("host.fswrite")
    assert str(info.value) == (
        "No module named 'host.fswrite': plugin 'fs-write' declares it but is not enabled; "
        "importable host modules: fsread"
    )
    assert info.value.name == "host.fswrite"


def test_an_unknown_module_gets_a_suggestion(transport: Recorder) -> None:
    with pytest.raises(ModuleNotFoundError, match=r"'fsraed' \(did you mean 'fsread'\?\)"):
        importlib.import_module("host.fsraed")


def test_arguments_that_cannot_cross_fail_at_the_call_site(transport: Recorder) -> None:
    fsread = importlib.import_module("host.fsread")
    with pytest.raises(TypeError, match=r"host.fsread.read_file: the arguments\[0\] is a value"):
        fsread.read_file({1, 2})
    assert transport.requests == []


def test_the_finder_goes_first_so_nothing_shadows_host(transport: Recorder) -> None:
    assert isinstance(sys.meta_path[0], HostModules)
    assert importlib.import_module("json").__name__ == "json"  # other imports untouched
