"""Supply-chain attacks: what a plugin's files and manifest try before and after review.

These aim at the gates rather than the sandbox: undeclared registrations,
danger the manifest does not cover, interpreter start-up hooks (``.pth``,
``sitecustomize.py``), links and paths in the manifest that point out of
the plugin, and content that changes after it was approved (swapped files,
a widened manifest) or while it is being loaded.
"""

from __future__ import annotations

from pathlib import Path

from caplet._errors import CapletError, LifecycleError
from caplet._host._host import PluginHost
from caplet._selftest._checks import enable_refused, escaped
from caplet._selftest._model import (
    Arena,
    Attempt,
    Check,
    Family,
    HostileCase,
    Layer,
    Scenario,
    breach_unless,
    expect,
)

__all__ = ["CASES"]

UNDECLARED = """
def run():
    return "declared"


def shell():
    return "undeclared code ran"


def create_functions(config):
    return {
        "main": {"run": run, "ping": ping, "crash": crash, "extra": shell},
        "backdoor": {"shell": shell},
    }
"""

DANGER_GATED = """
import subprocess


def run():
    return subprocess.run(["/bin/sh", "-c", "id"], capture_output=True).stdout


def create_functions(config):
    with open(os.path.join(config["out"], "create_functions-ran"), "w") as handle:
        handle.write("ran")
    return {"main": {"run": run, "ping": ping, "crash": crash}}
"""

REEXPORTED = """
import shutil


def run():
    return shutil.os.system("id")


def create_functions(config):
    with open(os.path.join(config["out"], "create_functions-ran"), "w") as handle:
        handle.write("ran")
    return {"main": {"run": run, "ping": ping, "crash": crash}}
"""

HONEST = """
def run():
    return "the reviewed code"
"""

SWAPPED = """
def run():
    return "swapped code ran"
"""

#: Refused by the danger gate (native code, no capability covers it).
GATED_VARIANT = """
import ctypes


def run():
    return "the gated variant ran " + str(ctypes.sizeof(ctypes.c_int))
"""

STARTUP_MARKER = """
def run(token):
    # Whatever ran at interpreter start-up would have left this marker.
    return {"ran": os.path.exists(f"/tmp/{token}-startup")}
"""

_PTH = "import os; open('/tmp/{token}-startup', 'w').write('ran')\n"
_SITECUSTOMIZE = "open('/tmp/{token}-startup', 'w').write('ran')\n"


def undeclared_rejected(attempt: Attempt, _arena: Arena, host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    expect(attempt.value == "declared", attempt.describe())
    expect(attempt.rejected == ("main.extra", "backdoor"), f"rejected {attempt.rejected}")
    logged = {
        d.target
        for d in host.manager.store.decisions(attempt.plugin)
        if d.action == "register" and not d.allowed
    }
    expect(logged == {"main.extra", "backdoor"}, f"logged refusals: {logged}")
    for target in ("backdoor.shell", "main.extra"):
        try:
            value = host.call(attempt.plugin, target)
        except LifecycleError as exc:
            expect("does not declare" in str(exc), str(exc))
        except CapletError as exc:
            expect(False, f"{target}: {type(exc).__name__}: {exc}")
        else:
            breach_unless(False, f"the undeclared {target} ran and returned {value!r}")


def race_never_ran_the_gated_variant(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    value = attempt.value
    expect(isinstance(value, dict), attempt.describe())
    assert isinstance(value, dict)
    expect("swapper" not in value, f"the race did not run: {value.get('swapper')}")
    expect(value["swaps"] > 0, "the race did not run: nothing was swapped")
    returned = value["returned"]
    breach_unless(
        not any("gated variant ran" in answer for answer in returned),
        f"the variant the danger gate refuses ran: {returned}",
    )
    unexpected = [a for a in returned if a not in (repr("the reviewed code"), "WorkerStartError")]
    expect(not unexpected, f"unexpected answers: {unexpected}")


def gate_never_ran_plugin_code(*says: str) -> Check:
    refused = enable_refused(*says)

    def check(attempt: Attempt, arena: Arena, host: PluginHost) -> None:
        # create_functions would have written this (its grant is writable): it never ran.
        breach_unless(
            not (arena.out(attempt.plugin) / "create_functions-ran").exists(),
            "create_functions ran",
        )
        refused(attempt, arena, host)
        refusals = [
            d
            for d in host.manager.store.decisions(attempt.plugin)
            if d.action == "enable" and not d.allowed
        ]
        expect(refusals, "the refusal must be in the permission log")

    return check


def startup_hook_inert(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    breach_unless(attempt.value == {"ran": False}, f"a start-up hook ran: {attempt.describe()}")
    host_tmp = Path("/tmp")  # noqa: S108 - where the hooks write when no jail hides it
    breach_unless(
        not (host_tmp / f"{arena.token}-startup").exists(), "a start-up hook ran in the host's /tmp"
    )


def swapped_code_refused(*says: str) -> Check:
    refused = enable_refused(*says)

    def check(attempt: Attempt, arena: Arena, host: PluginHost) -> None:
        breach_unless(attempt.value != "swapped code ran", "the swapped code ran")
        refused(attempt, arena, host)

    return check


def restart_refused(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    """The restarted worker runs the enable's own snapshot again, never the swapped files.

    One snapshot per enable (issue 13, point 5): a restart loads a copy of
    what was audited and gated, verified against its hash, so the live
    folder's change is seen (the approval no longer covers it) but not loaded.
    """
    breach_unless(not escaped(attempt), attempt.describe())
    breach_unless(
        "swapped code ran" not in repr(attempt.followup), f"the swapped code ran: {attempt}"
    )
    expect(attempt.value == "the reviewed code", f"the first call returned {attempt.value!r}")
    expect(attempt.error is None, f"the restart failed: {attempt.describe()}")
    expect(
        attempt.followup == "the reviewed code",
        f"the restarted worker returned {attempt.followup!r}",
    )


def _token(arena: Arena, _plugin: str) -> tuple[object, ...]:
    return (arena.token,)


CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "undeclared-module",
        Family.SUPPLY_CHAIN,
        "register a module and a function the manifest does not declare",
        Layer.DECLARATIVE_API,
        UNDECLARED,
        undeclared_rejected,
    ),
    HostileCase(
        "danger-gated",
        Family.SUPPLY_CHAIN,
        "run a program through subprocess without declaring proc.exec",
        Layer.DANGER_GATE,
        DANGER_GATED,
        gate_never_ran_plugin_code("CPL-PROC-001", "danger finding"),
        scenario=Scenario.GATED,
    ),
    HostileCase(
        "os-through-another-module",
        Family.SUPPLY_CHAIN,
        "run a program through shutil.os.system (a module reached through another)",
        Layer.DANGER_GATE,
        REEXPORTED,
        gate_never_ran_plugin_code("CPL-PROC-001", "os.system"),
        scenario=Scenario.GATED,
    ),
    HostileCase(
        "padded-past-the-scanner",
        Family.SUPPLY_CHAIN,
        "pad plugin.py past the scanner's size limit (2 MiB) so its subprocess call goes unread",
        Layer.DANGER_GATE,
        DANGER_GATED + "PAD = 0\n" * 300_000,
        gate_never_ran_plugin_code("CPL-SCAN-001", "not scanned: too large"),
        scenario=Scenario.GATED,
    ),
    HostileCase(
        "too-deep-for-the-scanner",
        Family.SUPPLY_CHAIN,
        "add an expression deeper than the scanner walks (Python compiles it) to hide subprocess",
        Layer.DANGER_GATE,
        DANGER_GATED + "DEEP = " + "+".join(["1"] * 800) + "\n",
        gate_never_ran_plugin_code("CPL-SCAN-002", "not scanned: too complex"),
        scenario=Scenario.GATED,
    ),
    HostileCase(
        "pth-file",
        Family.SUPPLY_CHAIN,
        "ship a .pth file (code run at every interpreter start)",
        Layer.DANGER_GATE,
        STARTUP_MARKER,
        gate_never_ran_plugin_code("CPL-HOOK-002"),
        args=_token,
        scenario=Scenario.GATED,
        files=(("extra.pth", _PTH),),
    ),
    HostileCase(
        "pth-file-past-review",
        Family.SUPPLY_CHAIN,
        "ship a .pth file past a fooled review, hoping the worker's interpreter runs it",
        Layer.CLEAN_WORKER,
        STARTUP_MARKER,
        startup_hook_inert,
        args=_token,
        files=(("extra.pth", _PTH),),
    ),
    HostileCase(
        "sitecustomize-past-review",
        Family.SUPPLY_CHAIN,
        "ship sitecustomize.py past a fooled review, hoping the worker imports it at start",
        Layer.CLEAN_WORKER,
        STARTUP_MARKER,
        startup_hook_inert,
        args=_token,
        files=(("sitecustomize.py", _SITECUSTOMIZE),),
    ),
    HostileCase(
        "symlink-in-tree",
        Family.SUPPLY_CHAIN,
        "ship a symlink to /etc/passwd inside the plugin folder",
        Layer.HASH_PIN,
        HONEST,
        enable_refused("symlink"),
        scenario=Scenario.GATED,
        symlinks=(("notes.txt", "/etc/passwd"),),
    ),
    HostileCase(
        "entry-outside-tree",
        Family.SUPPLY_CHAIN,
        "name an entry module outside the plugin folder",
        Layer.MANIFEST,
        HONEST,
        enable_refused("entry"),
        scenario=Scenario.GATED,
        manifest='entry = "../outside.py"',
    ),
    HostileCase(
        "broad-path",
        Family.SUPPLY_CHAIN,
        "declare fs.read:/ (the whole machine)",
        Layer.MANIFEST,
        HONEST,
        enable_refused("fs.read:/"),
        scenario=Scenario.GATED,
        capabilities=("fs.read:/",),
    ),
    HostileCase(
        "swap-after-approval",
        Family.SUPPLY_CHAIN,
        "replace plugin.py after it was approved and pinned",
        Layer.LOCKFILE,
        HONEST,
        swapped_code_refused("changed since it was locked"),
        scenario=Scenario.LOCKED,
        swap=(("plugin.py", SWAPPED),),
    ),
    HostileCase(
        "manifest-widened",
        Family.SUPPLY_CHAIN,
        "add env.read:HOME to the manifest after it was approved and pinned",
        Layer.LOCKFILE,
        HONEST,
        swapped_code_refused("changed since it was locked"),
        scenario=Scenario.LOCKED,
        swap=(("plugin.toml", "+env.read:HOME"),),
    ),
    HostileCase(
        "swap-during-load",
        Family.SUPPLY_CHAIN,
        "replace plugin.py while enabled, then crash so the host restarts the worker from it",
        Layer.HASH_PIN,
        HONEST,
        restart_refused,
        scenario=Scenario.RESTART,
        swap=(("plugin.py", SWAPPED),),
    ),
    HostileCase(
        "swap-during-enable",
        Family.SUPPLY_CHAIN,
        "swap plugin.py with a variant the gate refuses, again and again, while enable runs",
        Layer.HASH_PIN,
        HONEST,
        race_never_ran_the_gated_variant,
        scenario=Scenario.RACE,
        swap=(("plugin.py", GATED_VARIANT),),
    ),
)
