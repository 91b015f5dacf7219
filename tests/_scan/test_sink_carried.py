"""Names carried by identifiers (caplet._scan._sink_carried, CPL-THR-003): a decorator, a
metaclass or a proxy's ``__getattr__`` computing a lookup's name from the identifiers the
file hands it (branch blindcn: samples written without reading the rules), each with the
benign shape of the same code.
"""

from __future__ import annotations

import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def danger(source: str, filename: str = "pkg/__init__.py") -> list[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)
    return [f.message for f in findings if f.severity is Severity.DANGER]


DECORATOR = """\
    import builtins

    def native(fn):
        return getattr(builtins, fn.__name__{transform})

    @native
    def {name}(source, scope=None):
        raise NotImplementedError
    """

METACLASS = """\
    class _Auto(type):
        def __getattr__(cls, item):
            return getattr(__import__(cls.__name__), item{transform})

    class subprocess(metaclass=_Auto):
        pass

    subprocess.{attr}(["sh", "-c", "id"])
    """

PROXY = """\
    import importlib

    class LazyCall:
        def __getattr__(self, name):
            module, _, func = name.{split}
            return getattr(importlib.import_module(module), func)

    lazy = LazyCall()
    lazy.{attr}("id")
    """


@pytest.mark.parametrize(
    "source",
    [
        DECORATOR.format(transform="[::-1]", name="cexe"),
        DECORATOR.format(transform=".replace('_', '')", name="e_x_e_c"),
        METACLASS.format(transform="[::-1]", attr="llac_kcehc"),
        PROXY.format(split='partition("__")', attr="os__system"),
        PROXY.format(split='rpartition("_0_")', attr="subprocess_0_getoutput"),
    ],
)
def test_a_name_computed_from_a_handed_identifier_is_hidden(source: str) -> None:
    assert any("carried by an identifier" in m for m in danger(source))


@pytest.mark.parametrize(
    "source",
    [
        # a decorator wrapping the builtin of its own name: the name is written out
        DECORATOR.format(transform="", name="print"),
        DECORATOR.format(transform="", name="open"),
        # a name that spells nothing worth hiding
        DECORATOR.format(transform="[::-1]", name="nel"),
        # a metaclass or a proxy handing names on unchanged
        METACLASS.format(transform="", attr="check_call"),
        PROXY.format(split='partition(".")', attr="json"),
    ],
)
def test_identifiers_handed_on_unchanged_or_harmless_are_not_hidden(source: str) -> None:
    assert not any("carried by an identifier" in m for m in danger(source))


def test_a_proxy_over_a_wrapped_object_hides_nothing() -> None:
    source = """\
        class Proxy:
            def __init__(self, wrapped):
                self._wrapped = wrapped

            def __getattr__(self, name):
                return getattr(self._wrapped, name[::-1])

        p = Proxy(object())
        p.metsys("id")
        """
    assert danger(source) == []


@pytest.mark.parametrize(
    "source",
    [
        # getattr, builtins and the name all default arguments of the enclosing lambdas
        "run = (lambda g=getattr, m=__import__('builtins'), n='%c%c%c%c' % (101, 120, 101, 99):"
        " (lambda s: g(m, n)(s)))()\nrun(payload)\n",
        "import builtins\n"
        "def make(g=getattr, n='cexe'[::-1]):\n"
        "    def run(s):\n"
        "        return g(builtins, n)(s)\n"
        "    return run\n"
        "make()(payload)\n",
    ],
)
def test_a_lookup_carried_by_default_arguments_is_hidden(source: str) -> None:
    assert any("carried by default arguments" in m for m in danger(source))


@pytest.mark.parametrize(
    "source",
    [
        # a getter passed as a default, given a name written out
        "def read(obj, g=getattr):\n    return g(obj, 'name')\n",
        # a default name that spells nothing worth hiding
        "import builtins\nf = (lambda g=getattr, n='nel'[::-1]: g(builtins, n))()\n",
    ],
)
def test_defaults_with_written_or_harmless_names_hide_nothing(source: str) -> None:
    assert not any("carried by default arguments" in m for m in danger(source))
