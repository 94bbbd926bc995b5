"""Apply the configured rules, in order, to one side of a step (its command units)."""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from lab.scoring.equiv import rules_cd, rules_shell, rules_text  # noqa: F401  (registers the rules)
from lab.scoring.equiv.config import EquivConfig, load_config
from lab.scoring.equiv.heredoc import literal_flags
from lab.scoring.equiv.registry import RULES, EquivContext, EquivUnit

UNIT_CACHE = 1 << 17


class Pipeline:
    """The rules of one config; unit rules are cached by (rule, text) since runs share units."""

    def __init__(self, config: EquivConfig):
        self.config = config
        self.rules = [RULES[name] for name in config.pipeline]
        self._cache: dict[tuple[int, str], tuple[str, ...]] = {}

    def _unit(self, index: int, text: str) -> tuple[str, ...]:
        key = (index, text)
        out = self._cache.get(key)
        if out is None:
            rule = self.rules[index]
            out = tuple(rule.fn(text, self.config.params_of(rule.name))) or (text,)
            if len(self._cache) >= UNIT_CACHE:
                self._cache.clear()
            self._cache[key] = out
        return out

    def apply(self, units: Sequence[str], context: EquivContext | None = None) -> list[EquivUnit]:
        """The normalised units of one side, each remembering the original unit it came from."""
        context = context or EquivContext()
        current = [EquivUnit(i, u, lit) for i, (u, lit) in enumerate(zip(units, literal_flags(list(units))))]
        for index, rule in enumerate(self.rules):
            if rule.kind == "sequence":
                current = rule.fn(current, context, self.config.params_of(rule.name))
                continue
            nxt: list[EquivUnit] = []
            for unit in current:
                if unit.literal:
                    nxt.append(unit)
                else:
                    nxt.extend(unit.with_text(t) for t in self._unit(index, unit.text))
            current = nxt
        return current


@lru_cache(maxsize=4)
def _pipeline_for(config: EquivConfig) -> Pipeline:
    return Pipeline(config)


def get_pipeline(config: EquivConfig | None = None) -> Pipeline:
    """The (cached) pipeline of `config`, default: the rules file in use."""
    return _pipeline_for(config or load_config())


def normalise_units(units: Sequence[str], context: EquivContext | None = None,
                    config: EquivConfig | None = None) -> list[str]:
    """The texts of `units` after every configured rule."""
    return [u.text for u in get_pipeline(config).apply(units, context)]


def pieces_by_origin(units: Sequence[str], context: EquivContext | None = None,
                     config: EquivConfig | None = None) -> list[tuple[str, ...]]:
    """Per original unit, the normalised units it became (a chain becomes several)."""
    out: list[list[str]] = [[] for _ in units]
    for u in get_pipeline(config).apply(units, context):
        out[u.origin].append(u.text)
    return [tuple(p) for p in out]
