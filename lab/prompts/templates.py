"""Load the prompt data files in assets/templates/ (formats and contracts) once."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "assets" / "templates"


@lru_cache(maxsize=None)
def load_template_data(name: str) -> dict:
    """The parsed YAML file `assets/templates/<name>.yaml`."""
    with open(TEMPLATES_DIR / f"{name}.yaml", encoding="utf-8") as handle:
        return yaml.safe_load(handle)
