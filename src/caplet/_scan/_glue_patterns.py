"""Where the glue searches look: the spellings of literals glued together that
:mod:`caplet._scan._glued_strings` and :mod:`caplet._scan._glued_forms` read, marked by
the prefilter's solo set (``Prefilter.glue_marks``, ``Prefilter.form_marks``) so that a
file without any is never searched for them again. Split out of
:mod:`caplet._scan._prefilter_patterns` by concern when it passed 600 lines (recall16):
these mark work for the glue readers, they send nothing to the AST pass themselves.
"""

from __future__ import annotations

from typing import Final

__all__ = ["GLUES", "GLUE_FORMS"]


# -- prefast8 (issue 16, speed): where _glued_strings may find literals to glue ------------
#: The spellings of one literal added to another on a line (``'a' + 'b'``, ``"a"+"b"``),
#: and of literals joined by an empty separator (``''.join(['Lo', 'gin Data'])``): what
#: :mod:`caplet._scan._glued_strings` searches for. No threat token: the prefilter's
#: solo set answers whether each is in a file with the same match (``Prefilter.glue_marks``),
#: so a file without any is not searched for it again.
GLUES: Final = ("' + '", '" + "', "'+'", '"+"', "''.join(", '"".join(')


# -- recall10 (issue 16 point 1): literals glued in spellings _glued_strings does not read --
#: operator's functions that add two sequences (:data:`caplet._scan._values.OPERATOR_ADDS`).
_OPERATOR_ADDS = r"(?:i?(?:add|concat)|__i?(?:add|concat)__)\b"
#: One literal on one line.
_ONE_LITERAL = r"[rbuRBUfF]{0,2}(?:'[^'\n]*'|\"[^\"\n]*\")"
#: Where :mod:`caplet._scan._glued_forms` may find literals glued otherwise than
#: :data:`GLUES`: a literal formatted with literals (``'%s%s' % ('ev', 'al')``,
#: ``'{}{}'.format('ev', 'al')``), joined with blanks before the parenthesis or the dot
#: (``''.join (``, ``'' .join(``), by ``str.join('', ...)``, a reversed list joined, a
#: parenthesised literal added to another (``('Lo') + 'gin'``), ``'c'.__add__('md')``, an
#: f-string whose field is a literal (``f'{"Lo"}gin'``); and a module imported by a name
#: not written out (``__import__(n)``, ``import_module(n)``), whose name the plain glues
#: may build on another line (``n = 'o' + 's'``); recall12: a template itself computed
#: (``('%s' * 2) % (...)``), ``operator``'s additions bare, renamed or folded by
#: ``functools.reduce`` over literals. No threat token: marks in the solo set, answered by
#: the same match (``Prefilter.form_marks``), so a file without any is never searched for
#: them.
GLUE_FORMS: Final = (
    r"['\"]\s*%\s*[({]?\s*[rbuRBUfF]{0,2}['\"]",
    r"['\"]\s*\.\s*format(?:_map)?\s*\(\s*(?:\{\s*|\w+\s*=\s*)?[rbuRBUfF]{0,2}['\"]",
    # str.__add__('ev', 'al'), operator.add('ev', 'al') (attack11); bare or of a renamed
    # module too, two literals given (add('ev', 'al') after from operator import add:
    # recall12; a set's add takes one)
    r"\b(?:[A-Za-z_]\w*\s*\.\s*)?"
    + _OPERATOR_ADDS
    + r"\s*\(\s*\(?\s*"
    + _ONE_LITERAL
    + r"\s*\)?\s*,\s*\(?\s*[rbuRBUfF]{0,2}['\"]",
    # ... renamed (from operator import add as glue, glue = operator.add): the file's own
    # names, read from its text by _glued_forms (recall12)
    r"\bfrom\s+operator\s+import\s*\(?[\w\s,]*\b" + _OPERATOR_ADDS + r"\s+as\s+\S|"
    r"=\s*operator\s*\.\s*" + _OPERATOR_ADDS + r"\s*(?:[#;\n]|$)",
    # functools.reduce of an addition over a list of literals (recall12)
    r"\breduce\s*\(\s*(?:[\w.]+|lambda\s+\w+\s*,\s*\w+\s*:\s*\w+\s*\+\s*\w+)\s*,\s*[\[(]\s*"
    r"[rbuRBUfF]{0,2}['\"]",
    # a template itself computed, then formatted: ('%s' * 2) % ('ev', 'al') (recall12)
    r"['\"]\s*(?:\*\s*\d+\s*)?\)\s*%\s*[({]?\s*[rbuRBUfF]{0,2}['\"]",
    r"\.join\s+\(|['\"]\s+\.\s*join\s*\(|\bstr\s*\.\s*join\s*\(|\.join\(\s*reversed\b",
    r"['\"]\s*\)\s*\+\s*\(?\s*[rbuRBUfF]{0,2}['\"]|['\"]\s*\+\s*\(\s*[rbuRBUfF]{0,2}['\"]",
    r"\.\s*__add__\s*\(\s*\(?\s*[rbuRBUfF]{0,2}['\"]",
    r"\b[fF][rR]?(?:'[^'\n]*|\"[^\"\n]*)\{\s*[rbuRBU]?['\"]",
    r"\b(?:__import__|import_module)\s*\(\s*[^'\"\s)]",
)
