"""The ``RACE`` scenario: files swapped while enable runs (issue 13, points 5 and 10).

The red team's attack: while ``enable`` ran, a thread swapped ``plugin.py``
between a clean variant and one the danger gate refuses; the refused variant
ran, because enable audited one read of the files and recorded the hash of a
later one. Enable now takes one snapshot and audits, gates, hashes, records
and loads exactly it, so whatever the race, a worker runs the variant that
passed the gate, or enable refuses.

The bench enables the case again and again on its gated host (the real static
gate, nothing faked) while a thread swaps the live file, by atomic rename
and by rewriting it in place, and calls each worker that starts. The attempt's
value lists what those calls returned; the swapped variant's answer among
them is a breach. The live file is put back byte for byte afterwards (the
bench checks every plugin's sources after every case).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from caplet._errors import CapletError
from caplet._host._host import PluginHost
from caplet._selftest._model import Attempt, HostileCase

__all__ = ["ROUNDS", "race"]

#: Enables per race: enough for the swapper to land between every step of
#: enable on this machine (it swaps hundreds of times per enable).
ROUNDS = 12

Enable = Callable[[PluginHost, HostileCase], tuple[bool, str]]


class _Swapper(threading.Thread):
    """Swaps ``target`` between two contents until stopped, then restores the first."""

    def __init__(self, target: Path, clean: bytes, dirty: bytes) -> None:
        super().__init__(name=f"caplet-selftest-swapper-{target.parent.name}", daemon=True)
        self.target = target
        self.variants = (clean, dirty)
        self.done = threading.Event()
        self.swaps = 0
        self.failure: OSError | None = None

    def run(self) -> None:
        staged = self.target.with_name(f".{self.target.name}.swap")
        try:
            while not self.done.is_set():
                content = self.variants[self.swaps % 2]
                if self.swaps % 3:  # an atomic swap ...
                    staged.write_bytes(content)
                    staged.replace(self.target)
                else:  # ... or a torn one, rewritten in place
                    self.target.write_bytes(content)
                self.swaps += 1
        except OSError as exc:  # reported by the check: the race did not run
            self.failure = exc
        finally:
            staged.unlink(missing_ok=True)
            self.target.write_bytes(self.variants[0])

    def __enter__(self) -> _Swapper:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.done.set()
        self.join()


def race(host: PluginHost, case: HostileCase, folder: Path, dirty: str, enable: Enable) -> Attempt:
    """Enable ``case`` :data:`ROUNDS` times while ``folder/plugin.py`` flips to ``dirty``.

    ``value`` is ``{"returned": [...], "refused": n, "swaps": n}``: the
    distinct answers of ``main.run`` from every worker that started, how many
    enables refused and how often the file changed under them.
    """
    target = folder / "plugin.py"
    returned: set[str] = set()
    refused = 0
    enabled_once = False
    reason = ""
    with _Swapper(target, target.read_bytes(), dirty.encode()) as swapper:
        for _ in range(ROUNDS):
            enabled, reason = enable(host, case)
            if not enabled:
                refused += 1
                continue
            enabled_once = True
            try:
                returned.add(repr(host.call(case.name, "main.run")))
            except CapletError as exc:  # a start may fail; it must never load the gated code
                returned.add(f"{type(exc).__name__}")
            finally:
                host.disable(case.name)
    value: dict[str, object] = {
        "returned": sorted(returned),
        "refused": refused,
        "swaps": swapper.swaps,
    }
    if swapper.failure is not None:
        value["swapper"] = str(swapper.failure)
    return Attempt(case.name, enabled=enabled_once, reason=reason, value=value)
