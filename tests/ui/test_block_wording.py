"""The run-level block's words (issue 56 item 5), where Compare and Triage build them: a count of one is
singular ("2 common steps of 1 task", not "1 tasks"; "1 point"), a block without an interval says so once
instead of "(fewer than 30 common steps (2): no interval) (95 %, …)", two checkpoints that score the same are a
tie (not "step 1 over step 0: 0.00"), and every negative figure carries the block's minus sign "−", the
tasks table under Triage's block included (it showed ASCII "-1.15" beside "−1")."""
from __future__ import annotations

import re

import pytest

from lab.analysis.run_pairs import points_text
from lab.settings import Settings
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    """base; worse; twin (base's every figure under another name: a tie); two runs of 2 steps of one task."""
    from lab.serve import create_context
    from lab.ui.triage.filters import load_choices

    root = tmp_path_factory.mktemp("block-wording")
    results = make_results_dir(root)
    for name, shift, seed, steps in (("base", 0.0, 1, None), ("worse", -0.03, 2, None), ("twin", 0.0, 1, None),
                                     ("two-a", 0.0, 3, 2), ("two-b", 0.05, 4, 2)):
        write(results / "runs", name, variant(name, shift=shift, seed=seed, steps=steps))
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    lab = create_context(settings, [])
    load_choices(lab)  # the flags Triage refreshes as its tab opens
    yield lab
    lab.pool.close_all()


def rid(ctx, name: str) -> str:
    return ctx.query("SELECT run_id FROM runs WHERE model_short = ?", [name])["run_id"][0]


def triage(ctx, base: str, cand: str) -> tuple:
    from lab.ui.triage import handlers as h

    return h.compare_pair(ctx, rid(ctx, base), rid(ctx, cand), "regressed")


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_one_task_is_singular_and_no_interval_is_said_once(ctx):
    header = text_of(triage(ctx, "two-a", "two-b")[2])
    assert "over 2 common steps of 1 task: no interval (it needs at least 30 common steps)" in header
    assert "1 tasks" not in header and ") (95 %" not in header  # not "(… no interval) (95 %, … of 1 tasks)"
    assert "these runs share 2 steps of 1 task)" in header  # the hint


def test_the_cli_says_one_task_too(ctx, capsys):
    from lab.cli import main

    runs = ctx.settings.runs_dir
    assert main(["compare", str(runs / "two-a.json"), str(runs / "two-b.json")]) == 0
    out = capsys.readouterr().out
    assert "over 2 common steps of 1 task; 95 % (pairwise) intervals" in out and "1 tasks" not in out


def test_one_point_is_singular():
    assert points_text(1.0, 0) == "1 point" and points_text(2.0, 0) == "2 points"
    assert points_text(0.04) == "0.0 points" and points_text(2.345) == "2.3 points"


def test_a_tie_at_the_top_of_a_series_is_said_to_be_one(ctx):
    from lab.analysis.series_judgement import adjustment_note, lead_text, series_stats
    from lab.store.series_members import join_series

    ids = [rid(ctx, name) for name in ("base", "twin")]  # before the store is held: ctx.query holds it too
    with ctx.store_session() as store:
        for at, run_id in enumerate(ids):
            join_series(store, run_id, "tied-series", at)
    stats = series_stats(ctx.store, "tied-series", hold=ctx.store_session, resamples=1000)
    lead = lead_text(stats)
    assert re.match(r"step \d and step \d tie: Δ 0\.00 \[0\.00, 0\.00\]", lead) and " over " not in lead
    note = adjustment_note(stats)
    assert "Best vs runner-up: step" in note and "tie: Δ 0.00" in note
    assert "95 % intervals pairwise (one later checkpoint)" in note  # two points: one comparison, pairwise


def test_one_minus_sign_in_the_block_and_its_tasks(ctx):
    _, _, header, tasks = triage(ctx, "base", "worse")
    assert re.search(r"score −\d+\.\d\d \[−\d+\.\d\d, [−+]\d+\.\d\d\]", text_of(header))
    shares = list(tasks["contribution"])
    assert shares and not any("-" in s for s in shares)  # "−1.150", never "-1.15"
    assert any(s.startswith("−") for s in shares) and all(re.fullmatch(r"[−+]?\d+\.\d{3}", s) for s in shares)
    assert not re.search(r"(?<![\w-])-\d", text_of(header))  # no ASCII minus before a figure anywhere in the block
