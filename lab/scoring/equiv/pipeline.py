"""Apply the configured rules, in order, to one side of a step (its command units)."""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from lab.scoring.equiv import rules_cd, rules_shell, rules_text  # noqa: F401  (registers the rules)
from lab.scoring.equiv.cache import SizedCache
from lab.scoring.equiv.config import EquivConfig, load_config
from lab.scoring.equiv.heredoc import literal_flags
from lab.scoring.equiv.registry import RULES, EquivContext, EquivUnit, connector_of

# Characters each cache holds (texts in and out); an entry count let long units take gigabytes.
UNIT_CACHE_CHARS = 1 << 23
LIST_CACHE_CHARS = 1 << 23
UNIT_OVERHEAD_CHARS = 64  # what one EquivUnit costs beside its text, counted as characters


def side_chars(units: Sequence[str]) -> int:
    """Characters of all units of one side (what the `limits` of the rules file count)."""
    return sum(len(u) for u in units if isinstance(u, str))


class Pipeline:
    """The rules of one config; unit rules are cached by (rule, text) since runs share units."""

    def __init__(self, config: EquivConfig):
        self.config = config
        self.rules = [RULES[name] for name in config.pipeline]
        self._cache = SizedCache(UNIT_CACHE_CHARS)  # (for_metrics, stage, text) -> texts
        self._lists = SizedCache(LIST_CACHE_CHARS)  # whole sides: a reference recurs in every run

    def resolved_budget(self, units: Sequence[str]) -> int:
        """The characters of resolved `cd` directories one side may have in all: `max_resolved_chars`
        of the rules file's `limits`, or the side's own length where that is more. Every other rule
        writes at most a few characters per character it reads, so with this bound normalising a side
        costs a small multiple of its length."""
        return max(side_chars(units), self.config.limits()["max_resolved_chars"])

    def _stages(self, for_metrics: bool) -> list[tuple[int, list]]:
        """Runs of consecutive unit rules (applied to a text in one cached go) and sequence rules."""
        stages: list[tuple[int, list]] = []
        for index, rule in enumerate(self.rules):
            if for_metrics and rule.token_neutral:
                continue
            if rule.kind == "unit" and stages and stages[-1][1][0].kind == "unit":
                stages[-1][1].append(rule)
            else:
                stages.append((index, [rule]))
        return stages

    def _texts(self, for_metrics: bool, stage: int, rules: list, text: str) -> tuple[str, ...]:
        key = (for_metrics, stage, text)
        out = self._cache.get(key)
        if out is None:
            prefix = connector_of(text)
            texts = [text[len(prefix):]]
            for rule in rules:
                params = self.config.params_of(rule.name)
                texts = [t for x in texts for t in (rule.fn(x, params) or [x])]
            out = tuple(prefix + t if i == 0 else t for i, t in enumerate(texts))
            self._cache.put(key, out, len(text) + side_chars(out))
        return out

    def apply(self, units: Sequence[str], context: EquivContext | None = None,
              for_metrics: bool = False) -> list[EquivUnit]:
        """The normalised units of one side, each remembering the original unit it came from.

        `for_metrics` skips token-neutral rules (quoting, whitespace): the F1 comes out the same,
        cheaper, but units that differ only in quoting then still look different.
        Raises EquivTooLarge when the resolved `cd` directories would pass `resolved_budget(units)`
        (the same in both modes: token-neutral rules never change what a `cd` resolves to).
        """
        context = context or EquivContext()
        key = (tuple(units), context.cwd, context.home, for_metrics)
        cached = self._lists.get(key)
        if cached is None:
            budget = self.resolved_budget(units)
            cached = self._apply(units, EquivContext(context.cwd, context.home, budget), for_metrics)
            self._lists.put(key, cached, side_chars(units) + sum(len(u.text) + UNIT_OVERHEAD_CHARS for u in cached))
        return list(cached)

    def _apply(self, units: Sequence[str], context: EquivContext, for_metrics: bool) -> list[EquivUnit]:
        current = [EquivUnit(i, u, lit) for i, (u, lit) in enumerate(zip(units, literal_flags(list(units))))]
        for stage, rules in self._stages(for_metrics):
            if rules[0].kind == "sequence":
                current = rules[0].fn(current, context, self.config.params_of(rules[0].name))
                continue
            nxt: list[EquivUnit] = []
            for unit in current:
                if unit.literal:
                    nxt.append(unit)
                    continue
                texts = self._texts(for_metrics, stage, rules, unit.text)
                if len(texts) == 1 and texts[0] == unit.text:
                    nxt.append(unit)
                else:
                    nxt.extend(EquivUnit(unit.origin, t, False) for t in texts)
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
