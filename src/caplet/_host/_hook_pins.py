"""What an approval pins of a plugin's hooks: each event it subscribes to and where its
handler runs among the others (steer31).

Hooks of one event run in ascending priority, and on an ``ABORT`` event a handler that
fails stops every one after it (:mod:`caplet._host._hooks`). An approval that kept only
the events let a new version move its hook from last to first and carry the approval
over ("nothing widened"), then stop every other subscriber on each emit. So an approval
records ``event@priority``; a new version whose hook on an approved event runs *ahead*
of the approved place widens it (a hook moved later gives up that power, and does not).

An approval recorded before this kept bare event names: where its hooks ran is unknown,
so a content that subscribes to such an event is treated as moved ahead (the safe
answer; the consent question says why).
"""

from __future__ import annotations

from collections.abc import Iterable

from caplet._manifest._model import Manifest

__all__ = ["hook_changes", "pinned_hooks"]


def pinned_hooks(manifest: Manifest) -> tuple[str, ...]:
    """The approval's record of *manifest*'s hooks: ``event@priority``, sorted."""
    return tuple(sorted(f"{hook.event}@{hook.priority}" for hook in manifest.hooks))


def _approved_places(approved: Iterable[str]) -> dict[str, int | None]:
    """Each approved event and the earliest place its hook was approved at (``None``:
    an entry of an older approval, which kept no place)."""
    places: dict[str, int | None] = {}
    for entry in approved:
        event, sep, priority = entry.rpartition("@")
        if not sep:
            places[entry] = None
            continue
        # a row edited by hand is read, never trusted: "²".isdigit() is true and int()
        # of it raises, so only ASCII digits are a place
        digits = priority.isascii() and priority.isdigit() and len(priority) <= 6
        known = int(priority) if digits else None
        before = places.get(event, known)
        places[event] = None if before is None or known is None else min(before, known)
    return places


def hook_changes(
    approved: Iterable[str], manifest: Manifest
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the events *manifest* subscribes to that *approved* did not, a line for each
    hook that now runs ahead of its approved place)."""
    places = _approved_places(approved)
    added: list[str] = []
    ahead: list[str] = []
    for hook in manifest.hooks:
        if hook.event not in places:
            added.append(hook.event)
            continue
        place = places[hook.event]
        if place is None:
            ahead.append(
                f"runs its hook on application event {hook.event!r} at priority "
                f"{hook.priority}; the approval did not record where it ran among the "
                "others (it predates caplet pinning a hook's order)"
            )
        elif hook.priority < place:
            ahead.append(
                f"moves its hook on application event {hook.event!r} ahead, to priority "
                f"{hook.priority} from the approved {place}: it runs before the hooks "
                "between, and on an event that aborts on failure can stop them"
            )
    return tuple(added), tuple(ahead)
