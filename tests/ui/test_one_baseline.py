"""One baseline, the same interval on every surface (issue 56 item 2): `python -m lab compare --json`, Results
against a baseline (lab.ui.results.tab.leaderboard_view), Triage's run-level block (lab.ui.triage.handlers) and
Compare's block (lab.ui.compare.handlers: two stored columns, or more with a baseline picked) show one pair's Δ
with the same interval, and several runs against one baseline with the same simultaneous intervals.

Which surface gives which kind of interval, for a baseline A and runs B, C, D:
- pairwise (A vs B alone): `compare A B`, Triage, Compare with two stored columns; and every surface judging A
  against several runs where only B has enough common steps (a family of one is its pairwise interval);
- simultaneous over B, C, D (max-T): `compare A B C D`, Results with A as the baseline (over the store's runs,
  here those four), Compare with the four runs as columns and A picked as the baseline."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from lab.cli import main
from lab.settings import Settings
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
SIMULTANEOUS_3 = "simultaneous over 3 comparisons (max-T)"


def make_lab(root, runs: tuple):
    """A lab over a store holding exactly `runs` ((name, shift, seed, steps)); its result files by name."""
    from lab.serve import create_context

    results = make_results_dir(root)
    files = {name: write(results / "runs", name, variant(name, shift=shift, seed=seed, steps=steps))
             for name, shift, seed, steps in runs}
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    return create_context(settings, []), files


@pytest.fixture(scope="module")
def pair_lab(tmp_path_factory):
    """base and better on all 303 steps; two runs of the excerpt's 14 steps, too few for an interval."""
    ctx, files = make_lab(tmp_path_factory.mktemp("one-pair"), (("base", 0.0, 1, None), ("better", 0.03, 2, None),
                                                                ("short-a", 0.0, 3, 14), ("short-b", 0.0, 4, 14)))
    yield ctx, files
    ctx.pool.close_all()


@pytest.fixture(scope="module")
def four_lab(tmp_path_factory):
    ctx, files = make_lab(tmp_path_factory.mktemp("four-runs"), (("base", 0.0, 1, None), ("better", 0.03, 2, None),
                                                                 ("close", 0.005, 3, None), ("worse", -0.03, 4, None)))
    yield ctx, files
    ctx.pool.close_all()


def rid(ctx, name: str) -> str:
    return ctx.query("SELECT run_id FROM runs WHERE model_short = ?", [name])["run_id"][0]


def shown(delta: float, ci: list[float]) -> str:
    """A difference and its interval as every surface prints them (two decimals, a real minus sign)."""
    from lab.analysis.run_pairs import signed

    return f"{signed(delta, 2)} [{signed(ci[0], 2)}, {signed(ci[1], 2)}]"


def cli(capsys, *argv) -> dict:
    assert main(["compare", *map(str, argv), "--json"]) == 0  # a look: exit 0
    return json.loads(capsys.readouterr().out)


def pair_cell(html: str) -> str:
    """The score row's Δ [interval] of a pair's block (lab.ui.shell.paired_html)."""
    return re.search(r'<tr data-metric="score">.*?<td class="lab-pair-delta">([^<]*)</td>', html).group(1)


def against_cells(html: str) -> dict[str, str]:
    """run id -> Δ score [interval] of each row of Compare's block with several columns."""
    return dict(re.findall(r'<li data-run="([^"]+)"><b>[^<]*</b>: Δ score ([^·<]*?)(?: · |<)', html))


def results_cells(ctx, baseline: str) -> tuple[dict[str, str], str]:
    """name -> Δ score cell of Results against `baseline`, and the line under the table."""
    from lab.analysis.leaderboard import DELTA_COLUMN
    from lab.ui.results.tab import leaderboard_view

    frame, note = leaderboard_view(ctx, False, "", "score", baseline)
    return dict(zip(frame["name"].astype(str), frame[DELTA_COLUMN])), note


def triage_header(ctx, base: str, cand: str) -> str:
    """Triage's block for baseline vs candidate (after the flags the tab refreshes as it opens)."""
    from lab.ui.triage import handlers as h
    from lab.ui.triage.filters import load_choices

    load_choices(ctx)
    return h.compare_pair(ctx, base, cand, "regressed")[2]


def compare_block(ctx, names: list[str], baseline: str | None = None) -> str:
    """Compare's run-level block with exactly `names` as stored columns (the handler a step switch calls)."""
    from lab.ui.compare.handlers import step_outputs

    for entry in ctx.engine_entries():
        ctx.remove_engine(entry.name)
    for name in names:
        ctx.add_stored_run(rid(ctx, name))
    return step_outputs(ctx, ctx.step_keys()[0], baseline=baseline).run_block.html


def test_one_pair_has_one_interval_on_every_surface(pair_lab, capsys):
    ctx, files = pair_lab
    base, better = rid(ctx, "base"), rid(ctx, "better")
    score = cli(capsys, files["base"], files["better"])["metrics"]["score"]
    assert score["adjustment"] == "pairwise"
    expected = shown(score["delta"], score["ci"])

    triage = triage_header(ctx, base, better)
    assert pair_cell(triage) == expected and "(95 %, pairwise, 303 common steps of 50 tasks)" in triage

    two = compare_block(ctx, ["base", "better"])
    assert pair_cell(two) == expected and "<b>better</b> vs baseline <b>base</b>" in two

    # the short runs have no interval: against the baseline, better is a family of one, so its interval is the
    # pairwise one (it was a max-T interval over one column labelled "pairwise": [+1.11, +3.86] for [+1.15, +3.89])
    four = compare_block(ctx, ["base", "better", "short-a", "short-b"])
    assert against_cells(four)[better] == expected and "against the baseline <b>base</b> (95 %, pairwise)" in four
    many = cli(capsys, files["base"], files["better"], files["short-a"], files["short-b"])
    alone = many["runs"][1]["difference"]
    assert alone["adjustment"] == "pairwise" and shown(alone["delta"], alone["ci"]) == expected
    assert many["runs"][2]["difference"]["ci"] is None

    cells, note = results_cells(ctx, base)
    assert cells["better"] == expected and "95 % intervals pairwise" in note

    from lab.analysis.shared_views import pair_comparison  # what Triage and two-column Compare draw: to 1e-9

    drawn = pair_comparison(ctx.store, base, better, hold=ctx.store_session).get("score")
    assert drawn.ci == pytest.approx(score["ci"], abs=1e-9) and drawn.delta == pytest.approx(score["delta"], abs=1e-9)


def test_four_runs_against_one_baseline_agree_where_simultaneous(four_lab, capsys):
    ctx, files = four_lab
    names = ["base", "better", "close", "worse"]
    ids = {n: rid(ctx, n) for n in names}
    report = cli(capsys, *(files[n] for n in names))
    expected = {row["name"]: shown(row["difference"]["delta"], row["difference"]["ci"]) for row in report["runs"][1:]}
    assert {row["difference"]["adjustment"] for row in report["runs"][1:]} == {SIMULTANEOUS_3}

    # simultaneous over better, close, worse: the CLI, Results and Compare's block with the four as columns
    cells, note = results_cells(ctx, ids["base"])
    assert {n: cells[n] for n in expected} == expected and f"95 % intervals {SIMULTANEOUS_3}" in note
    block = compare_block(ctx, names)
    assert against_cells(block) == {ids[n]: text for n, text in expected.items()}
    assert f"against the baseline <b>base</b> (95 %, {SIMULTANEOUS_3})" in block

    # pairwise: `compare base better`, Triage and Compare with two columns; narrower than the simultaneous one
    pair = cli(capsys, files["base"], files["better"])["metrics"]["score"]
    assert pair_cell(triage_header(ctx, ids["base"], ids["better"])) == shown(pair["delta"], pair["ci"])
    assert pair_cell(compare_block(ctx, ["base", "better"])) == shown(pair["delta"], pair["ci"])
    wide = next(r["difference"]["ci"] for r in report["runs"] if r["name"] == "better")
    assert wide[1] - wide[0] > pair["ci"][1] - pair["ci"][0]


def test_a_baseline_picked_in_compare_is_the_one_the_others_use(four_lab, capsys):
    """Compare's block against a baseline picked among the columns (here the second) gives what `compare` and
    Results give against that baseline; the page keeps its pick for the steps it opens next."""
    from lab.ui.app import build_app

    ctx, files = four_lab
    names = ["base", "better", "close", "worse"]
    ids = {n: rid(ctx, n) for n in names}
    compare_block(ctx, names)
    report = cli(capsys, files["better"], files["base"], files["close"], files["worse"])
    expected = {ids[row["name"]]: shown(row["difference"]["delta"], row["difference"]["ci"])
                for row in report["runs"][1:]}
    cells, _ = results_cells(ctx, ids["better"])
    assert {ids[n]: cells[n] for n in ("base", "close", "worse")} == expected

    demo = build_app(ctx)
    handler = {getattr(f.fn, "__name__", ""): f.fn for f in demo.fns.values()}
    session = SimpleNamespace(session_hash="picks-better")
    picker, block = handler["pick_baseline"](ids["better"], session)
    assert picker["value"] == ids["better"] and picker["visible"] is True
    assert [run for _, run in picker["choices"]] == [ids[n] for n in names]  # the stored columns, in order
    assert against_cells(block) == expected and "against the baseline <b>better</b> (95 %" in block
    switched = handler["show_step_fast"](ctx.step_keys()[1], False, None, session)
    assert switched[-2]["value"] == ids["better"] and against_cells(switched[-1]) == expected
    other = handler["show_step_fast"](ctx.step_keys()[1], False, None, SimpleNamespace(session_hash="new-page"))
    assert other[-2]["value"] == ids["base"] and "against the baseline <b>base</b>" in other[-1]  # default: first
    with pytest.warns(UserWarning, match=r"&lt;b&gt;no-such-run&lt;/b&gt;.* is no stored column"):
        gone, block = handler["pick_baseline"]("<b>no-such-run</b>", session)  # no column (any more): the first
    assert gone["value"] == ids["base"] and "against the baseline <b>base</b>" in block
