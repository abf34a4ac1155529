"""The frame every figure shares: `@figure(height, heading)` over a function that draws on the card.

The function's docstring is the figure's description (the SVG's <title>, read by screen readers); its body
draws on a fresh Svg that already carries the heading, and the decorated function returns the rendered text:

    @figure(330, "Threads, warps, blocks, grid, SMs")
    def thread_hierarchy(s: Svg) -> None:
        \"\"\"Threads are grouped into warps of 32, ...\"\"\"
        s.box(...)
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..svg import Svg

WIDTH = 760  # the page's text column; a figure that needs more room says width=


def figure(height: int, heading: str, heading_size: int = 15,
           width: int = WIDTH) -> Callable[[Callable[[Svg], None]], Callable[[], str]]:
    """Makes a drawing function `draw(s)` into `() -> str`: a width x height card titled with draw's
    docstring (white space folded, so it can wrap in the source), the heading, then whatever draw draws."""
    def frame(draw: Callable[[Svg], None]) -> Callable[[], str]:
        description = " ".join((draw.__doc__ or "").split())
        if not description:
            raise ValueError(f"figure {draw.__name__} needs a docstring: it is the figure's description")

        @functools.wraps(draw)
        def render() -> str:
            s = Svg(width, height, description)
            s.heading(heading, heading_size)
            draw(s)
            return s.render()
        return render
    return frame
