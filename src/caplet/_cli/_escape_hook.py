"""The render hook of the CLI's consoles (:func:`caplet._cli._safe.guard`): every text
segment escaped after layout, whatever boundary missed it.

Apart from :mod:`caplet._cli._safe` because it is made of rich's classes, which a
--json run never imports (issue 16's start-up budget).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.segment import Segment

from caplet._display import safe_text

__all__ = ["EscapeHook"]


class _Escaped:
    """A renderable whose text segments are escaped after the wrapped one has laid out."""

    def __init__(self, renderable: ConsoleRenderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from _escaped(console.render(self.renderable, options))


def _escaped(segments: Iterable[Segment]) -> Iterator[Segment]:
    for segment in segments:
        if segment.control:
            # rich's own cursor movement (progress bars): not text, and not untrusted.
            yield segment
            continue
        text = safe_text(segment.text)
        yield segment if text is segment.text else Segment(text, segment.style)


class EscapeHook(RenderHook):
    """Wraps everything a console prints in :class:`_Escaped`."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Escaped(r) for r in renderables]
