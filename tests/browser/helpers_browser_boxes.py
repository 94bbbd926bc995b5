"""Where things are on a Playwright page: the boxes of visible elements, and whether one lies inside another."""
from __future__ import annotations

TOLERANCE_PX = 1.0  # sub-pixel rounding between a child's box and its frame's


def boxes(page, selector: str) -> list[dict]:
    """The bounding boxes (x, y, width, height in CSS pixels) of the visible elements `selector` matches."""
    found = page.evaluate(
        """(sel) => [...document.querySelectorAll(sel)]
             .map(e => e.getBoundingClientRect())
             .filter(r => r.width > 0 && r.height > 0)
             .map(r => ({x: r.x, y: r.y, width: r.width, height: r.height}))""",
        selector,
    )
    return list(found)


def inside(box: dict, frame: dict, tolerance: float = TOLERANCE_PX) -> bool:
    """True when `box` lies wholly within `frame` (both as `boxes` gives them)."""
    return (box["x"] >= frame["x"] - tolerance and box["y"] >= frame["y"] - tolerance
            and box["x"] + box["width"] <= frame["x"] + frame["width"] + tolerance
            and box["y"] + box["height"] <= frame["y"] + frame["height"] + tolerance)
