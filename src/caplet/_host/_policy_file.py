"""One policy from a file: ``caplet.toml`` (or ``[tool.caplet]``), flags on top, and where
each value came from.

Where the policy is read from, first match wins:

1. a file named explicitly (``PluginHost(policy=PATH)``, ``caplet --policy PATH``);
2. the file ``CAPLET_POLICY`` names;
3. ``caplet.toml`` beside the plugins directory (the folder holding it, where
   ``caplet.lock`` lives too);
4. the ``[tool.caplet]`` table of ``pyproject.toml`` there, when it has one;
5. nothing: :class:`Policy`'s defaults.

A ``caplet.toml`` holds :class:`Policy`'s fields at its top level and the
nested limits as tables (``[network]``, ``[context]``, ``[guest]``,
``[log]``, ``[metrics]``, ``[budget]`` with ``[budget.plugins.NAME]``,
``[mcp]``), exactly as ``[tool.caplet]`` does in ``pyproject.toml`` (the
convention of ruff and mypy). Then the command line's overrides
(``--allow-network``, ``--set FIELD=VALUE`` ...), each recorded with its
flag. The merged table is validated by the policy objects themselves, so a
file is held to the same rules as ``Policy(...)`` in Python, and an error
names the file (or flag) and the field.

**Nothing loosens silently.** Each effective value is compared with the
default; one that allows more (a higher limit, a network, best-effort
isolation, a higher risk, broad paths, wildcard hosts, a trusted key,
another worker id, less history in the log) is a *loosening*, described in
words. ``caplet policy`` shows them, and a host built on a policy from a
file or flags logs a warning for each at start and records them in the
decision log (action ``policy``) whenever they differ from the last record.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import stat
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from caplet._errors import PolicyError
from caplet._host._decision_log import MAX_DETAIL_CHARS, bounded_text
from caplet._host._policy import Policy
from caplet._host._policy_allow import allow_policy_text, policy_allowed
from caplet._host._policy_loosening import _leaves, loosening
from caplet._host._policy_override import POLICY_ENV, POLICY_FILE, PolicyOverride
from caplet._logs import caplet_logger
from caplet._toml import TomlLimitError, parse_toml
from caplet._trust._open import STORE_ENV, describe_store
from caplet._trust._store import TrustStore

__all__ = [
    "POLICY_ENV",
    "POLICY_FILE",
    "EffectivePolicy",
    "PolicyOverride",
    "PolicySetting",
    "allow_found_policy",
    "load_policy",
    "note_loosened",
    "project_store",
    "resolve_policy",
    "withheld_warning",
]

_LOG = caplet_logger()
#: The plugin column of the decision log's policy rows.
POLICY_LOG_NAME: Final = "(policy)"


class _DecisionLog(Protocol):
    """What :func:`note_loosened` needs of the manager."""

    @property
    def store(self) -> TrustStore: ...

    def log_decision(
        self, plugin: str, action: str, target: str, allowed: bool, detail: str = ""
    ) -> None: ...


_PYPROJECT: Final = "pyproject.toml"
#: A policy file is a few hundred bytes; anything near this is not one.
_MAX_FILE_BYTES: Final = 1024 * 1024
_DEFAULT_SOURCE: Final = "default"


@dataclass(frozen=True, slots=True)
class PolicySetting:
    """One effective value: its dotted ``field``, ``value`` and ``default``, the ``source``
    it came from (``default``, a file, a flag), and ``loosens``: why it allows more than
    the default ("" when it does not)."""

    field: str
    value: object
    default: object
    source: str
    loosens: str = ""


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """The policy in force and where each of its values came from.

    ``file`` is the policy file that was read (None: none was). ``found`` is its
    source label when caplet found it beside the plugins directory (a project's
    file, which whoever wrote the project chose) rather than the operator naming
    it (``--policy``, ``CAPLET_POLICY``, ``PluginHost(policy=PATH)``): None then.
    """

    policy: Policy
    file: Path | None
    settings: tuple[PolicySetting, ...]
    found: str | None = None
    #: A found file left out because it loosens the defaults and no person allowed its
    #: content (:mod:`caplet._host._policy_allow`): its path and what it would loosen.
    withheld: tuple[Path, tuple[PolicySetting, ...]] | None = None

    @property
    def loosened(self) -> tuple[PolicySetting, ...]:
        """The settings that allow more than the defaults."""
        return tuple(s for s in self.settings if s.loosens)

    @property
    def configured(self) -> bool:
        """True when a file or a flag set anything (not the defaults, not a Policy object)."""
        return any(s.source not in (_DEFAULT_SOURCE, _APPLICATION) for s in self.settings)

    @classmethod
    def of(cls, policy: Policy) -> EffectivePolicy:
        """A policy the application built itself (its source is ``application``)."""
        default = Policy()
        settings = tuple(
            PolicySetting(
                path,
                value,
                fallback,
                _DEFAULT_SOURCE if value == fallback else _APPLICATION,
                loosening(path, value, fallback),
            )
            for path, value, fallback in _leaves(policy, default)
        )
        return cls(policy, None, settings)


_APPLICATION: Final = "application"


def load_policy(
    plugins_dir: Path | str,
    *,
    file: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Sequence[PolicyOverride] = (),
) -> EffectivePolicy:
    """The effective policy for a plugins directory (see the module docstring).

    Raises :class:`PolicyError` naming the file (or flag) and field for a
    file that cannot be read or parsed, or a value the policy refuses.
    """
    env = os.environ if environ is None else environ
    located = _locate(Path(plugins_dir), None if file is None else Path(file), env)
    found = located is not None and file is None and not env.get(POLICY_ENV)
    text = _text(located[0]) if located is not None else None
    effective = _build(located, text, overrides, found=found)
    if not found or located is None or text is None:
        return effective
    label = located[1]
    # What the file loosens by itself and no flag replaced: a flag appended to its list
    # is the person's own (attack28: `--allow-network` on top of a file's empty list
    # made a file that only tightened a loosening one, left out and blamed for it).
    alone = _build(located, text, (), found=True) if overrides else effective
    kept = {s.field for s in effective.settings if label in s.source}
    loosening_here = tuple(s for s in alone.loosened if s.field in kept)
    if not loosening_here or policy_allowed(located[0], text):
        return effective
    # A found file that loosens, not allowed by a person: the defaults and the flags.
    left_out = _build(None, None, overrides, found=False)
    return dataclasses.replace(left_out, withheld=(located[0], loosening_here))


def _build(
    located: tuple[Path, str, str | None] | None,
    text: str | None,
    overrides: Sequence[PolicyOverride],
    *,
    found: bool,
) -> EffectivePolicy:
    """The policy of the file ``located`` (its ``text``) and the flags ``overrides``."""
    raw: dict[str, Any] = {}
    sources: dict[str, str] = {}
    path: Path | None = None
    if located is not None:
        path, label, table = located
        data = _read(path, table, text)
        raw = _plain(data)
        for key in _leaf_keys(data, Policy):
            sources[key] = label
    for override in overrides:
        _apply(raw, override)
        previous = sources.get(override.field)
        sources[override.field] = (
            f"{previous} + {override.source}"
            if override.appended and previous and previous != override.source
            else override.source
        )
    try:
        policy = Policy(**raw)
    except PolicyError as exc:
        raise PolicyError(_located_message(exc, sources), exc.problems) from None
    default = Policy()
    settings = tuple(
        PolicySetting(
            leaf,
            value,
            fallback,
            _source_of(leaf, sources),
            loosening(leaf, value, fallback),
        )
        for leaf, value, fallback in _leaves(policy, default)
    )
    return EffectivePolicy(policy, path, settings, located[1] if found and located else None)


def project_store(effective: EffectivePolicy, environ: Mapping[str, str] | None = None) -> str:
    """``store = VALUE (FILE)`` when only a project's policy file names the store, else "".

    A decision that matters is a person's or an explicit argument's (decide14): the
    approvals in a store a cloned project names (``store = "approvals"`` beside the
    state database it ships, or a PostgreSQL URL) are its author's, so they vouch for
    nothing here. The operator names a store with ``CAPLET_STORE``, a flag
    (``--set store=...``), a policy file of their own (``--policy``, ``CAPLET_POLICY``)
    or ``PluginHost(store=...)``; then it vouches, as a fleet's PostgreSQL does.
    """
    env = os.environ if environ is None else environ
    if effective.found is None or env.get(STORE_ENV, "").strip():
        return ""
    setting = next((s for s in effective.settings if s.field == "store"), None)
    if setting is None or setting.source != effective.found:
        return ""
    value = setting.value.strip() if isinstance(setting.value, str) else ""
    if value in ("", "sqlite"):
        return ""  # this machine's own state directory, whoever wrote it down
    return f"store = {describe_store(value)} ({effective.found})"


def resolve_policy(
    policy: Policy | EffectivePolicy | Path | str | None, plugins_dir: Path | str
) -> EffectivePolicy:
    """What ``PluginHost(policy=...)`` was given, as an :class:`EffectivePolicy`: a
    :class:`Policy` as it is, a path as that file, None as the file found for
    ``plugins_dir`` (or the defaults)."""
    if isinstance(policy, EffectivePolicy):
        return policy
    if isinstance(policy, Policy):
        return EffectivePolicy.of(policy)
    return load_policy(plugins_dir, file=policy)


def note_loosened(effective: EffectivePolicy, log: _DecisionLog) -> None:
    """Warn about each loosening of a policy from a file or flags, and record them in
    the decision log when they differ from the last record (a policy an application
    built in Python is its own code's decision, and is not logged)."""
    if effective.withheld is not None:
        _LOG.warning("caplet: %s", withheld_warning(effective.withheld))
    if not effective.configured:
        return
    loosened = [s for s in effective.loosened if s.source not in (_DEFAULT_SOURCE, _APPLICATION)]
    if not loosened:
        return
    lines = [f"{s.field} = {_shown(s.value)} ({s.source}): {s.loosens}" for s in loosened]
    for line in lines:
        _LOG.warning("policy loosens %s", line)
    detail = "loosens: " + "; ".join(lines)
    target = str(effective.file) if effective.file is not None else "flags"
    last = log.store.decisions(POLICY_LOG_NAME, 1)
    # Compared as the log keeps it (a long detail is cut), or it would be written every start.
    kept = bounded_text(detail, MAX_DETAIL_CHARS)
    if last and last[0].detail == kept and last[0].target == target:
        return
    log.log_decision(POLICY_LOG_NAME, "policy", target, True, detail)


def withheld_warning(withheld: tuple[Path, tuple[PolicySetting, ...]]) -> str:
    """Why a found policy file was left out, and the command that allows it."""
    path, loosened = withheld
    path = Path(os.path.abspath(path))  # noqa: PTH100 (shown, not used: no link resolved)
    fields = ", ".join(f"{s.field} = {_shown(s.value)}" for s in loosened[:4])
    more = f" and {len(loosened) - 4} more" if len(loosened) > 4 else ""
    return (
        f"the policy file {path}, found beside the plugins directory, loosens the defaults "
        f"({fields}{more}) and no person has allowed it: it is not applied, the defaults "
        f"are; read it, then run `caplet policy --allow` (or name it with --policy)"
    )


def allow_found_policy(
    plugins_dir: Path | str,
    environ: Mapping[str, str] | None = None,
    *,
    file: Path | str | None = None,
) -> tuple[Path, Path]:
    """Allow the policy file found beside ``plugins_dir`` with its current text: (the file,
    the allow list). PolicyError when there is none to allow, or it cannot be recorded, or
    the operator names the policy file (``file``: ``--policy``; ``CAPLET_POLICY``)."""
    env = os.environ if environ is None else environ
    if file is not None:
        # attack28: --policy was ignored here, so `caplet --policy mine.toml policy
        # --allow` allowed the project's file, one the person had not named nor read.
        raise PolicyError(
            f"--policy names the policy file ({file}): it is your choice and needs no "
            "allowing; run `caplet policy --allow` without --policy to allow the file "
            "beside the plugins directory"
        )
    if env.get(POLICY_ENV):
        raise PolicyError(
            f"{POLICY_ENV} names the policy file: it is the operator's choice and needs no "
            "allowing; unset it to allow the file beside the plugins directory"
        )
    located = _locate(Path(plugins_dir), None, env)
    if located is None:
        raise PolicyError(
            f"no policy file beside {plugins_dir} ({POLICY_FILE} or pyproject.toml's "
            "[tool.caplet]): nothing to allow"
        )
    path = located[0]
    text = _text(path)
    _read(path, located[2], text)  # only a file that parses is allowed
    try:
        return path, allow_policy_text(path, text)
    except OSError as exc:
        raise PolicyError(
            f"cannot record that {path} is allowed ({exc.strerror or exc}); check that "
            "caplet's user state directory is writable"
        ) from exc


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


# -- finding and reading the file ----------------------------------------------------------------


def _locate(
    plugins_dir: Path, explicit: Path | None, environ: Mapping[str, str]
) -> tuple[Path, str, str | None] | None:
    """(path, source label, table) of the policy file, or None. ``table`` is ``tool.caplet``
    for a pyproject.toml, None for a caplet.toml (its top level)."""
    if explicit is not None:
        return explicit, str(explicit), _table_for(explicit)
    named = environ.get(POLICY_ENV, "")
    if named:
        path = Path(named)
        return path, f"{named} ({POLICY_ENV})", _table_for(path)
    beside = plugins_dir.parent
    own = beside / POLICY_FILE
    # A link whose target is gone is an error (_text says so), never the defaults: the
    # file it named may have tightened what the defaults allow.
    if own.exists() or own.is_symlink():
        return own, str(own), None
    pyproject = beside / _PYPROJECT
    if pyproject.is_file() and _has_tool_table(pyproject):
        return pyproject, f"{pyproject} [tool.caplet]", "tool.caplet"
    return None


def _table_for(path: Path) -> str | None:
    return "tool.caplet" if path.name == _PYPROJECT else None


def _has_tool_table(path: Path) -> bool:
    """True when pyproject.toml has a [tool.caplet] table.

    A file that mentions caplet but cannot be parsed counts as having one, so
    that :func:`_read` says what is wrong with it instead of the defaults
    being used silently; a file that never mentions caplet is someone else's.
    """
    text = _text(path)
    if "caplet" not in text:
        return False
    try:
        data = parse_toml(text)
    except (tomllib.TOMLDecodeError, TomlLimitError):
        return True
    tool = data.get("tool")
    return isinstance(tool, dict) and "caplet" in tool


def _text(path: Path) -> str:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise PolicyError(
                    f"policy file {path}: not a regular file; name the policy file itself"
                )
            data = handle.read(_MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise PolicyError(
            f"policy file {path}: no such file; create it, or name an existing one "
            f"(--policy, {POLICY_ENV})"
        ) from None
    except OSError as exc:
        raise PolicyError(
            f"policy file {path}: cannot be read ({exc.strerror or exc}); make it a readable file"
        ) from exc
    if len(data) > _MAX_FILE_BYTES:
        raise PolicyError(
            f"policy file {path}: larger than {_MAX_FILE_BYTES} bytes, which no policy is; "
            "name the right file"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"policy file {path}: not UTF-8 ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None


def _read(path: Path, table: str | None, text: str | None = None) -> dict[str, Any]:
    """The policy table of ``path`` (its ``text`` when already read: the very text a
    person's allowing was checked against)."""
    if text is None:
        text = _text(path)
    try:
        data = parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"policy file {path}: not valid TOML: {exc}; fix the syntax") from None
    except TomlLimitError as exc:
        raise PolicyError(f"policy file {path}: {exc}") from None
    if table is None:
        return data
    node: object = data
    for key in table.split("."):
        node = node.get(key, {}) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise PolicyError(f"policy file {path}: [{table}] must be a table of policy fields")
    return node


# -- merging ---------------------------------------------------------------------------------------


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a TOML table (its own dicts, so overrides never change the parsed data)."""
    return {k: _plain(v) if isinstance(v, dict) else v for k, v in data.items()}


def _leaf_keys(data: Mapping[str, Any], owner: type | None, prefix: str = "") -> Iterator[str]:
    """The dotted keys a table sets: a table under a nested settings field is a branch."""
    nested = _nested_fields(owner)
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and key in nested:
            yield from _leaf_keys(value, nested[key], f"{dotted}.")
        else:
            yield dotted


def _nested_fields(owner: type | None) -> dict[str, type]:
    if owner is None or not dataclasses.is_dataclass(owner):
        return {}
    found: dict[str, type] = {}
    for field in dataclasses.fields(owner):
        if field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
            if dataclasses.is_dataclass(value):
                found[field.name] = type(value)
    return found


def _apply(raw: dict[str, Any], override: PolicyOverride) -> None:
    """Set (or append to) ``override.field`` in the raw table, creating tables on the way."""
    *parents, leaf = override.field.split(".")
    node = raw
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    if override.appended:
        current = node.get(leaf)
        if current is None:
            current = _default_value(override.field)
        listed = list(current) if isinstance(current, list | tuple) else [current]
        node[leaf] = [*listed, override.value]
    else:
        node[leaf] = override.value


def _default_value(dotted: str) -> object:
    node: object = Policy()
    for part in dotted.split("."):
        node = getattr(node, part, ())
    return node


def _source_of(leaf: str, sources: Mapping[str, str]) -> str:
    if leaf in sources:
        return sources[leaf]
    # A table of tables set as one value ([budget.plugins.NAME]) is recorded whole.
    prefixes = [key for key in sources if leaf.startswith(f"{key}.")]
    if prefixes:
        return sources[max(prefixes, key=len)]
    return _DEFAULT_SOURCE


def _located_message(exc: PolicyError, sources: Mapping[str, str]) -> str:
    """The error with the source of each bad field (a file, a flag) in front of it."""
    if not exc.problems:
        return str(exc)
    parts = []
    for problem in exc.problems:
        field = problem.field.split("[", 1)[0]
        source = sources.get(field) or next(
            (s for key, s in sources.items() if field.startswith(f"{key}.")), ""
        )
        where = f"{source}: " if source else ""
        parts.append(f"{where}{problem}")
    return "invalid policy: " + "; ".join(parts)
