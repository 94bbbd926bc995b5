"""Scoring: parse raw answers, split command units, token F1, aggregates, alignment (SPEC §4–§7)."""
from lab.scoring.action import ParsedAction
from lab.scoring.aggregate import aggregate_scores, next_action_score, task_complete_fields
from lab.scoring.align import Alignment, UnitMatch, align_units, similarity_matrix
from lab.scoring.metrics import SCORERS, StepMetrics, score_batch, score_units, scorer_rules
from lab.scoring.parse import extract_json, fallback_units, parse_action
from lab.scoring.tokens import normalize_unit, token_f1, tokenize, unit_f1
from lab.scoring.units import WAIT_UNIT, split_command_units

__all__ = [
    "ParsedAction",
    "aggregate_scores",
    "next_action_score",
    "task_complete_fields",
    "Alignment",
    "UnitMatch",
    "align_units",
    "similarity_matrix",
    "SCORERS",
    "StepMetrics",
    "score_batch",
    "score_units",
    "scorer_rules",
    "extract_json",
    "fallback_units",
    "parse_action",
    "normalize_unit",
    "token_f1",
    "tokenize",
    "unit_f1",
    "WAIT_UNIT",
    "split_command_units",
]
