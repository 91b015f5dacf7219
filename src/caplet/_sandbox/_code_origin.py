"""Code a worker runs is the bytes of a ``.py`` file the scanner read (attack24, attack26).

steer22 and attack23 guarded the path hooks and ``FileLoader.get_data``, both
Python attributes: a plugin sets them again. ``loader = type(helpers.__loader__)``,
then ``loader.get_data = loader.get_data.__wrapped__`` (the original, which
``functools.wraps`` keeps) or any function that reads ``/tmp/x/evil.py``, then
``loader("evil", "/tmp/x/evil.py").load_module()``: the module the plugin wrote
ran (none of it names an import API the scanner reads). And without any loader,
a code object made from the plugin's data (``f.__code__.replace(co_code=...)``,
``type(f.__code__)(...)``) runs bytecode no scanner read.

An audit hook (:func:`sys.addaudithook`) is the one thing a plugin cannot take
out of its interpreter, so the guard is one, installed before the plugin is
imported. It asks who compiles (the innermost Python frame: a builtin has none)
and answers by an allow-list, not by "is it the runtime's file": attack26 had the
runtime call the builtins for the plugin (``copy.copy`` of an object whose
``__reduce_ex__`` returns ``marshal.loads``; ``threading.Thread.run``; importlib's
``_call_with_frames_removed``), or compile the plugin's text itself
(``typing.get_type_hints`` over annotations set from a data file,
``logging.config.fileConfig``'s ``eval`` of a handler's arguments, ``zipimport``),
and every one of those frames was the runtime's.

- ``compile`` called by importlib (``source_to_code``): the file named must lie
  inside the roots (``_plugin_load._within``'s rule), be a ``.py`` file (a loader
  made for ``helpers.txt`` ran it: attack26), and the source compiled must be that
  file's bytes, read again here (a ``get_data`` replaced to read another file);
- ``marshal.loads`` called by importlib (``_compile_bytecode``): a ``.pyc`` of the
  runtime only (the worker writes none, the snapshot copy has no ``__pycache__``,
  and a shipped ``.pyc`` is code no scanner read), its bytes after the header;
- ``zipimport``: never. The worker imports from no archive (``_plugin_load`` drops
  its path hook), and its module functions compile any text handed to them whatever
  archive they name (``zipimport._compile_source(os.__file__, text)``: attack27);
- ``compile`` called by the standard library elsewhere: only its code generators,
  each with the check that keeps the plugin's text out of the code it makes
  (the ``_TYPE_TEXT``, ``_FIELDS`` and ``_CHECKED`` tables); every other module of it
  that compiles runs the text it is handed (``timeit``, ``runpy``, ``logging.config``,
  ``code``, ``pdb``, ...) or calls a callable it is handed (``copy``, ``threading``);
- ``code.__new__`` and ``marshal.loads`` elsewhere: only ``types.coroutine`` (which
  flips a flag of a function's own code); ``marshal.load`` (a file object) never;
- native code (``ctypes.dlopen``; an extension module's file, the ``import`` event of
  ``_imp.create_dynamic``): a file of the runtime as spelled and as opened (ctypes also
  the system's ``/usr``, ``/lib``), or a bare name for the dynamic linker. The jail's
  ``/tmp`` and snapshot are ``noexec``, a memfd is not: a library the plugin shipped as
  hex text loaded through an annotation's ``cdll["/proc/self/fd/N"]`` or a reused
  extension loader (attack27);
- ``typing_extensions.get_annotations(eval_str=True)`` evaluates annotation text in a
  library's frame: checked as ``ForwardRef`` is (``_LIBRARY_TYPE_TEXT``, attack27);
- the plugin's own frames (and code it compiled) may compile when their own code names
  ``exec``, ``eval`` or ``compile`` (loaded as a global or builtin): ``exec(text)`` in
  the plugin is what the scanner reads (CPL-DYN-*). An exec called as a value the frame
  was handed (``AfterValidator(exec)``) or as an attribute (``ns.exec``, from pydantic's
  ``ImportString`` of a data file's ``builtins.exec``: attack27) is refused;
- a library's frame (a file under the runtime's folders, not the standard library's)
  only by an allow-list of exact callers, as the standard library's (lib29): naming a
  compiler was no check, for jinja2's does, and a template is Python's attribute and call
  syntax over any module (``{{ cycler.__init__.__globals__ }}``: attack27). attrs'
  method builder (the script must be its own templates with identifiers in the holes:
  ``_code_attrs``, attrs31), typing_inspection's ``is_*`` makers (their names must be
  identifiers) and caplet's guest runner are listed; jinja2 is refused whatever the
  environment (a sandbox's policy is class attributes the plugin can set);
- the hook's own functions that parse (``type_text``, ``postponed_annotation``,
  ``attrs_script``) compile in their own frame only with every default as sealed: a
  plugin that called ``type_text`` with a handed exec for ``_postponed`` ran it there
  (attrs31).

**Sealed.** The hook shares the plugin's interpreter, so nothing it uses may be
the plugin's to change (attack26): a module global is (``import`` this module and
rebind a table), a builtin is (``builtins.type = ...``), a closure's cell is (an
exception the hook raises carries its frame in ``__traceback__``; the frame's
locals hold the closures, and ``cell.cell_contents`` is writable without an audit
event). So the functions the hook runs (``_SEALED``) read no global and no
builtin and close over nothing: every name they use is a positional default,
bound when this module is imported (before any plugin code) to something
immutable, and ``guard_code_origin`` makes the hook a new function whose defaults
carry the roots. Setting ``__defaults__`` or ``__code__`` of any of them is an
audit event, refused here. A test holds the sealed functions to this.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, Final

from caplet._sandbox._code_attrs import attrs_script
from caplet._sandbox._code_files import native, normpath, open_inside, read_whole, same
from caplet._sandbox._code_intact import intact
from caplet._sandbox._code_text import (
    fields_named,
    identifiers,
    named_text,
    names_compiler,
    postponed_annotation,
    sources,
    strings,
    type_text,
)

__all__ = ["guard_code_origin"]

#: The frames of importlib itself (frozen into the interpreter).
_IMPORTLIB: Final = frozenset(
    ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
)
_ZIPIMPORT: Final = "<frozen zipimport>"
#: The standard library's code generators that compile a type annotation's text
#: (``ForwardRef``): it must be inert (no call, no function, no import: names,
#: attributes, subscripts, constants, operators) or a string constant of the
#: plugin's own sources (``Annotated[int, Field(gt=0)]`` postponed by ``from
#: __future__ import annotations``: the scanner read it there).
_TYPE_TEXT: Final = frozenset(
    {
        ("typing.py", "ForwardRef.__init__"),
        ("inspect.py", "get_annotations"),  # 3.12+: the comprehension is inlined
        ("inspect.py", "get_annotations.<locals>.<dictcomp>"),
        ("inspect.py", "_signature_fromstr.<locals>.wrap_value"),
    }
)
#: Libraries' frames that evaluate an annotation's text, keyed by file name (a vendored
#: copy too): ``typing_extensions.get_annotations(obj, eval_str=True)`` ``eval``\ s each
#: string annotation itself (a dependency of pydantic's, so in every runtime: attack27).
_LIBRARY_TYPE_TEXT: Final = frozenset(
    {
        ("typing_extensions.py", "get_annotations"),  # 3.12+: the comprehension is inlined
        ("typing_extensions.py", "get_annotations.<locals>.<dictcomp>"),
    }
)
#: dataclasses' methods, made from the text of each field's name: every name must be
#: an identifier (``__annotations__`` set to ``{"a,__import__(...)": int}`` puts the
#: call into ``__eq__``).
#: Libraries' code generators that may compile, keyed by the file under the runtime's
#: folder (past ``site-packages/``) and the qualified name; any other library's frame is
#: refused. caplet's guest worker compiles the code its host sent (``host.exec``): its
#: purpose.
_LIBRARY_COMPILERS: Final = frozenset({("caplet/_sandbox/_guest.py", "_compile")})
#: attrs' methods: its ``_compile_and_eval`` compiles only a script of attrs' own
#: templates with identifiers in their holes (``_code_attrs``: lib29's alias and
#: attack30's rebound script makers and direct call, attrs31).
_ATTRS: Final = ("attr/_make.py", "_compile_and_eval")
#: Libraries' generators that put names into fixed text: each local named must be an
#: identifier. typing_inspection (pydantic's) makes its ``is_*`` checks so at import.
_LIBRARY_NAMED: Final = (
    (
        ("typing_inspection/typing_objects.py", "_compile_identity_check_function"),
        ("member", "function_name"),
        # The whole text it makes, as dedent leaves it (attack30: the text is checked,
        # not the module's dedent, which the plugin can rebind).
        tuple(
            "\ndef {function_name}(obj: Any, /) -> bool:\n    return " + check + "\n"
            for check in ("obj is _obj", "obj is _t_obj or obj is _te_obj", "False")
        ),
    ),
    (
        ("typing_inspection/typing_objects.py", "_compile_isinstance_check_function"),
        ("member", "function_name"),
        tuple(
            "\ndef {function_name}(obj: Any, /) -> 'TypeIs[{member}]':\n    return " + check + "\n"
            for check in ("isinstance(obj, _obj)", "isinstance(obj, _objs)", "False")
        ),
    ),
)
_FIELDS: Final = frozenset(
    {("dataclasses.py", "_create_fn"), ("dataclasses.py", "_FuncBuilder.add_fns_to_class")}
)
#: Generators that check their input themselves (namedtuple: identifiers; gettext:
#: its own tokenizer) or make no code (``ast.parse``: a tree).
_CHECKED: Final = frozenset(
    {("collections/__init__.py", "namedtuple"), ("gettext.py", "c2py"), ("ast.py", "parse")}
)
#: The standard library's functions that make code objects (``code.replace``).
_CODE_MAKERS: Final = frozenset({("types.py", "coroutine")})
#: The system's own library folders (read-only in a jail): ctypes may load from them.
_SYSTEM_LIBRARIES: Final = ("/usr/", "/lib/", "/lib64/")
_STDLIB: Final = os.path.normpath(os.path.dirname(os.__file__))  # noqa: PTH120
#: The standard library's folder as spelled and resolved (a frame of it not known as
#: such would be let through as another library's).
_STDLIBS: Final = tuple(dict.fromkeys((_STDLIB + os.sep, os.path.realpath(_STDLIB) + os.sep)))
_THIRD_PARTY: Final = ("site-packages" + os.sep, "dist-packages" + os.sep)

#: A function of the hook's own that compiles (to parse, never to run): its code, its
#: parameters that have defaults and those defaults, as at import.
_Own = tuple[CodeType, tuple[str, ...], tuple[object, ...]]


def _own_record(function: Callable[..., object]) -> _Own:
    code: CodeType = function.__code__
    defaults: tuple[object, ...] = function.__defaults__ or ()
    names = code.co_varnames[code.co_argcount - len(defaults) : code.co_argcount]
    return (code, names, defaults)


#: ``type_text`` and ``postponed_annotation`` parse an annotation, ``attrs_script`` a
#: script; each compiles in its own frame, which the hook lets through.
_OWN: Final = tuple(_own_record(f) for f in (type_text, postponed_annotation, attrs_script))

# Sealed functions (module docstring): every name below a ``def`` is a parameter.


def _own_call(
    frame: FrameType,
    own: tuple[_Own, ...],
    _len: Callable[[tuple[object, ...]], int] = len,
    _range: type[range] = range,
) -> bool:
    """Whether ``frame`` runs one of the hook's own compiling functions with every default
    as sealed. Its frame compiles what it is handed, so a plugin that calls it with a
    handed exec for a default (``type_text(text, {}, _postponed=handed)``) ran that exec
    in a frame the hook let through (attrs31)."""
    code = frame.f_code
    for known, names, defaults in own:
        if code is known:
            values = frame.f_locals
            for at in _range(_len(defaults)):
                name = names[at]
                if name not in values or values[name] is not defaults[at]:
                    return False
            return True
    return False


def _stdlib_key(
    frame: FrameType,
    _stdlibs: tuple[str, ...] = _STDLIBS,
    _third_party: tuple[str, ...] = _THIRD_PARTY,
    _sep: str = os.sep,
    _len: Callable[[str], int] = len,
) -> tuple[str, str] | None:
    """``(file under the standard library, qualified name)`` of ``frame``'s code, or
    None when it is not the standard library's (the plugin's, another library's)."""
    code = frame.f_code
    where = code.co_filename
    if where.startswith("<frozen "):
        return (where, code.co_qualname)
    for stdlib in _stdlibs:
        if where.startswith(stdlib):
            inner = where[_len(stdlib) :]
            if inner.startswith(_third_party):
                return None
            return (inner.replace(_sep, "/"), code.co_qualname)
    return None


def _library_key(
    where: str,
    qualname: str,
    runtime: tuple[str, ...],
    _third_party: tuple[str, ...] = _THIRD_PARTY,
    _sep: str = os.sep,
    _len: Callable[[str], int] = len,
) -> tuple[str, str] | None:
    """``(file under the runtime's folder, qualified name)`` of a library's code (past
    ``site-packages/`` where the folder holds it), or None when ``where`` lies in no
    folder of the runtime (the plugin's code, or code it compiled)."""
    for root in runtime:
        if where.startswith(root):
            inner = where[_len(root) :]
            for folder in _third_party:
                _, found, after = inner.rpartition(folder)
                if found:
                    inner = after
                    break
            return (inner.replace(_sep, "/"), qualname)
    return None


def _compiles(
    frame: FrameType,
    source: object,
    filename: object,
    snapshot: tuple[str, ...],
    runtime: tuple[str, ...],
    _key: Callable[[FrameType], tuple[str, str] | None] = _stdlib_key,
    _library_key: Callable[[str, str, tuple[str, ...]], tuple[str, str] | None] = _library_key,
    _type_texts: frozenset[tuple[str, str]] = _TYPE_TEXT,
    _library_texts: frozenset[tuple[str, str]] = _LIBRARY_TYPE_TEXT,
    _library_makers: frozenset[tuple[str, str]] = _LIBRARY_COMPILERS,
    _library_named: tuple[
        tuple[tuple[str, str], tuple[str, ...], tuple[str, ...]], ...
    ] = _LIBRARY_NAMED,
    _identifiers: Callable[[FrameType, tuple[str, ...]], bool] = identifiers,
    _sep: str = os.sep,
    _names_compiler: Callable[[CodeType], bool] = names_compiler,
    _own: tuple[_Own, ...] = _OWN,
    _own_call: Callable[[FrameType, tuple[_Own, ...]], bool] = _own_call,
    _attrs: tuple[str, str] = _ATTRS,
    _attrs_script: Callable[[object, object], bool] = attrs_script,
    _fields: frozenset[tuple[str, str]] = _FIELDS,
    _checked: frozenset[tuple[str, str]] = _CHECKED,
    _type_text: Callable[[object, tuple[str, ...]], bool] = type_text,
    _fields_named: Callable[[FrameType], bool] = fields_named,
    _intact: Callable[[str, object, object], bool] = intact,
    _texts: Callable[[FrameType, object, tuple[str, ...]], bool] = named_text,
    _type: Callable[[object], type] = type,
    _bytes: type[bytes] = bytes,
    _len: Callable[[str], int] = len,
    _error: type[RuntimeError] = RuntimeError,
) -> None:
    """Return when ``frame`` may compile ``source``, else RuntimeError."""
    key = _key(frame)
    if key is None:
        code = frame.f_code
        if _own_call(frame, _own):
            return
        where = code.co_filename
        key = (where.rpartition(_sep)[2], code.co_qualname)
        if key not in _library_texts:
            # The plugin's: a file of the snapshot, or code it compiled ("<string>").
            # Any other file is a library's, known by its place under the runtime's
            # folders or else by its whole path (a sourceless .pyc keeps the path it was
            # compiled at), and is held to the list: fail closed.
            library: tuple[str, str] | None = None
            if not where.startswith("<"):
                for root in snapshot:
                    if where.startswith(root):
                        break
                else:
                    library = _library_key(where, code.co_qualname, runtime) or (
                        where,
                        code.co_qualname,
                    )
            if library is None:
                # The plugin's frame (or code it compiled): it compiles when its own code
                # names a compiler, which the scanner reads (CPL-DYN-001). An exec it was
                # handed as a value, or calls as an attribute, is one no scanner read
                # there (attack27: pydantic's ImportString).
                if _names_compiler(code):
                    return
                raise _error(
                    f"{where} ({code.co_qualname}) compiles through a callable it "
                    "does not name (no exec, eval or compile in its code: one a data file "
                    "named, or handed to it as a value), so the scanner never read that "
                    "call (attack27); call exec, eval or compile by name in the plugin's "
                    "source"
                )
            # A library's frame: only its code generators caplet lists, as the standard
            # library's (lib29). Naming a compiler is no check: jinja2's names one, and
            # a template is Python's attribute and call syntax over any module.
            if library in _library_makers:
                return
            shown = f"{library[0]} ({library[1]})"
            if library == _attrs:
                if _attrs_script(source, filename):
                    return
                raise _error(
                    f"{shown} was handed a script that is none attrs writes (each line "
                    "one of its method templates, every name in it an identifier, "
                    "repr_ns a dotted name, no exec, eval or compile loaded, a file name "
                    "<attrs generated ...>), so it would run text no scanner read: a name, "
                    "alias or repr_ns of the plugin's data, or attr._make's functions "
                    "rebound or called by the plugin (lib29, attack30, attrs31); name "
                    "attributes, aliases and repr_ns with identifiers in the source and "
                    "leave attr._make as imported"
                )
            for named, names, texts in _library_named:
                if library == named:
                    if _identifiers(frame, names) and _texts(frame, source, texts):
                        return
                    raise _error(
                        f"{shown} was handed a name that is no identifier, or made other "
                        "text than its own (its module's functions rebound), and the code "
                        "it makes would run that text (lib29, attack30); pass identifiers "
                        "and leave the library's module as imported"
                    )
            if library[0].startswith("jinja2/") or "/jinja2/" in library[0]:
                raise _error(
                    f"{shown} compiles a template to Python and runs it: a template "
                    "reaches any module through its globals ({{ cycler.__init__."
                    "__globals__ }}), read from the plugin's data or written in its source, "
                    "where the scanner reads a string, not code; a sandboxed environment's "
                    "policy is class attributes the plugin can set (attack27, lib29). "
                    "Fill text with string.Template or str.format in a worker, or render "
                    "templates in the host application"
                )
            raise _error(
                f"{shown} is a library's code that compiles, and not one of the code "
                "generators caplet checks, so what it compiles may be text no scanner "
                "read (lib29); call exec or eval in the plugin's own .py files, or ask "
                "for this library's generator to be checked"
            )
    where = f"{key[0]} ({key[1]})"
    if (key in _checked or key in _fields) and not _intact(
        key[0], frame.f_globals, frame.f_builtins
    ):
        # What its text is made of is the module's globals and the builtins (attack30).
        raise _error(
            f"{where} makes code from its module's functions and the builtins, and one "
            "of them is no longer what was imported (rebound, or its code or defaults "
            "replaced), so the text it compiles may be the plugin's data (attack30); "
            "leave the standard library's modules and the builtins as imported"
        )
    if key in _checked:
        return
    if key in _type_texts or key in _library_texts:
        if _type_text(source, snapshot):
            return
        shown = source.decode(errors="replace") if _type(source) is _bytes else "?"  # type: ignore[attr-defined]
        if _len(shown) > 60:
            shown = shown[:57] + "..."
        raise _error(
            f"{where} was handed annotation text that calls or imports ({shown}) and "
            "is no annotation in the plugin's .py files: text from its data would run "
            "(attack26); write the annotation in the source"
        )
    if key in _fields:
        if _fields_named(frame):
            return
        raise _error(
            f"{where}: a dataclass field's name is no identifier, and the methods made "
            "from it would run that text (attack26); name the fields in the class body"
        )
    raise _error(
        f"{where} compiles the text it is given and runs it: code no scanner read (a "
        "plugin's code is its .py files; call exec or eval in them, where the scanner "
        "reads it)"
    )


def _refusal(frame: FrameType, how: str) -> str:
    code = frame.f_code
    return (
        f"{code.co_filename} ({code.co_qualname}) made a code object ({how}): it would "
        "run bytecode no scanner read; a plugin's code is its .py files"
    )


def _zipped(frame: FrameType) -> str:
    code = frame.f_code
    return (
        f"<frozen zipimport> ({code.co_qualname}) compiles or unmarshals: the worker "
        "imports from no archive (its path hook is dropped), and zipimport's functions "
        "make code of any text or bytes they are handed, whatever archive they name "
        "(attack27); a plugin's code is its .py files"
    )


def _hook(  # noqa: PLR0917 (sys.addaudithook calls it with two; the rest are defaults)
    event: str,
    args: tuple[Any, ...],
    roots: tuple[str, ...] = (),
    runtime: tuple[str, ...] = (),
    snapshot: tuple[str, ...] = (),
    sealed: tuple[object, ...] = (),
    _getframe: Callable[[int], FrameType] = sys._getframe,
    _importlib: frozenset[str] = _IMPORTLIB,
    _zipimport: str = _ZIPIMPORT,
    _same: Callable[..., None] = same,
    _zipped: Callable[[FrameType], str] = _zipped,
    _native: Callable[[object, tuple[str, ...], str], None] = native,
    _system: tuple[str, ...] = _SYSTEM_LIBRARIES,
    _compiles: Callable[
        [FrameType, object, object, tuple[str, ...], tuple[str, ...]], None
    ] = _compiles,
    _key: Callable[[FrameType], tuple[str, str] | None] = _stdlib_key,
    _makers: frozenset[tuple[str, str]] = _CODE_MAKERS,
    _refusal: Callable[[FrameType, str], str] = _refusal,
    _error: type[RuntimeError] = RuntimeError,
) -> None:
    """The audit hook (module docstring); ``guard_code_origin`` binds the first four
    defaults."""
    if event == "compile":
        frame = _getframe(1)
        where = frame.f_code.co_filename
        if where in _importlib:
            _same(args[1], args[0], False, roots, "the plugin's snapshot")
        elif where == _zipimport:
            raise _error(_zipped(frame))
        else:
            _compiles(frame, args[0], args[1], snapshot, runtime)
    elif event == "marshal.loads":
        frame = _getframe(1)
        where = frame.f_code.co_filename
        if where in _importlib:
            path = frame.f_locals.get("bytecode_path")
            _same(path, args[0], True, runtime, "the runtime")
        elif where == _zipimport:
            raise _error(_zipped(frame))
        else:
            raise _error(_refusal(frame, "marshal.loads"))
    elif event == "marshal.load":
        # marshal.load of a file object is its own event, with no arguments (lib29:
        # ``marshal.load(io.BytesIO(blob))`` made a code object unasked); importlib
        # unmarshals bytes (``marshal.loads``), so no frame of the runtime needs it.
        raise _error(_refusal(_getframe(1), "marshal.load"))
    elif event == "code.__new__":
        frame = _getframe(1)
        if _key(frame) not in _makers:
            raise _error(_refusal(frame, "types.CodeType, code.replace"))
    elif event == "ctypes.dlopen":
        _native(args[0], (*runtime, *_system), "ctypes.dlopen of")
    elif event == "import" and args[1] is not None:
        # ``_imp.create_dynamic``: an extension module's file (a loader reused for any
        # path loads it: ``type(math.__loader__)("x", path).create_module(spec)``).
        _native(args[1], runtime, "an extension module")
    elif event == "object.__setattr__":
        for function in sealed:
            if args[0] is function:
                raise _error(f"{args[1]} of caplet's code-origin guard is not the plugin's to set")


#: The functions the hook runs: none reads a global, a builtin or a cell (a test
#: holds them to it), and setting their ``__defaults__`` or ``__code__`` is refused.
_SEALED: Final = (
    read_whole,
    normpath,
    open_inside,
    native,
    same,
    _stdlib_key,
    _library_key,
    _own_call,
    strings,
    sources,
    postponed_annotation,
    type_text,
    fields_named,
    identifiers,
    named_text,
    names_compiler,
    attrs_script,
    intact,
    _compiles,
    _refusal,
    _zipped,
    _hook,
)


def guard_code_origin(roots: tuple[str, ...], runtime: tuple[str, ...]) -> None:
    """Install the hook (module docstring). ``roots`` are the snapshot's and the runtime's
    folders, each ending with ``os.sep``; ``runtime`` the runtime's alone."""
    snapshot = tuple(root for root in roots if root not in runtime)
    defaults = _hook.__defaults__ or ()
    hook = types.FunctionType(
        _hook.__code__,
        _hook.__globals__,
        "hook",
        (roots, runtime, snapshot, (*_SEALED, None), *defaults[4:]),
    )
    # The new hook is sealed too: it lists itself last.
    bound = list(hook.__defaults__ or ())
    bound[3] = (*_SEALED, hook)
    hook.__defaults__ = tuple(bound)
    sys.addaudithook(hook)
