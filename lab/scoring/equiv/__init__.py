"""equiv_f1: a shell-aware second opinion on command F1 (not the published score).

Both sides of a step go through named rules (lab/scoring/equiv_rules.yaml) before the harness's
own soft-matching token F1 is computed; the published F1 is never touched.
"""
from lab.scoring.equiv.config import DEFAULT_RULES_PATH, EquivConfig, load_config, parse_config
from lab.scoring.equiv.cwd import context_from_screens, prompt_in, replay_contexts, step_context
from lab.scoring.equiv.pipeline import Pipeline, get_pipeline, normalise_units, pieces_by_origin
from lab.scoring.equiv.registry import RULES, EquivContext, EquivTooLarge, EquivUnit, sequence_rule, unit_rule
from lab.scoring.equiv.score import (
    CHAIN_PART,
    EQUIVALENT,
    LABEL,
    NEEDS_REPLAY,
    SKIPPED,
    EquivMetrics,
    EquivStep,
    better_of,
    depends_on_cwd,
    equiv_batch,
    equiv_step,
    pair_kind,
    skip_reason,
    too_large,
)

__all__ = [
    "DEFAULT_RULES_PATH", "EquivConfig", "load_config", "parse_config",
    "context_from_screens", "prompt_in", "replay_contexts", "step_context",
    "Pipeline", "get_pipeline", "normalise_units", "pieces_by_origin",
    "RULES", "EquivContext", "EquivTooLarge", "EquivUnit", "sequence_rule", "unit_rule",
    "CHAIN_PART", "EQUIVALENT", "LABEL", "EquivMetrics", "EquivStep", "better_of", "equiv_batch",
    "equiv_step", "pair_kind", "SKIPPED", "too_large", "skip_reason", "NEEDS_REPLAY", "depends_on_cwd",
]
