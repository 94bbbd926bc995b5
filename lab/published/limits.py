"""The limits a published-runs fetch holds to (assets/published/fetch.yaml, or the file
LAB_PUBLISHED_FETCH_LIMITS names): size cap, deadlines, redirects, encodings, the score range."""
from __future__ import annotations

import os
from pathlib import Path

from lab.errors import LabError
from lab.published.catalogue import ASSETS

LIMITS_PATH = ASSETS / "fetch.yaml"
LIMITS_ENV = "LAB_PUBLISHED_FETCH_LIMITS"


def fetch_limits() -> dict:
    """The fetch limits (assets/published/fetch.yaml, or the file LAB_PUBLISHED_FETCH_LIMITS names)."""
    import yaml

    path = Path(os.environ.get(LIMITS_ENV) or LIMITS_PATH)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise LabError(f"{LIMITS_ENV}={path}: cannot read the fetch limits ({type(exc).__name__})") from None
