"""The root of caplet's one exception tree (:mod:`caplet._errors` names the whole tree).

Apart so that :mod:`caplet._errors_request` and :mod:`caplet._errors` both derive
from it without importing each other (mend19's split).
"""

from __future__ import annotations

__all__ = ["CapletError"]


class CapletError(Exception):
    """Base class of every error caplet raises deliberately."""


#: The tree's one home stays :mod:`caplet._errors`, which re-exports the class: the CLI's
#: ``public_type`` looks for that module in an error's classes, and reprs and pickles
#: name it there, as before the split (mend19).
CapletError.__module__ = "caplet._errors"
