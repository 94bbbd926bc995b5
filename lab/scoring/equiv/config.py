"""Load the equiv rules file (lab/scoring/equiv_rules.yaml, or LAB_EQUIV_RULES) and check it."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from lab.errors import LabError
from lab.settings import env

DEFAULT_RULES_PATH = Path(__file__).resolve().parent.parent / "equiv_rules.yaml"
RULES_ENV = "LAB_EQUIV_RULES"
LIMITS_SECTION = "limits"


@dataclass(frozen=True)
class EquivConfig:
    """The rule names to apply in order and each rule's parameters (its section of the file)."""

    pipeline: tuple[str, ...]
    params: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False, compare=False)
    path: str = ""

    def params_of(self, rule: str) -> dict[str, Any]:
        return self.params.get(rule) or {}

    def limits(self) -> dict[str, int]:
        """The per-step work bounds (`limits:` section), the shipped file's where this one has none."""
        shipped = {} if self.path == str(DEFAULT_RULES_PATH) else load_config(DEFAULT_RULES_PATH).limits()
        return {**shipped, **{k: int(v) for k, v in self.params_of(LIMITS_SECTION).items()}}


def rules_path() -> Path:
    """The rules file in use: $LAB_EQUIV_RULES when set, else the shipped one."""
    explicit = env(RULES_ENV)
    return Path(explicit).expanduser() if explicit else DEFAULT_RULES_PATH


def parse_config(data: Any, name: str) -> EquivConfig:
    """Check a loaded rules document: a `pipeline` list of registered rule names, dict sections."""
    from lab.scoring.equiv.registry import RULES

    if not isinstance(data, dict) or not isinstance(data.get("pipeline"), list):
        raise LabError(f"{name}: an equiv rules file needs a 'pipeline' list of rule names")
    unknown = [r for r in data["pipeline"] if r not in RULES]
    if unknown:
        raise LabError(f"{name}: unknown equiv rule(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(RULES))}")
    params = {k: v for k, v in data.items() if isinstance(v, dict)}
    limits = params.get(LIMITS_SECTION, {})
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in limits.values()):
        raise LabError(f"{name}: every value of the '{LIMITS_SECTION}' section must be a whole number >= 1")
    return EquivConfig(tuple(data["pipeline"]), params, name)


@lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> EquivConfig:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise LabError(f"{path}: cannot read the equiv rules file ({exc.strerror}); fix {RULES_ENV} or unset it") from None
    except yaml.YAMLError as exc:
        raise LabError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return parse_config(data, path)


def load_config(path: str | Path | None = None) -> EquivConfig:
    """The equiv rules of `path` (default: `rules_path()`), cached until the file changes."""
    p = Path(path) if path is not None else rules_path()
    try:
        mtime = p.stat().st_mtime
    except OSError:
        raise LabError(f"{p}: no such equiv rules file; fix {RULES_ENV} or unset it") from None
    return _load(str(p), mtime)
