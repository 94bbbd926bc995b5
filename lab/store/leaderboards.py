"""Load the shipped leaderboard CSVs (results/*.csv) into their tables."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from lab.errors import LabError
from lab.store.names import checkpoint_step_of, training_method_of

_NUMBER_RX = re.compile(r"-?\d+(?:\.\d+)?")


def _num(value: str) -> float | None:
    """A number from a published cell; keeps the digits of marked values ("48.19*", "~33*")."""
    m = _NUMBER_RX.search(value or "")
    return float(m.group(0)) if m else None


def _int(value: str) -> int | None:
    n = _num(value)
    return int(n) if n is not None else None


def _text(value: str) -> str | None:
    return value if value != "" else None


def _bool(value: str) -> bool | None:
    v = (value or "").strip().lower()
    if v in {"yes", "true", "1"}:
        return True
    if v in {"no", "false", "0"}:
        return False
    return None


def _corrected(raw: pd.DataFrame) -> pd.DataFrame:
    score_text = raw["score"]
    labels = raw["model_label"] + " " + raw["variant"]
    return pd.DataFrame(
        {
            "row_no": range(1, len(raw) + 1),
            "rank": raw["rank"].map(_int),
            "rank_latest": raw["rank_latest"].map(_int),
            "in_first_56": raw["in_first_56"].map(_bool).fillna(False).astype(bool),
            "model_label": raw["model_label"],
            "model_id": raw["model_id"].map(_text),
            "variant": raw["variant"].map(_text),
            "model_short": raw["model_short"].map(_text),
            "model_short_basis": raw["model_short_basis"].map(_text),
            "family": raw["family"].map(_text),
            "params_b": raw["params_b"].map(_num),
            "active_params_b": raw["active_params_b"].map(_num),
            "training": raw["training"].map(_text),
            "training_method": raw["training"].map(training_method_of),
            "epochs": raw["epochs"].map(_int),
            "checkpoint_step": labels.map(checkpoint_step_of),
            "score": score_text.map(_num),
            "score_text": score_text.map(_text),
            "score_marked": score_text.str.contains(r"[*~]", regex=True),
            "avg_command_f1": raw["command_f1"].map(_num),
            "precision": raw["command_precision"].map(_num),
            "recall": raw["command_recall"].map(_num),
            "first_cmd_exact_pct": raw["first_cmd_exact_pct"].map(_num),
            "valid_json_pct": raw["valid_json_pct"].map(_num),
            "steps": raw["steps"].map(_int),
            "tasks": raw["tasks"].map(_int),
            "sec_per_step": raw["sec_per_step"].map(_num),
            "load_s": raw["load_time_sec"].map(_num),
            "template_status": raw["template_status"].map(_text),
            "rank_eligible": raw["rank_eligible"].map(_bool),
            "eval_timestamp": raw["eval_timestamp"].map(_text),
            "source_file": raw["source_file"].map(_text),
            "upstream_source": raw["upstream_source"].map(_text),
            "upstream_file": raw["upstream_file"].map(_text),
            "notes": raw["notes"].map(_text),
        }
    )


def _tblite(raw: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "row_no": range(1, len(raw) + 1),
            "model": raw["model_label"],
            "model_id": raw["model_id"].map(_text),
            "base_model": raw["base_model"].map(_text),
            "training": raw["training"].map(_text),
            "dataset": raw["dataset"].map(_text),
            "tb_lite": raw["tb_lite"].map(_num),
            "tb_lite_spread": raw["tb_lite_pm"].map(_num),
            "tb21": raw["tb_2_1"].map(_num),
            "tb21_spread": raw["tb_2_1_pm"].map(_num),
            "source": raw["source"].map(_text),
        }
    )


def _legacy(raw: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "row_no": range(1, len(raw) + 1),
            "rank": raw["rank"].map(_int),
            "model_label": raw["model_label"],
            "legacy_score": raw["legacy_score"].map(_num),
            "avg_command_f1": raw["command_f1"].map(_num),
            "first_cmd_exact_pct": raw["first_cmd_exact_pct"].map(_num),
            "sec_per_step": raw["sec_per_step"].map(_num),
            "load_s": raw["load_time_sec"].map(_num),
            "source_file": raw["source_file"].map(_text),
            "scoring_version": "legacy_386",
            "comparable": False,
        }
    )


def _groups(raw: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "row_no": range(1, len(raw) + 1),
            "model": raw["model"],
            "model_label": raw["model_label_in_source"].map(_text),
            "group_type": raw["group_type"],
            "group_name": raw["group"],
            "steps": raw["steps"].map(_int),
            "avg_command_f1": raw["avg_command_f1"].map(_num),
            "first_cmd_exact_pct": raw["first_cmd_exact_pct"].map(_num),
            "source_file": raw["source_file"].map(_text),
        }
    )


@dataclass(frozen=True)
class LeaderboardFile:
    """One shipped CSV: its file name in results/, its table, the columns it must have, its shaper."""

    filename: str
    table: str
    required: tuple[str, ...]
    shape: Callable[[pd.DataFrame], pd.DataFrame]


LEADERBOARD_FILES: tuple[LeaderboardFile, ...] = (
    LeaderboardFile(
        "leaderboard_corrected.csv", "leaderboard",
        ("rank", "rank_latest", "in_first_56", "model_label", "model_id", "score", "command_f1",
         "command_precision", "command_recall", "first_cmd_exact_pct", "valid_json_pct", "family",
         "params_b", "active_params_b", "training", "epochs", "template_status"),
        _corrected,
    ),
    LeaderboardFile(
        "tblite_tmax.csv", "tblite",
        ("model_label", "model_id", "base_model", "tb_lite", "tb_lite_pm", "tb_2_1", "tb_2_1_pm"),
        _tblite,
    ),
    LeaderboardFile(
        "leaderboard_legacy_20260426.csv", "legacy_leaderboard",
        ("rank", "model_label", "legacy_score", "command_f1", "first_cmd_exact_pct"),
        _legacy,
    ),
    LeaderboardFile(
        "leaderboard_by_group.csv", "leaderboard_groups",
        ("model", "group_type", "group", "avg_command_f1"),
        _groups,
    ),
)


def read_leaderboard_csv(spec: LeaderboardFile, path: Path) -> pd.DataFrame:
    """Read one shipped CSV as text and shape it into its table's columns."""
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise LabError(f"{path}: cannot read the CSV ({exc})") from None
    missing = [c for c in spec.required if c not in raw.columns]
    if missing:
        raise LabError(f"{path}: missing column(s) {', '.join(missing)}; expected the published {spec.filename} layout")
    optional = {"variant", "model_short", "model_short_basis", "steps", "tasks", "sec_per_step", "load_time_sec",
                "rank_eligible", "eval_timestamp", "source_file", "upstream_source", "upstream_file", "notes",
                "training", "dataset", "source", "model_label_in_source", "first_cmd_exact_pct"}
    for col in optional:
        if col not in raw.columns:
            raw[col] = ""
    return spec.shape(raw)
