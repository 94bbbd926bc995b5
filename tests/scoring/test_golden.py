"""Every golden per-step entry is reproduced to the last decimal (SPEC §4–§6)."""
from __future__ import annotations

import json

import pytest

from lab.scoring import parse_action, score_batch, score_units, unit_f1
from tests.paths import GOLDEN

ROWS = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
SCORER = {"corrected_303": "corrected", "legacy_386": "legacy"}
PREVIEW_CHARS = 1200
IDS = [f"{r['scoring_version']}:{r['task_id']}/{r['step_idx']}" for r in ROWS]


def stored(row: dict) -> tuple:
    return row["first_cmd_exact"], row["command_precision"], row["command_recall"], row["command_f1"]


def test_golden_covers_both_scorers():
    assert len(ROWS) == 15
    assert {r["scoring_version"] for r in ROWS} == set(SCORER)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_metrics_reproduced(row):
    m = score_units(row["pred_command_units"], row["ref_command_units"], SCORER[row["scoring_version"]])
    assert (m.first_cmd_exact, m.precision, m.recall, m.f1) == stored(row)


@pytest.mark.parametrize("scorer", sorted(set(SCORER.values())))
def test_batch_equals_per_step(scorer):
    rows = [r for r in ROWS if SCORER[r["scoring_version"]] == scorer]
    batch = score_batch([(r["pred_command_units"], r["ref_command_units"]) for r in rows], scorer)
    for row, m in zip(rows, batch):
        assert (m.first_cmd_exact, m.precision, m.recall, m.f1) == stored(row)


COMPLETE_CORRECTED = [r for r in ROWS if r["scoring_version"] == "corrected_303" and len(r["pred_preview"]) < PREVIEW_CHARS]


def test_some_corrected_previews_are_complete():
    assert len(COMPLETE_CORRECTED) >= 3


@pytest.mark.parametrize("row", COMPLETE_CORRECTED, ids=[f"{r['task_id']}/{r['step_idx']}" for r in COMPLETE_CORRECTED])
def test_parse_of_complete_preview(row):
    action = parse_action(row["pred_preview"])
    assert action.command_units == row["pred_command_units"]
    assert action.valid_json == row["valid_json"]
    assert action.has_analysis == row["has_analysis"] and action.has_plan == row["has_plan"]
    assert action.task_complete == row["pred_task_complete"]


def test_section6_worked_check():
    row = next(r for r in ROWS if r["scoring_version"] == "corrected_303" and (r["task_id"], r["step_idx"]) == ("task-001", 1))
    assert round(unit_f1("pip3 list | grep -i yaml", "pip3 list | grep -i pyyaml"), 4) == 0.8333
    assert round(unit_f1("pip3 install pyyaml",
                         "pip3 install pyyaml 2>/dev/null || echo 'PyYAML already installed'"), 4) == 0.6
    m = score_units(row["pred_command_units"], row["ref_command_units"])
    assert (m.precision, m.recall, m.f1) == (0.8111, 0.8111, 0.8111)
