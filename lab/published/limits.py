"""The limits a published-runs fetch holds to (assets/published/fetch.yaml, or the file
LAB_PUBLISHED_FETCH_LIMITS names): size cap, deadlines, redirects, encodings, the score range."""
from __future__ import annotations

from lab.published.catalogue import ASSETS
from lab.settings import read_limits

LIMITS_PATH = ASSETS / "fetch.yaml"
LIMITS_ENV = "LAB_PUBLISHED_FETCH_LIMITS"


def fetch_limits() -> dict:
    """The fetch limits: assets/published/fetch.yaml, with the keys of the file LAB_PUBLISHED_FETCH_LIMITS
    names (when set) in their place; a key that file lacks keeps its shipped value."""
    shipped = read_limits(LIMITS_PATH, "", "the fetch limits")
    return {**shipped, **read_limits(LIMITS_PATH, LIMITS_ENV, "the fetch limits")}
