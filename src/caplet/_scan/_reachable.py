"""Which modules an imported module hands on as its attributes (``shutil.os``,
``tempfile._os``): the resolver follows them, the prefilter's patterns spell them, and
the opaque-namespace rules know them as sensitive. Its own module, with no import of
the AST pass (the prefilter reads it at start-up, issue 16), split out of ``_sources``
when that passed 600 lines.
"""

from __future__ import annotations

__all__ = ["REACHABLE_MODULES"]


def _reachable_modules() -> dict[str, str]:
    """Attribute name -> the module it denotes when read off an imported module.

    A module's own imports are its attributes: ``shutil.os.system``,
    ``importlib.sys.modules``, ``platform.subprocess.run``,
    ``numpy.ctypeslib.ctypes.CDLL`` reach what the rules look for without
    naming it (each passed the danger gate). The modules that run programs or
    native code, load code or reach the interpreter's state are reachable so,
    also under the private alias a module imports them as (``tempfile._os``).
    Names that are as often a plain attribute (``code``, ``types``) are not.
    """
    modules = (
        "os",
        "posix",
        "subprocess",
        "_posixsubprocess",
        "pty",
        "ctypes",
        "_ctypes",
        "cffi",
        "sys",
        "builtins",
        "importlib",
        "socket",
        "_socket",
        "marshal",
        "pickle",
        "_pickle",
        "runpy",
        "zipimport",
    )
    reachable = {module: module for module in modules}
    for module in modules:
        reachable.setdefault(f"_{module}", module)
    return reachable


#: See :func:`_reachable_modules` (a table, not the resolver's: the prefilter's
#: patterns read it too, and must not import the AST pass, issue 16's start-up).
REACHABLE_MODULES = _reachable_modules()
