"""Which effective policy values allow more than the defaults, and why, in words.

:func:`loosening` judges one dotted field's value against its default (a
higher limit, a network, best-effort isolation, a higher risk, broad paths,
wildcard hosts, a trusted key, another worker id, less history in the log);
:func:`_leaves` flattens a policy into those fields. What is done with a
loosening (shown by ``caplet policy``, warned and logged by a host) is
:mod:`caplet._host._policy_file`'s.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Callable, Iterator
from typing import Any, Final

from caplet._findings import RiskLevel
from caplet._host._policy import Isolation
from caplet._trust._open import describe_store, is_shared

__all__ = ["loosening"]


def _leaves(policy: object, default: object, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(dotted field, value, default) for every scalar or list field, nested ones flattened;
    the store's address without its password (a setting is shown and logged)."""
    assert dataclasses.is_dataclass(policy)
    for field in dataclasses.fields(policy):
        value = getattr(policy, field.name)
        fallback = getattr(default, field.name)
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, fallback, f"{prefix}{field.name}.")
        elif _keyed(value):
            # Per-plugin tables ([budget.plugins.NAME]): one leaf per value set, against
            # the table's own default for that field (what the plugin gets otherwise).
            for entry in value:
                name = getattr(entry, "plugin", "?")
                for inner in dataclasses.fields(entry):
                    own = getattr(entry, inner.name)
                    if inner.name == "plugin" or own is None:
                        continue
                    yield (
                        f"{prefix}{field.name}.{name}.{inner.name}",
                        own,
                        getattr(policy, inner.name, None),
                    )
        elif f"{prefix}{field.name}" == "store" and isinstance(value, str):
            yield "store", describe_store(value), fallback
        else:
            yield f"{prefix}{field.name}", value, fallback


def _keyed(value: object) -> bool:
    """A tuple of per-plugin tables (dataclasses with a ``plugin`` field)."""
    return (
        isinstance(value, tuple)
        and bool(value)
        and all(dataclasses.is_dataclass(v) and hasattr(v, "plugin") for v in value)
    )


#: Fields where a lower value allows more (a shorter cooldown, a shorter window, less history).
_LOWER_IS_LOOSER: Final = frozenset(
    {
        "cooldown_s",
        "quarantine_window_s",
        "log.retention_days",
        "log.max_rows",
        "log.denials_per_minute",
        "log.allowed_per_minute",
    }
)


#: Fields that change no security decision (how many idle workers wait, how long a start may take).
_NEUTRAL: Final = frozenset(
    {
        "guest.pool_size",
        "start_timeout_s",
        # Metrics change what is seen, not what is allowed (the decision log is unchanged).
        "metrics.enabled",
        "metrics.publish_s",
        "metrics.max_plugins",
    }
)


def loosening(field: str, value: object, default: object) -> str:
    """Why ``value`` allows more than ``default`` for ``field``, in words ("" when it does not)."""
    if value == default or field in _NEUTRAL:
        return ""
    describe = _SPECIAL.get(field)
    if describe is not None:
        return describe(value, default)
    if field.startswith("budget."):
        return _budget(field, value, default)
    if isinstance(value, bool) or isinstance(default, bool):
        return "turns on what the default keeps off" if value and not default else ""
    if isinstance(value, int | float) and isinstance(default, int | float):
        if field in _LOWER_IS_LOOSER:
            return f"lower than the default {default:g}" if value < default else ""
        return f"raises the default {default:g}" if value > default else ""
    return ""


def _networks(value: object, default: object) -> str:
    before = default if isinstance(default, tuple) else ()
    added = [n for n in value if n not in before] if isinstance(value, tuple) else []
    if not added:
        return ""
    return "plugins may reach " + ", ".join(f"{n} ({_network_kind(n)})" for n in added)


def _network_kind(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str:
    metadata = ipaddress.ip_address("169.254.169.254")
    if network.version == 4 and metadata in network:
        return "includes the cloud metadata address and its instance credentials"
    if network.is_loopback:
        return "loopback: services on this machine"
    if network.is_link_local:
        return "link-local"
    if network.is_private:
        return "a private network"
    if network.is_multicast:
        return "multicast"
    return "a special-purpose network"


def _risk(value: object, default: object) -> str:
    if (
        isinstance(value, RiskLevel)
        and isinstance(default, RiskLevel)
        and value.order > default.order
    ):
        return f"approves and enables plugins audited up to {value.value} (default {default.value})"
    return ""


def _isolation(value: object, default: object) -> str:
    if value is Isolation.BEST_EFFORT and default is Isolation.STRICT:
        return "runs plugins even when an isolation layer is missing on this machine"
    return ""


def _keys(value: object, default: object) -> str:
    before = default if isinstance(default, tuple) else ()
    if isinstance(value, tuple) and len(value) > len(before):
        count = len(value) - len(before)
        return f"trusts {count} more publisher key(s): plugins they sign may be trusted"
    return ""


def _worker_id(value: object, default: object) -> str:
    if value is not None:
        return (
            f"workers run as host id {value} instead of the default unprivileged account; "
            "make sure that id owns nothing a plugin should not reach"
        )
    return ""


def _store(value: object, default: object) -> str:
    """Another store's approvals are consent here: shared ones, and (attack13d) a state
    database anywhere but this machine's state directory, such as one a project ships
    beside its plugins, whose rows enabled its plugin with no question and no word.
    Since decide14 they are consent only when the operator named the store (not a
    project's own policy file, ``_policy_file.project_store``); the words say both."""
    if not isinstance(value, str) or value.strip() in ("", "sqlite"):
        return ""
    if is_shared(value):
        return (
            "approvals, audits and quarantine are shared with every node using this store: "
            "a plugin approved there is approved here when you name this policy file "
            "(--policy, CAPLET_POLICY) or the store (CAPLET_STORE); named only by a project's "
            "caplet.toml, its approvals vouch for nothing and consent is asked"
        )
    return (
        f"approvals, audits and quarantine are read from the state database in {value.strip()} "
        "instead of this machine's state directory: a plugin approved there is approved here, "
        "without a question, when you name this policy file (--policy, CAPLET_POLICY) or the "
        "store (CAPLET_STORE); named only by a project's caplet.toml, its approvals vouch for "
        "nothing and consent is asked; remove the setting unless you made that database"
    )


def _budget(field: str, value: object, default: object) -> str:
    """A budget loosens when it is removed (0: none) or raised above what the plugin would
    get otherwise; a longer window spreads the same budget thinner, so it loosens too."""
    if not isinstance(value, int | float) or not isinstance(default, int | float):
        return ""
    plugin = field.split(".")[2] if field.startswith("budget.plugins.") else ""
    whose = f"plugin {plugin!r}" if plugin else "every plugin"
    if field.endswith("window_s"):
        return f"{whose}'s budgets last a longer window ({default:g} s)" if value > default else ""
    if default and not value:
        return f"removes {whose}'s {field.rsplit('.', 1)[-1]} budget ({default:g})"
    if default and value > default:
        return f"gives {whose} a larger {field.rsplit('.', 1)[-1]} budget than {default:g}"
    return ""


def _mcp_globs(kind: str) -> Callable[[object, object], str]:
    def describe(value: object, default: object) -> str:
        before = default if isinstance(default, tuple) else ()
        now = value if isinstance(value, tuple) else ()
        if kind == "allow":
            added = [g for g in now if g not in before]
            return "caplet mcp offers tools matching " + ", ".join(added) if added else ""
        removed = [g for g in before if g not in now]
        return "caplet mcp no longer hides tools matching " + ", ".join(removed) if removed else ""

    return describe


def _flag(what: str) -> Callable[[object, object], str]:
    return lambda value, default: what if value is True and default is False else ""


_SPECIAL: Final[dict[str, Callable[[object, object], str]]] = {
    "network.allowed_networks": _networks,
    "max_risk_level": _risk,
    "isolation": _isolation,
    "trusted_keys": _keys,
    "worker_uid": _worker_id,
    "worker_gid": _worker_id,
    "allow_broad_paths": _flag("trusted plugins may be granted / and home directories"),
    "network.allow_wildcard_hosts": _flag("net.http grants of *.domain match every subdomain"),
    "require_signature": lambda value, default: "",
    "store": _store,
    "mcp.exec": _flag("agents connected to caplet mcp may run guest code (the exec tool)"),
    "mcp.allow": _mcp_globs("allow"),
    "mcp.deny": _mcp_globs("deny"),
}
