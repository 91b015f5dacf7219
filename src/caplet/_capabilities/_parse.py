"""Parse capability strings (design.md section 3) into typed, normalised capabilities.

A capability is ``<kind>:<value>``. Parsing is strict and purely textual: it
never touches the filesystem, the network or the environment (the only
outside input is the current user's home directory, as a string, to refuse
it as too broad). Every error quotes the capability, says what was expected
and how to fix it.

Values may reference configuration as ``${config.NAME}``; such a capability
is *templated* and its value checks are deferred to :func:`substitute`,
which re-parses the substituted text in full so a configured value can never
widen a grant past what a literal would be allowed to say.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import assert_never

from caplet._capabilities._model import (
    GLOB_CHARS,
    AppCapability,
    Capability,
    CapabilityKind,
    EnvReadCapability,
    FsCapability,
    HostCallCapability,
    NetHttpCapability,
    ProcExecCapability,
)
from caplet._capabilities._parse_http import parse_http
from caplet._config._schema import ConfigValue
from caplet._errors import CapabilityError
from caplet._suggest import did_you_mean

__all__ = [
    "HOME_ROOTS",
    "KNOWN_KINDS",
    "SHELLS_AND_INTERPRETERS",
    "TEMPLATE_RE",
    "parse_capability",
    "substitute",
    "template_names",
]

#: A well-formed configuration placeholder; group 1 is the field name.
TEMPLATE_RE = re.compile(r"\$\{config\.([A-Za-z0-9_]+)\}")

#: The capability kinds, as written before the first ``:``.
KNOWN_KINDS: tuple[str, ...] = tuple(kind.value for kind in CapabilityKind)

#: Directories that hold every user's home; refused as fs roots (the current
#: user's own home directory is refused as well, computed at parse time).
HOME_ROOTS = ("/home", "/root", "/Users")

#: Programs that run arbitrary code or other programs given as arguments:
#: granting ``proc.exec`` on one of them grants everything. Lower-case, as
#: names are compared case-insensitively (``Rscript``, ``cmd.EXE``). The
#: second group adds launchers of the same kind (``pkexec``, ``chroot``,
#: ``time``, ``watch``, ``expect`` ...) that run their arguments as a program.
SHELLS_AND_INTERPRETERS = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
        "env", "sudo", "doas", "su", "xargs", "nohup", "timeout", "nice", "setsid",
        "stdbuf", "python", "python3", "pypy", "pypy3", "perl", "ruby", "node", "nodejs",
        "deno", "bun", "php", "lua", "luajit", "tclsh", "wish", "awk", "gawk", "mawk",
        "nawk", "rscript", "osascript", "pwsh", "powershell", "cmd", "java", "jshell",
        "irb", "ipython",
        "ash", "rbash", "yash", "pkexec", "runuser", "chroot", "ionice", "taskset",
        "chrt", "time", "watch", "script", "expect",
    }
)  # fmt: skip

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE_RE = re.compile(r"[a-z_][a-z0-9_]*")
_APP_RE = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*")
_PROGRAM_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")
_GLOB_CHARS = GLOB_CHARS

_FS_EXAMPLE = {
    CapabilityKind.FS_READ: "fs.read:/srv/data",
    CapabilityKind.FS_WRITE: "fs.write:/srv/out",
}


def template_names(text: str) -> tuple[str, ...]:
    """The config field names ``text`` references as ``${config.NAME}``, in order."""
    return tuple(dict.fromkeys(m.group(1) for m in TEMPLATE_RE.finditer(text)))


def parse_capability(
    text: str, *, config_names: Collection[str] = (), allow_broad: bool = False
) -> Capability:
    """Parse one capability string.

    ``config_names`` are the configuration fields a ``${config.NAME}``
    placeholder may name; ``allow_broad`` (a policy exception) permits ``/``,
    home-directory roots and globs starting at ``/`` for fs capabilities.
    Raises :class:`CapabilityError`.
    """
    kind, value = _split(text)
    if "${" in value:
        names = template_names(value)
        if TEMPLATE_RE.sub("", value).count("${"):
            raise CapabilityError(
                f"malformed placeholder in capability {text!r}; write ${{config.NAME}} "
                f"with NAME a declared config field"
            )
        for name in names:
            if name not in config_names:
                if config_names:
                    hint = did_you_mean(name, sorted(config_names))
                    known = f"declared config fields: {', '.join(sorted(config_names))}"
                else:
                    hint, known = "", "the manifest declares no config fields"
                raise CapabilityError(
                    f"capability {text!r} references unknown config field {name!r}{hint}; "
                    f"{known}; declare it under [config.{name}]"
                )
        return _templated(kind, value, text)
    return _parse_value(kind, value, text, allow_broad=allow_broad)


def substitute(
    capability: Capability, config: Mapping[str, ConfigValue], *, allow_broad: bool = False
) -> Capability:
    """Replace every ``${config.NAME}`` of a templated capability and re-parse it.

    Placeholders take string or number values (numbers written without a
    trailing ``.0`` when whole, so a port works); booleans, arrays and
    missing values are refused, and so are values that themselves contain
    ``${``. The result keeps the template as its ``declared`` text and has
    ``templated=False``. A capability that is not templated is returned as is.
    """
    if not capability.templated:
        return capability
    kind_text, _, template = capability.declared.partition(":")
    kind = CapabilityKind(kind_text)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in config:
            raise CapabilityError(
                f"capability {capability.declared!r} uses config field {name!r}, which has "
                f"no value; set it, e.g. {name}=..."
            )
        return _placeholder_text(capability.declared, name, config[name])

    value = TEMPLATE_RE.sub(replace, template)
    return _parse_value(kind, value, capability.declared, allow_broad=allow_broad)


def _placeholder_text(declared: str, name: str, value: ConfigValue) -> str:
    if isinstance(value, bool | tuple):
        kind = "a boolean" if isinstance(value, bool) else "an array"
        raise CapabilityError(
            f"capability {declared!r} uses config field {name!r}, which holds {kind}; "
            f"only string and number fields can appear in a capability"
        )
    if isinstance(value, float):
        if not value.is_integer():
            return repr(value)
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if "${" in value:
        raise CapabilityError(
            f"capability {declared!r}: config field {name!r} contains '${{'; a configured "
            f"value cannot hold another placeholder"
        )
    return value


# -- shared helpers ---------------------------------------------------------------


def _split(text: str) -> tuple[CapabilityKind, str]:
    """Check the whole text and split it into its kind and value."""
    _check_chars(text, text)
    if text != text.strip():
        raise CapabilityError(f"capability {text!r} has leading or trailing whitespace; remove it")
    kind_text, sep, value = text.partition(":")
    if not sep:
        raise CapabilityError(
            f"capability {text!r} has no kind; expected '<kind>:<value>', e.g. "
            f"'fs.read:/srv/data' (known kinds: {', '.join(KNOWN_KINDS)})"
        )
    if kind_text not in KNOWN_KINDS:
        raise CapabilityError(
            f"unknown capability kind {kind_text!r} in {text!r}"
            f"{did_you_mean(kind_text.lower(), KNOWN_KINDS)}; "
            f"known kinds: {', '.join(KNOWN_KINDS)}"
        )
    kind = CapabilityKind(kind_text)
    if not value:
        raise CapabilityError(
            f"capability {text!r} has an empty value; write what it grants after "
            f"'{kind_text}:', e.g. {_example(kind)}"
        )
    return kind, value


def _check_chars(value: str, declared: str) -> None:
    """Refuse control characters (NUL, newline, ESC ...), invisible format characters and
    runs of combining marks longer than any real text holds (:mod:`caplet._marks`).

    Format characters (Unicode category Cf: bidi overrides, zero-width
    spaces) are refused too: a capability is shown to a human approver, and
    these make the text read differently from what it grants (the "Trojan
    Source" attack, CVE-2021-42574).
    """
    for char in value:
        if unicodedata.category(char) in ("Cc", "Cf"):
            shown = declared if value == declared else f"{declared} (after substitution: {value})"
            raise CapabilityError(
                f"control or invisible character U+{ord(char):04X} in capability {shown!r}; "
                f"capabilities must be plain printable text"
            )
    if not value.isascii():
        # imported here: RE2 is loaded only for a capability that is not ASCII
        from caplet._marks import MAX_MARKS, longest_mark_run

        run = longest_mark_run(value)
        if run is not None:
            # urlsplit and the IDNA codec normalise a host (NFKC) by a sort quadratic in a
            # run of marks: 40,000 took 7.6 s, a 1 MiB manifest minutes (attack25)
            shown = declared if len(declared) <= 60 else declared[:59] + "…"
            raise CapabilityError(
                f"capability {shown!r} holds a run of {run[1]} combining marks (no real "
                f"text holds more than {MAX_MARKS}); capabilities must be plain printable "
                "text: remove the run"
            )


def _example(kind: CapabilityKind) -> str:
    if kind is CapabilityKind.FS_READ or kind is CapabilityKind.FS_WRITE:
        return _FS_EXAMPLE[kind]
    if kind is CapabilityKind.NET_HTTP:
        return "net.http:https://api.example.com"
    if kind is CapabilityKind.ENV_READ:
        return "env.read:API_TOKEN"
    if kind is CapabilityKind.PROC_EXEC:
        return "proc.exec:git"
    if kind is CapabilityKind.HOST_CALL:
        return "host.call:fsread"
    if kind is CapabilityKind.APP:
        return "app:email.send"
    assert_never(kind)


def _templated(kind: CapabilityKind, value: str, declared: str) -> Capability:
    """A capability whose value is checked only once :func:`substitute` fills it in."""
    if kind is CapabilityKind.FS_READ or kind is CapabilityKind.FS_WRITE:
        return FsCapability(kind, value, declared, templated=True)
    if kind is CapabilityKind.NET_HTTP:
        # Scheme, host and port may all come from configuration, so none is
        # known yet: keep the raw text as ``host`` and a port of 0 that no
        # request can match; str() shows the declared text.
        scheme = "http" if value.lower().startswith("http://") else "https"
        return NetHttpCapability(scheme, value, 0, "", declared, templated=True)
    if kind is CapabilityKind.ENV_READ:
        return EnvReadCapability(value, declared, templated=True)
    if kind is CapabilityKind.PROC_EXEC:
        return ProcExecCapability(value, declared, templated=True)
    if kind is CapabilityKind.HOST_CALL:
        return HostCallCapability(value, declared, templated=True)
    if kind is CapabilityKind.APP:
        return AppCapability(value, declared, templated=True)
    assert_never(kind)


def _parse_value(
    kind: CapabilityKind, value: str, declared: str, *, allow_broad: bool
) -> Capability:
    """Parse a literal (or substituted) value; ``declared`` is quoted in errors."""
    _check_chars(value, declared)
    if not value:
        raise CapabilityError(
            f"capability {declared!r} has an empty value after substitution; "
            f"configure a value, e.g. {_example(kind)}"
        )
    if kind is CapabilityKind.FS_READ or kind is CapabilityKind.FS_WRITE:
        return _parse_fs(kind, value, declared, allow_broad=allow_broad)
    if kind is CapabilityKind.NET_HTTP:
        return parse_http(value, declared)
    if kind is CapabilityKind.ENV_READ:
        return _parse_env(value, declared)
    if kind is CapabilityKind.PROC_EXEC:
        return _parse_proc(value, declared)
    if kind is CapabilityKind.HOST_CALL:
        if not _MODULE_RE.fullmatch(value):
            raise CapabilityError(
                f"invalid module name {value!r} in capability {declared!r}; expected a "
                f"module name matching [a-z_][a-z0-9_]*, e.g. host.call:fsread"
            )
        return HostCallCapability(value, declared)
    if kind is CapabilityKind.APP:
        if not _APP_RE.fullmatch(value):
            raise CapabilityError(
                f"invalid app capability name {value!r} in {declared!r}; expected dotted "
                f"lower-case segments ([a-z][a-z0-9_-]* joined by '.'), e.g. app:email.send"
            )
        return AppCapability(value, declared)
    assert_never(kind)


# -- fs.read / fs.write -------------------------------------------------------------


def _home() -> str | None:
    try:
        return _normalise_path(str(Path.home()))
    except (RuntimeError, KeyError):  # no HOME and no passwd entry (pathlib docs)
        return None


def _normalise_path(path: str) -> str:
    """Collapse ``//`` and ``/./`` and drop a trailing slash, purely textually."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def _parse_fs(
    kind: CapabilityKind, value: str, declared: str, *, allow_broad: bool
) -> FsCapability:
    example = _FS_EXAMPLE[kind]
    if value.startswith("~"):
        raise CapabilityError(
            f"path {value!r} in capability {declared!r} is relative to a home directory; "
            f"use an absolute path, e.g. {example}"
        )
    if not value.startswith("/"):
        raise CapabilityError(
            f"path {value!r} in capability {declared!r} is relative; "
            f"use an absolute path, e.g. {example}"
        )
    if ".." in value.split("/"):
        raise CapabilityError(
            f"path {value!r} in capability {declared!r} contains a '..' component; "
            f"name the directory directly, e.g. {example}"
        )
    path = _normalise_path(value)
    parts = path.split("/")[1:] if path != "/" else []
    is_glob = any(c in _GLOB_CHARS for c in path)
    # The literal part before the first glob component is what a glob is
    # rooted at: /*/x is as broad as /, and /home/* as broad as /home.
    literal: list[str] = []
    for part in parts:
        if any(c in _GLOB_CHARS for c in part):
            break
        literal.append(part)
    root = "/" + "/".join(literal)
    if not allow_broad:
        if root == "/":
            what = "the whole filesystem" if path == "/" else "a glob starting at '/' (too broad)"
            raise CapabilityError(
                f"capability {declared!r} refers to {what}; name the directory the plugin "
                f"needs, e.g. {example}"
            )
        home = _home()
        if root in HOME_ROOTS or (home is not None and root == home):
            raise CapabilityError(
                f"capability {declared!r} refers to a home-directory root ({root}); name a "
                f"directory inside it, e.g. {kind.value}:{root}/project"
            )
    return FsCapability(kind, path, declared, is_glob=is_glob)


# -- net.http -------------------------------------------------------------------------


def _parse_env(value: str, declared: str) -> EnvReadCapability:
    if "*" in value or "?" in value:
        raise CapabilityError(
            f"capability {declared!r} uses a wildcard; name each variable in its own "
            f"capability, e.g. env.read:API_TOKEN"
        )
    if not _ENV_NAME_RE.fullmatch(value):
        raise CapabilityError(
            f"invalid environment variable name {value!r} in capability {declared!r}; "
            f"expected [A-Za-z_][A-Za-z0-9_]*, e.g. env.read:API_TOKEN"
        )
    return EnvReadCapability(value, declared)


def _parse_proc(value: str, declared: str) -> ProcExecCapability:
    if any(c.isspace() for c in value):
        raise CapabilityError(
            f"capability {declared!r} contains whitespace; declare only the program; "
            f"arguments are not part of the capability (e.g. proc.exec:git)"
        )
    if any(c in _GLOB_CHARS for c in value):
        raise CapabilityError(
            f"capability {declared!r} uses a wildcard; name one program, e.g. proc.exec:git"
        )
    if value.startswith("/"):
        if ".." in value.split("/"):
            raise CapabilityError(
                f"program path {value!r} in capability {declared!r} contains '..'; "
                f"write the absolute path directly, e.g. proc.exec:/usr/bin/git"
            )
        program = _normalise_path(value)
        base = program.rsplit("/", 1)[-1]
        if program == "/" or not _PROGRAM_RE.fullmatch(base):
            raise CapabilityError(
                f"invalid program path {value!r} in capability {declared!r}; expected an "
                f"absolute path to a program, e.g. proc.exec:/usr/bin/git"
            )
    else:
        if not _PROGRAM_RE.fullmatch(value):
            raise CapabilityError(
                f"invalid program {value!r} in capability {declared!r}; expected a program "
                f"name (proc.exec:git) or an absolute path (proc.exec:/usr/bin/git)"
            )
        program = base = value
    return ProcExecCapability(
        program, declared, is_shell_or_interpreter=_is_shell_or_interpreter(base)
    )


def _is_shell_or_interpreter(basename: str) -> bool:
    name = basename.lower()
    name = name.removesuffix(".exe")
    if name in SHELLS_AND_INTERPRETERS:
        return True
    return _without_version(name) in SHELLS_AND_INTERPRETERS


def _without_version(name: str) -> str:
    """``name`` without a version at its end: ``python3.11`` -> ``python``, ``lua5.4`` ->
    ``lua``, ``tclsh8.6`` -> ``tclsh``, ``pypy-3`` -> ``pypy``.

    What ``re.sub(r"[-_.]?\\d+(\\.\\d+)*$", "", name)`` gives, read from the end in one
    pass: that search tried the pattern at every position of a run of digits and each
    try read to the end, so a ``proc.exec`` capability of 20,000 digits took 18 s to
    parse, a 1 MiB manifest hours (attack25)."""
    start = len(name)
    while start and name[start - 1].isdecimal():  # \d: a decimal digit of any script
        start -= 1
        if start >= 2 and name[start - 1] == "." and name[start - 2].isdecimal():
            start -= 1  # a dot between two runs of digits: the version goes on
    if start == len(name):
        return name  # no digit at the end: no version
    if start and name[start - 1] in "-_.":
        start -= 1
    return name[:start]
