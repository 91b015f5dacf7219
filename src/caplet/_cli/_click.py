"""click's usage error, as typer ships it.

typer 0.29 stopped depending on click and vendors it as ``typer._click``;
the command framework (:mod:`caplet._cli._command`) catches its
``ClickException`` (a missing argument, an unknown option ...) to give it
the one JSON error shape, and typer does not re-export it. Imported in
this one place, so a change of typer's layout is a change of one line.
"""

from __future__ import annotations

from typer._click import ClickException

__all__ = ["ClickException"]
