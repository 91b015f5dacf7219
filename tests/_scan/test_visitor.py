"""The rule visitor's walk (caplet._scan._visitor): what it skips must not hide a use."""

from __future__ import annotations

import textwrap

from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def test_every_use_of_an_alias_is_reported_beside_names_no_rule_reports() -> None:
    # len resolves to nothing any rule reports and is skipped at its later uses (issue 16's
    # speed); env, an alias of os.environ, is reported at every use, before and after
    source = textwrap.dedent(
        """
        import os
        env = os.environ
        def f(a):
            return len(a), len(env)
        print(env)
        print(len(env), env)
        """
    )
    found = {
        (f.line, f.column)
        for f in scan_source(source, "mod.py", mode=ScanMode.PLUGIN)
        if f.rule_id == "CPL-ENV-002"
    }
    assert found == {(3, 7), (5, 24), (6, 7), (7, 11), (7, 17)}
