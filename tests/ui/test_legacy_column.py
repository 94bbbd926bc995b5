"""Legacy 386-step runs: Compare answers their columns on the legacy replay (mode all) with the legacy
scorer and says so; without a legacy replay it says how to get one; the CLI refuses the corrected rules.

The replay excerpt plays both parts: loaded in `corrected` mode (14 steps) it is the loaded replay,
in `all` mode (16 steps, two with empty references) it is the "legacy" replay."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lab.data import load_replay
from lab.engines.registry import create_engine
from lab.runs.pipeline import parse_reference, run_steps
from lab.resultfiles.files import write_result_file
from lab.scoring.aggregate import aggregate_scores
from lab.scoring.metrics import score_units
from lab.settings import Settings
from tests.paths import EXCERPT, REPO

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
ONLY_LEGACY = ("task-000/3", "task-001/4")  # kept by `all` (invalid/empty reference), dropped by `corrected`


def write_legacy_run(path):
    """A legacy-scored stored run over every step of the excerpt in `all` mode (answers = references)."""
    engine = create_engine("reference")
    engine.load()
    rows = [dict(r.per_step) for r in run_steps(engine, load_replay(str(EXCERPT), mode="all").steps, scorer="legacy")]
    write_result_file(path, {"model": "legacy-model", "model_short": "legacy-model", "model_path": "org/legacy-model",
                             "gpu": "none", "eval_path": "replay_full.jsonl@612f5755", "timestamp": "2026-04-26T00:00:00",
                             "scoring_version": "legacy_386", "aggregate": aggregate_scores(rows, "legacy"),
                             "per_step": rows})
    return path


@pytest.fixture
def lab_ctx(tmp_path, monkeypatch):
    """A lab context (no server, no store) on the corrected excerpt with one legacy stored column."""
    from lab.serve import create_context

    monkeypatch.delenv("LAB_LEGACY_REPLAY", raising=False)
    run = write_legacy_run(tmp_path / "legacy-run.json")
    settings = Settings(results_dir=tmp_path / "results", runs_dir=tmp_path / "results" / "runs",
                        db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"stored:{run}?name=legacy"], open_db=False)
    ctx.pool.wait()
    [entry] = ctx.engine_entries()
    assert entry.state == "ready" and entry.engine.scorer == "legacy"
    assert len(ctx.replay.steps) == 14
    return ctx, entry


def test_legacy_column_uses_the_legacy_replay_and_scorer_and_says_so(lab_ctx, monkeypatch):
    from lab.ui.compare.handlers import column_badges, step_outputs
    from lab.ui.compare.step_data import answer_step

    ctx, entry = lab_ctx
    monkeypatch.setenv("LAB_LEGACY_REPLAY", str(EXCERPT))
    out = step_outputs(ctx, ctx.step_keys()[0])
    assert 'data-scorer="legacy"' in out.columns_html and "legacy scorer · legacy 386-step replay" in out.columns_html
    title = column_badges(ctx, [entry], ctx.step_keys()[0])["legacy"]
    from lab.security.paths import display_path

    shown = display_path(EXCERPT, ctx.settings)  # as the header names it: never the server's path (issue 40)
    assert str(EXCERPT) not in title and f"legacy replay {shown} (16 steps, mode all" in title
    assert "2 of them are not in the loaded replay" in title
    assert "APPROXIMATION" not in out.columns_html
    # a step only the legacy replay has (its reference is invalid for the 303-step rule) is answered and scored
    legacy_step = load_replay(str(EXCERPT), mode="all").by_key[ONLY_LEGACY[0]]
    view = answer_step(ctx, entry, legacy_step)
    assert view.state == "ready" and view.metrics["command_f1"] == 1.0
    assert view.pred_units == list(parse_reference(legacy_step).command_units)


def test_a_step_the_legacy_replay_lacks_is_not_in_this_run_with_the_reason(lab_ctx, monkeypatch, tmp_path):
    from lab.ui.compare.handlers import step_outputs

    ctx, _ = lab_ctx
    lines = EXCERPT.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    trimmed = tmp_path / "legacy_trimmed.jsonl"
    trimmed.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")  # the legacy replay without the first step
    monkeypatch.setenv("LAB_LEGACY_REPLAY", str(trimmed))
    key = f"{first['task_id']}/{first['step_idx']}"
    out = step_outputs(ctx, key)
    assert 'data-state="absent"' in out.columns_html and "not in this run" in out.columns_html
    from lab.security.paths import display_path

    assert f"step {key} is not in the legacy 386-step replay ({display_path(trimmed, ctx.settings)})" in out.columns_html
    assert str(trimmed) not in out.columns_html
    assert 'data-state="ready"' in step_outputs(ctx, ctx.step_keys()[1]).columns_html


def test_without_a_legacy_replay_the_column_says_how_to_get_it(lab_ctx):
    from lab.ui.compare.handlers import step_outputs

    ctx, _ = lab_ctx  # no $LAB_LEGACY_REPLAY, empty cache folder
    out = step_outputs(ctx, ctx.step_keys()[0])
    assert 'data-state="ready"' in out.columns_html  # today's legacy-scorer behaviour, kept
    assert "APPROXIMATION on the loaded replay (no legacy replay: python -m lab data download --legacy)" in out.columns_html


def test_a_missing_legacy_replay_file_is_a_message_in_the_column(lab_ctx, monkeypatch, tmp_path):
    from lab.ui.compare.handlers import step_outputs

    ctx, _ = lab_ctx
    monkeypatch.setenv("LAB_LEGACY_REPLAY", str(tmp_path / "nope.jsonl"))
    html = step_outputs(ctx, ctx.step_keys()[0]).columns_html
    assert 'data-state="error"' in html and "nope.jsonl: no such file" in html and "Traceback" not in html


def _replay_cli(tmp_path, *args):
    env = {**__import__("os").environ, "LAB_LEGACY_REPLAY": str(EXCERPT), "LAB_CACHE_DIR": str(tmp_path / "cache"),
           "LAB_RESULTS": str(tmp_path / "results")}
    return subprocess.run([sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--out", str(tmp_path / "out"),
                           *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


def test_cli_refuses_a_legacy_run_on_the_corrected_rules_and_replays_it_on_the_legacy_ones(tmp_path):
    run = write_legacy_run(tmp_path / "legacy-run.json")
    refused = _replay_cli(tmp_path, "--engine", f"stored:{run}")
    assert refused.returncode == 1 and not (tmp_path / "out").exists()
    [line] = [ln for ln in refused.stderr.splitlines() if ln.startswith("error:")]
    assert f"--replay {EXCERPT} --mode all --scorer legacy" in line and "legacy 386-step run" in line
    done = _replay_cli(tmp_path, "--engine", f"stored:{run}", "--mode", "all", "--scorer", "legacy", "--name", "again")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out" / "again.json").read_text())
    assert result["scoring_version"] == "legacy_386" and len(result["per_step"]) == 16
    assert result["aggregate"]["avg_command_f1"] == 1.0


def test_the_column_scores_on_the_legacy_reference_with_the_legacy_rules(tmp_path, monkeypatch):
    """The legacy replay's first step has no commands and the run answered none: the legacy scorer's
    empty-vs-empty is 1.0 (the loaded replay's reference, or the corrected scorer, would give 0.0)."""
    from lab.serve import create_context
    from lab.ui.compare.handlers import step_outputs

    lines = EXCERPT.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    empty = json.dumps({"analysis": "nothing to do", "plan": "", "commands": [], "task_complete": False})
    first.update(ref_raw=empty, ref_commands=[], ref_command_units=[])
    legacy_file = tmp_path / "legacy.jsonl"
    legacy_file.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    monkeypatch.setenv("LAB_LEGACY_REPLAY", str(legacy_file))
    run = write_legacy_run(tmp_path / "legacy-run.json")
    data = json.loads(run.read_text())
    data["per_step"][0].update(pred_command_units=[], pred_preview=empty, raw_output=empty)
    run.write_text(json.dumps(data))
    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache",
                        replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"stored:{run}?name=legacy"], open_db=False)
    ctx.pool.wait()
    key = f"{first['task_id']}/{first['step_idx']}"
    loaded_ref = parse_reference(ctx.replay.by_key[key]).command_units
    assert loaded_ref and score_units([], loaded_ref, "legacy").f1 == 0.0  # what the loaded replay would give
    assert score_units([], [], "corrected").f1 == 0.0  # and what the corrected scorer would give
    out = step_outputs(ctx, key)
    assert 'data-state="ready"' in out.columns_html and "legacy 386-step replay" in out.columns_html
    [view] = [ctx.views.get(("legacy", key))]
    assert view.pred_units == [] and view.metrics["command_f1"] == 1.0


def test_batch_refuses_a_legacy_run_and_writes_nothing(lab_ctx):
    from lab.ui.batch.tab import run_batch

    ctx, entry = lab_ctx
    [row] = run_batch(ctx, [entry.name], ctx.replay.steps)
    assert row.state.startswith("failed: ") and "--mode all --scorer legacy" in row.state and row.done == 0
    assert not list(ctx.settings.runs_dir.glob("*.json"))  # no result file written
