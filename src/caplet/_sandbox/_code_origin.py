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
  flips a flag of a function's own code);
- native code (``ctypes.dlopen``; an extension module's file, the ``import`` event of
  ``_imp.create_dynamic``): a file of the runtime as spelled and as opened (ctypes also
  the system's ``/usr``, ``/lib``), or a bare name for the dynamic linker. The jail's
  ``/tmp`` and snapshot are ``noexec``, a memfd is not: a library the plugin shipped as
  hex text loaded through an annotation's ``cdll["/proc/self/fd/N"]`` or a reused
  extension loader (attack27);
- ``typing_extensions.get_annotations(eval_str=True)`` evaluates annotation text in a
  library's frame: checked as ``ForwardRef`` is (``_LIBRARY_TYPE_TEXT``, attack27);
- the plugin's own frames and other libraries' frames may compile when their own code
  names ``exec``, ``eval`` or ``compile`` (loaded as a global or builtin): ``exec(text)``
  in the plugin is what the scanner reads (CPL-DYN-*), and a library's code generators
  (attrs, jinja2) are the host's choice of library. An exec called as a value the frame
  was handed (``AfterValidator(exec)`` made in another function) or as an attribute
  (``ns.exec``, from pydantic's ``ImportString`` of a data file's ``builtins.exec``:
  attack27) is one the scanner never read there, refused. The residual: a library whose
  templates are Python, which names its compile (jinja2: ``{{ cycler.__init__.__globals__
  ... }}`` reaches any module; attack27, open).

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

import dataclasses
import keyword
import opcode
import os
import sys
import types
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any, Final

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
#: The opcodes an inert expression compiles to: loads, subscripts, operators, tuples,
#: lists and slices; no call, no function, no import.
_INERT_OPS: Final = frozenset(
    opcode.opmap[name]
    for name in (
        "CACHE",
        "NOP",
        "RESUME",
        "EXTENDED_ARG",
        "LOAD_NAME",
        "LOAD_CONST",
        "LOAD_ATTR",
        "BINARY_SUBSCR",
        "BINARY_OP",
        "UNARY_NEGATIVE",
        "BUILD_TUPLE",
        "BUILD_LIST",
        "BUILD_SLICE",
        "RETURN_VALUE",
        "RETURN_CONST",
    )
    if name in opcode.opmap
)
#: The builtins that compile text, as a frame outside the standard library must name them.
_COMPILERS: Final = frozenset({"exec", "eval", "compile"})
#: ``LOAD_GLOBAL``'s argument is the name's index shifted left by one (3.11+: the low
#: bit pushes a NULL).
_GLOBAL_SHIFT: Final = 1 if sys.version_info >= (3, 11) else 0
#: ``from __future__ import annotations``: each annotation compiles to a string constant.
_POSTPONED: Final = 0x1000000
#: The bytes of a .pyc before its marshalled code object.
_PYC_HEADER: Final = 16
#: The most bytes of a file read to compare (a source the scanner reads is at most 2 MiB;
#: a larger file than this is no file the importers are expected to run).
_MAX_BYTES: Final = 64 << 20
#: The system's own library folders (read-only in a jail): ctypes may load from them.
_SYSTEM_LIBRARIES: Final = ("/usr/", "/lib/", "/lib64/")
_READ_FLAGS: Final = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
_STDLIB: Final = os.path.normpath(os.path.dirname(os.__file__))  # noqa: PTH120
#: The standard library's folder as spelled and resolved (a frame of it not known as
#: such would be let through as another library's).
_STDLIBS: Final = tuple(dict.fromkeys((_STDLIB + os.sep, os.path.realpath(_STDLIB) + os.sep)))
_THIRD_PARTY: Final = ("site-packages" + os.sep, "dist-packages" + os.sep)
#: A dataclass field's name, read from its slot (``Field.name`` set to a property, or a
#: subclass, could answer otherwise when the method's text is made).
_FIELD_NAME: Final = vars(dataclasses.Field)["name"]

# Sealed functions (module docstring): every name below a ``def`` is a parameter.


def _read(
    fd: int,
    _read_fd: Callable[[int, int], bytes] = os.read,
    _close: Callable[[int], None] = os.close,
    _max: int = _MAX_BYTES,
    _join: Callable[[list[bytes]], bytes] = b"".join,
    _len: Callable[[bytes], int] = len,
    _error: type[ImportError] = ImportError,
    _os_error: type[OSError] = OSError,
) -> bytes:
    """The whole file open on ``fd`` (closed here), or ImportError."""
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= _max:
            chunk = _read_fd(fd, 1 << 20)
            if not chunk:
                return _join(chunks)
            chunks.append(chunk)
            size += _len(chunk)
        raise _error("a file larger than any module the worker imports was handed to import")
    except _os_error as exc:
        raise _error(f"a file to import cannot be read to check it ({exc.strerror})") from None
    finally:
        _close(fd)


def _normpath(path: str, _join: Callable[[list[str]], str] = "/".join) -> str:
    """``os.path.normpath`` of an absolute POSIX path (posixpath's reads its module's
    globals, which are the plugin's to rebind)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + _join(parts)


def _open_inside(
    path: object,
    where: tuple[str, ...],
    whose: str,
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _open: Callable[[str, int], int] = os.open,
    _readlink: Callable[[str], str] = os.readlink,
    _close: Callable[[int], None] = os.close,
    _flags: int = _READ_FLAGS,
    _error: type[ImportError] = ImportError,
    _os_error: type[OSError] = OSError,
) -> tuple[int, str]:
    """``path`` opened (as importlib would: links followed) and where the file really is,
    read from the descriptor; ImportError unless that lies inside ``where``. Only an
    exact ``str``: a subclass's methods are the plugin's code, run inside the hook."""
    if _type(path) is not _str or not path.startswith("/"):  # type: ignore[attr-defined]
        raise _error(f"a {_type(path).__name__} named no file of {whose} to import from")
    try:
        fd = _open(path, _flags)  # type: ignore[arg-type]
    except _os_error as exc:
        raise _error(f"{path} cannot be read to check it ({exc.strerror})") from None
    try:
        real = _readlink(f"/proc/self/fd/{fd}")
    except _os_error as exc:
        _close(fd)
        raise _error(f"{path}: where it lies cannot be read ({exc.strerror})") from None
    if not (real + "/").startswith(where):
        _close(fd)
        raise _error(f"{path} is not a file of {whose}: code is imported only from it")
    return fd, real


def _native(
    name: object,
    where: tuple[str, ...],
    what: str,
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _normpath: Callable[[str], str] = _normpath,
    _open_inside: Callable[[object, tuple[str, ...], str], tuple[int, str]] = _open_inside,
    _close: Callable[[int], None] = os.close,
    _error: type[ImportError] = ImportError,
) -> None:
    """ImportError unless the native library ``name`` is a file of ``where`` as spelled
    (no link of the plugin's on the way: ``where`` is read-only) and as opened. A bare
    name (``libc.so.6``, no ``/``) is the dynamic linker's to find in the system's own
    folders; ``None`` is the program itself."""
    if name is None or (_type(name) is _str and "/" not in name):  # type: ignore[operator]
        return
    if _type(name) is not _str or not (_normpath(name) + "/").startswith(where):  # type: ignore[arg-type]
        raise _error(
            f"{what} {name!r} is no file of the runtime: native code is loaded only from "
            "it (a library the plugin wrote, to a memfd or anywhere, is code no one read: "
            "attack27)"
        )
    fd, _real = _open_inside(name, where, "the runtime")
    _close(fd)


def _same(
    path: object,
    data: object,
    bytecode: bool,
    where: tuple[str, ...],
    whose: str,
    _open_inside: Callable[[object, tuple[str, ...], str], tuple[int, str]] = _open_inside,
    _read: Callable[[int], bytes] = _read,
    _close: Callable[[int], None] = os.close,
    _type: Callable[[object], type] = type,
    _kinds: tuple[type, ...] = (str, bytes),
    _header: int = _PYC_HEADER,
    _error: type[ImportError] = ImportError,
) -> None:
    """What importlib compiles (``bytecode``: unmarshals) is ``path``'s own content,
    read through the descriptor the check resolved."""
    fd, real = _open_inside(path, where, whose)
    if not real.endswith(".pyc" if bytecode else ".py"):
        _close(fd)
        raise _error(
            f"{path} is no Python source: importlib runs only .py files here (the "
            "scanner reads those; a loader made for another file runs code none read)"
        )
    content = _read(fd)
    if _type(data) not in _kinds or (content[_header:] if bytecode else content) != data:
        raise _error(
            f"{path}: the {'bytecode' if bytecode else 'source'} importlib was handed "
            "is not that file's content (a loader's get_data was replaced); only the "
            "plugin's snapshot and the runtime are imported from"
        )


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


def _strings(
    code: CodeType,
    found: set[str],
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _code: type[CodeType] = CodeType,
    _nested: tuple[type, ...] = (tuple, frozenset),
) -> None:
    """Add every string constant of ``code``, its nested code and tuples, to ``found``."""
    pending: list[object] = [code]
    while pending:
        item = pending.pop()
        kind = _type(item)
        if kind is _str:
            found.add(item)  # type: ignore[arg-type]
        elif kind is _code:
            pending.extend(item.co_consts)  # type: ignore[attr-defined]
        elif kind in _nested:
            pending.extend(item)  # type: ignore[arg-type]


def _sources(
    folder: str,
    _scandir: Callable[[str], Any] = os.scandir,
) -> Iterator[str]:
    """The ``.py`` files under ``folder`` (the snapshot: read-only, made by the host)."""
    pending = [folder]
    while pending:
        with _scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
                    yield entry.path


def _postponed_annotation(
    source: str,
    snapshot: tuple[str, ...],
    _sources: Callable[[str], Iterator[str]] = _sources,
    _open: Callable[[str, int], int] = os.open,
    _read: Callable[[int], bytes] = _read,
    _nofollow: int = _READ_FLAGS | os.O_NOFOLLOW,
    _compile: Callable[..., CodeType] = compile,
    _strings: Callable[[CodeType, set[str]], None] = _strings,
    _set: type[set[str]] = set,
    _flags: int = _POSTPONED,
    _errors: tuple[type[Exception], ...] = (SyntaxError, ValueError, ImportError, OSError),
) -> bool:
    """Whether ``source`` is a string constant of a snapshot ``.py`` file compiled with
    its annotations postponed (each annotation is then one). Computed anew each time:
    a cache would be state the plugin could reach; only a file holding the text's
    first name is compiled."""
    first = source.lstrip("([ ").split("[", 1)[0].split(".", 1)[0].split("(", 1)[0]
    needle = first.strip().encode()
    for path in _sources(snapshot[0]) if snapshot else ():
        try:
            content = _read(_open(path, _nofollow))
            if needle not in content:
                continue
            code = _compile(content, path, "exec", _flags, True)
        except _errors:
            continue  # unreadable or not Python: no constant of it counts
        found: set[str] = _set()
        _strings(code, found)
        if source in found:
            return True
    return False


def _type_text(
    source: object,
    snapshot: tuple[str, ...],
    _type: Callable[[object], type] = type,
    _bytes: type[bytes] = bytes,
    _compile: Callable[..., CodeType] = compile,
    _inert: frozenset[int] = _INERT_OPS,
    _postponed: Callable[[str, tuple[str, ...]], bool] = _postponed_annotation,
    _errors: tuple[type[Exception], ...] = (SyntaxError, ValueError),
) -> bool:
    """Whether a generator may compile this annotation text (``_TYPE_TEXT``): the
    audit event hands the text as UTF-8 bytes."""
    if _type(source) is not _bytes:
        return False
    try:
        text = source.decode()  # type: ignore[attr-defined]
        code = _compile(text, "<annotation>", "eval")
    except _errors:
        return True  # the compile the hook guards fails the same way: nothing runs
    for op in code.co_code[::2]:
        if op not in _inert:
            break
    else:
        return True
    if text.startswith("(") and text.endswith(",)[0]"):  # typing's ``*Ts``
        text = text[1:-5]
    return _postponed(text, snapshot)


def _fields_named(
    frame: FrameType,
    _type: Callable[[object], type] = type,
    _str: type[str] = str,
    _dict: type[dict[Any, Any]] = dict,
    _items: Callable[[dict[Any, Any]], Any] = dict.items,
    _identifier: Callable[[str], bool] = str.isidentifier,
    _keywords: frozenset[str] = frozenset(keyword.kwlist),
    _field: type = dataclasses.Field,
    _slot: Any = _FIELD_NAME,
    _vars: Callable[[object], Any] = vars,
) -> bool:
    """Whether the class dataclasses is making has identifiers for field names, read
    from its ``_process_class`` frame: each field an exact ``Field`` whose own slot
    holds its key, ``Field.name`` still that slot."""
    where = frame.f_code.co_filename
    at: FrameType | None = frame
    while at is not None and at.f_code.co_filename == where:
        if at.f_code.co_name == "_process_class":
            fields = at.f_locals.get("fields")
            if _type(fields) is not _dict or _vars(_field)["name"] is not _slot:
                return False
            for name, field in _items(fields):  # type: ignore[arg-type]
                if not (
                    _type(name) is _str
                    and _identifier(name)
                    and name not in _keywords
                    and _type(field) is _field
                    and _slot.__get__(field) is name
                ):
                    return False
            return True
        at = at.f_back
    return False


def _names_compiler(
    code: CodeType,
    _names: frozenset[str] = _COMPILERS,
    _load_global: int = opcode.opmap["LOAD_GLOBAL"],
    _load_name: int = opcode.opmap["LOAD_NAME"],
    _extended: int = opcode.opmap["EXTENDED_ARG"],
    _global_shift: int = _GLOBAL_SHIFT,
    _range: Callable[[int, int, int], Any] = range,
    _len: Callable[[bytes], int] = len,
) -> bool:
    """Whether ``code`` loads ``exec``, ``eval`` or ``compile`` by name (a global or a
    builtin: what the scanner reads as CPL-DYN-001), not as an attribute (``ns.exec``)
    or a value it was handed."""
    raw = code.co_code
    names = code.co_names
    extended = 0
    for at in _range(0, _len(raw), 2):
        op = raw[at]
        arg = raw[at + 1] | extended
        if op == _extended:
            extended = arg << 8
            continue
        extended = 0
        if op == _load_global:
            if names[arg >> _global_shift] in _names:
                return True
        elif op == _load_name and names[arg] in _names:
            return True
    return False


def _compiles(
    frame: FrameType,
    source: object,
    snapshot: tuple[str, ...],
    _key: Callable[[FrameType], tuple[str, str] | None] = _stdlib_key,
    _type_texts: frozenset[tuple[str, str]] = _TYPE_TEXT,
    _library_texts: frozenset[tuple[str, str]] = _LIBRARY_TYPE_TEXT,
    _sep: str = os.sep,
    _names_compiler: Callable[[CodeType], bool] = _names_compiler,
    _own: tuple[CodeType, ...] = (_type_text.__code__, _postponed_annotation.__code__),
    _fields: frozenset[tuple[str, str]] = _FIELDS,
    _checked: frozenset[tuple[str, str]] = _CHECKED,
    _type_text: Callable[[object, tuple[str, ...]], bool] = _type_text,
    _fields_named: Callable[[FrameType], bool] = _fields_named,
    _type: Callable[[object], type] = type,
    _bytes: type[bytes] = bytes,
    _len: Callable[[str], int] = len,
    _error: type[RuntimeError] = RuntimeError,
) -> None:
    """Return when ``frame`` may compile ``source``, else RuntimeError."""
    key = _key(frame)
    if key is None:
        # Another library's frame (or the plugin's): it compiles when its own code names
        # a compiler (the scanner reads ``exec`` in the plugin's), unless it is one that
        # evaluates annotation text. An exec it was handed as a value, or calls as an
        # attribute, is one no scanner read there (attack27: pydantic's ImportString).
        code = frame.f_code
        key = (code.co_filename.rpartition(_sep)[2], code.co_qualname)
        if key not in _library_texts:
            if code in _own or _names_compiler(code):
                return
            raise _error(
                f"{code.co_filename} ({code.co_qualname}) compiles through a callable it "
                "does not name (no exec, eval or compile in its code: one a data file "
                "named, or handed to it as a value), so the scanner never read that call "
                "(attack27); call exec, eval or compile by name in the plugin's source"
            )
    elif key in _checked:
        return
    where = f"{key[0]} ({key[1]})"
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
    _same: Callable[..., None] = _same,
    _zipped: Callable[[FrameType], str] = _zipped,
    _native: Callable[[object, tuple[str, ...], str], None] = _native,
    _system: tuple[str, ...] = _SYSTEM_LIBRARIES,
    _compiles: Callable[[FrameType, object, tuple[str, ...]], None] = _compiles,
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
            _compiles(frame, args[0], snapshot)
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
    _read,
    _normpath,
    _open_inside,
    _native,
    _same,
    _stdlib_key,
    _strings,
    _sources,
    _postponed_annotation,
    _type_text,
    _fields_named,
    _names_compiler,
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
