"""A NULL in any nullable column of the store reaches no reader as an error (issue 40 item 2).

One accepted `NAME.reference.json` whose rows had `ref_logprob` but null `ref_nll_per_token` and
`ref_tokens` broke the stored run's Compare column for every visitor ("generation failed · TypeError:
float() argument must be … not 'NAType'"). The importer now refuses such a row in one line naming the
file and row; and every reader of the store (Compare's columns, Results' table and plots, Triage's
slices and run comparison) is fed stores whose nullable columns are NULL, in any combination
(hypothesis), as a store written by an older importer or by hand could hold them: none raises, and a
missing reference NLL reads "not recorded"."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from lab.settings import Settings
from lab.store import open_store
from tests.helpers_app import run_lab_cli
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
TABLES = ("runs", "steps", "reference_runs", "reference_steps")


def reference_file(result: dict, **row_fields) -> dict:
    """A reference-likelihood file for `result`'s model: every step scored (10 tokens, -5 in all), or as given."""
    rows = [{"task_id": r["task_id"], "step_idx": r["step_idx"], "ref_tokens": 10, "ref_logprob": -5.0,
             "ref_logprob_mean": -0.5, "ref_nll_per_token": 0.5, "prompt_tokens": 100, "error": None, **row_fields}
            for r in result["per_step"]]
    return {"kind": "tb2lite-reference-likelihood", "format_version": 1, "engine_spec": "transformers:m",
            "model_path": result["model_path"], "lora_path": None, "model_short": result["model_short"],
            "aggregate": {"ref_nll_per_token": 0.5}, "per_step": rows}


def _settings(root: Path, db: Path) -> Settings:
    return Settings(results_dir=root / "results", runs_dir=root / "results" / "runs", db_path=db,
                    cache_dir=root / "cache", replay_path=str(EXCERPT))


@pytest.mark.parametrize("fields,said", [
    ({"ref_nll_per_token": None, "ref_tokens": None}, "'ref_tokens' must be at least 1 where 'ref_logprob' is given"),
    ({"ref_nll_per_token": None}, "'ref_nll_per_token' is missing where 'ref_logprob' is given"),
    ({"ref_logprob": None}, "'ref_nll_per_token' is given without 'ref_logprob'"),
    ({"ref_nll_per_token": 3.0}, "'ref_nll_per_token' is 3.0, but ref_logprob / ref_tokens makes it 0.5000"),
    ({"ref_logprob_mean": -2.0}, "'ref_logprob_mean' is -2.0, but ref_logprob / ref_tokens makes it -0.5000"),
    ({"ref_tokens": 0}, "'ref_tokens' must be at least 1"),
    ({"ref_logprob": -int("9" * 400)}, "'ref_logprob' must be a finite number, got '-99999"),
])
def test_the_importer_refuses_a_row_the_store_cannot_show(tmp_path, fields, said):
    results = make_results_dir(tmp_path)
    runs = results / "runs"
    runs.mkdir()
    result = write_stored_run(runs / "m.json", "m")
    path = runs / "m.reference.json"
    path.write_text(json.dumps(reference_file(result, **fields)), encoding="utf-8")
    out = run_lab_cli(["results", "--db", str(tmp_path / "lab.duckdb"), "--results", str(results), "import", str(path)])
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert f"not imported: {path}: per_step[0]: field " in line and said in line, line


def test_a_step_not_scored_is_accepted_with_its_error(tmp_path):
    results = make_results_dir(tmp_path)
    runs = results / "runs"
    runs.mkdir()
    result = write_stored_run(runs / "m.json", "m")
    data = reference_file(result)
    data["per_step"][0].update(ref_tokens=0, ref_logprob=None, ref_logprob_mean=None, ref_nll_per_token=None,
                               error="empty reference")
    del data["per_step"][1]["ref_logprob_mean"]  # derived: ref_logprob / ref_tokens
    (runs / "m.reference.json").write_text(json.dumps(data), encoding="utf-8")
    with open_store(_settings(tmp_path, tmp_path / "lab.duckdb")) as store:
        rows = store.query("SELECT step_key, ref_logprob_mean, error FROM reference_steps ORDER BY step_key").values.tolist()
    assert rows[0][1:] == [None, "empty reference"] or (rows[0][1] != rows[0][1] and rows[0][2] == "empty reference")
    assert rows[1][1] == -0.5


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    """A store with one stored run, its model's reference-likelihood run, a second run of the same
    model (for Triage's comparison), their equiv columns filled."""
    root = tmp_path_factory.mktemp("nulls")
    results = make_results_dir(root)
    runs = results / "runs"
    runs.mkdir()
    result = write_stored_run(runs / "m.json", "m")
    second = write_stored_run(runs / "m2.json", "m", offset=1)
    assert second["model_path"] == result["model_path"]
    (runs / "m.reference.json").write_text(json.dumps(reference_file(result)), encoding="utf-8")
    db = root / "lab.duckdb"
    with open_store(_settings(root, db)) as store:
        columns = store.query("SELECT table_name, column_name FROM information_schema.columns "
                              "WHERE is_nullable = 'YES' AND table_name IN ('runs', 'steps', 'reference_runs', "
                              "'reference_steps') ORDER BY ALL").values.tolist()
    return root, db, [tuple(c) for c in columns]


def read_everything(root: Path, db: Path) -> list[str]:
    """Every reader of the store, as the app calls them; returns the reference NLL cells Compare showed."""
    import re

    from lab.triage import SliceSpec, refresh_step_flags
    from lab.triage.compare_runs import DISAGREEMENT_VIEWS, disagreement, flip_table, flip_summary
    from lab.serve import create_context
    from lab.ui.compare.handlers import step_outputs
    from lab.ui.results.tab import SORTS, count_html, draw_plot, leaderboard_frame, plot_registry
    from lab.ui.triage.handlers import slice_page
    from lab.triage.slices import ORDER_COLUMNS

    settings = _settings(root, db)
    ctx = create_context(settings, [f"stored:{root / 'results' / 'runs' / 'm.json'}"])
    try:
        ctx.pool.wait()
        cells = []
        for key in [s.key for s in ctx.replay.steps[:3]]:
            html = step_outputs(ctx, key).columns_html
            assert "generation failed" not in html and "Traceback" not in html, html[:2000]
            cells += re.findall(r'data-metric="ref NLL/tok"[^>]*>.*?<b[^>]*>([^<]*)</b>', html, re.S)
        for sort in SORTS:
            df = leaderboard_frame(ctx, False, sort=sort)
            count_html(df, False)
        for name in plot_registry():
            draw_plot(ctx, name, False)
        refresh_step_flags(ctx.store)
        run_ids = ctx.store.query("SELECT run_id FROM runs WHERE path LIKE 'runs/%' ORDER BY path")["run_id"].tolist()
        for order in ORDER_COLUMNS:
            slice_page(ctx, SliceSpec(order_by=order, ref_nll_min=0.0, ref_nll_max=9.0), 1)
            slice_page(ctx, SliceSpec(order_by=order, descending=True, run_ids=run_ids), 1)
        for view in DISAGREEMENT_VIEWS:
            disagreement(ctx.store, run_ids[0], run_ids[1], view)
        flip_summary(flip_table(ctx.store, run_ids))
        return cells
    finally:
        ctx.pool.close_all()
        if ctx.store is not None:
            ctx.store.close()


def test_the_readers_show_the_stored_reference_nll(base_store):
    root, db, _ = base_store
    copy = root / "copy-plain.duckdb"
    shutil.copy(db, copy)
    assert read_everything(root, copy) == ["0.500"] * 3


@pytest.mark.slow
def test_every_nullable_column_as_null_reaches_no_reader_as_an_error(base_store):
    root, db, columns = base_store
    assert ("reference_steps", "ref_nll_per_token") in columns and ("steps", "command_f1") in columns
    seen = {"n": 0}

    @hsettings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(st.sampled_from(columns), min_size=1, max_size=len(columns), unique=True))
    def check(nulled):
        seen["n"] += 1
        copy = root / f"copy-{seen['n']}.duckdb"
        shutil.copy(db, copy)
        con = duckdb.connect(str(copy))
        try:
            for table, column in nulled:
                con.execute(f'UPDATE {table} SET "{column}" = NULL')
        finally:
            con.close()
        cells = read_everything(root, copy)
        assert all(c == "not recorded" or float(c) == 0.5 for c in cells), cells
        copy.unlink()

    check()
    # and the one the issue met: a reference row with its log-probability but no NLL or token count
    copy = root / "copy-issue.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE reference_steps SET ref_nll_per_token = NULL, ref_tokens = NULL")
    con.close()
    assert read_everything(root, copy) == ["not recorded"] * 3
    # every column NULL at once
    copy = root / "copy-all.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    for table, column in columns:
        con.execute(f'UPDATE {table} SET "{column}" = NULL')
    con.close()
    read_everything(root, copy)
