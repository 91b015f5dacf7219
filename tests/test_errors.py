"""The error tree's one home: every class of it names ``caplet._errors`` as its module.

The tree is defined in three modules (``_error_base``, ``_errors_request``, ``_errors``,
mend19's split), but the CLI's ``--json`` type, reprs and pickles read a class's
``__module__``: a class left naming the module that defines it showed a ``ConfigError``
as ``CapletError`` in ``--json`` (mend19's full suite).
"""

from __future__ import annotations

import pickle

import caplet._errors as errors
from caplet._error_base import CapletError


def _tree() -> list[type[CapletError]]:
    found: list[type[CapletError]] = []
    todo: list[type[CapletError]] = [CapletError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__.startswith("caplet._error")]


def test_every_class_of_the_tree_names_caplet_errors_and_is_exported_there() -> None:
    tree = _tree()
    assert len(tree) > 40
    assert [c.__name__ for c in tree if c.__module__ != "caplet._errors"] == []
    assert [c.__name__ for c in tree if getattr(errors, c.__name__, None) is not c] == []


def test_a_class_split_out_is_pickled_under_caplet_errors() -> None:
    # pickle records a class by its __module__: an error pickled by one caplet and read
    # by another must name the tree's home, not the module that happens to define it
    error = errors.TlsError("tls: the handshake failed")
    data = pickle.dumps(error)
    assert b"caplet._errors_request" not in data
    assert b"caplet._errors" in data
    again = pickle.loads(data)
    assert type(again) is errors.TlsError
    assert str(again) == str(error)
