"""Token log-probabilities of generated answers and the reference answer's likelihood, on in-process
transformers (a tiny random-weight model built in the test): exact against a plain forward pass,
kept in result files and DuckDB, "not recorded" for runs without them, and `score-reference` runs that
resume where they stopped."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.data import load_replay
from lab.engines import Request, Sampling, create_engine
from lab.engines.logprobs import MalformedLogprobs, TokenLogprobs, first_parting
from lab.errors import EngineSpecError, LabError
from tests.paths import EXCERPT, REPO, TB2LITE

ROOT = REPO


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&batch_size=2&logprobs=3")
    engine.load()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def steps():
    return load_replay(str(EXCERPT)).steps[:2]


def forward_logprobs(engine, prompt: str, ids: list[int]) -> list[float]:
    """Each of `ids`' log-probability after `prompt`, from one plain forward pass (no generate)."""
    import torch

    prompt_ids = engine.tokenizer(prompt).input_ids
    with torch.no_grad():
        rows = engine.model(input_ids=torch.tensor([prompt_ids + ids])).logits[0].float().log_softmax(-1)
    return [rows[len(prompt_ids) - 1 + i, t].item() for i, t in enumerate(ids)]


def test_generated_tokens_carry_their_exact_log_probabilities_and_top_k(engine):
    prompts = [engine.tokenizer.apply_chat_template([{"role": "user", "content": t}], tokenize=False,
                                                    add_generation_prompt=True) for t in ("ls -la", "cd /app && ls")]
    out = engine.generate([Request(step=None, prompt=p) for p in prompts], Sampling(max_tokens=8))
    for prompt, answer in zip(prompts, out):
        lp = answer.logprobs
        assert lp is not None and lp.k == 3 and len(lp.logprobs) == len(answer.token_ids) == len(lp.top) > 0
        expected = forward_logprobs(engine, prompt, answer.token_ids)
        assert max(abs(a - b) for a, b in zip(lp.logprobs, expected)) < 1e-4  # batched + padded = one forward pass
        for chosen, alternatives in zip(lp.logprobs, lp.top):
            assert len(alternatives) == 3 and alternatives == sorted(alternatives, key=lambda p: -p[1])
            assert chosen <= alternatives[0][1] + 1e-6  # greedy picks the best: it is the top alternative
            assert abs(chosen - alternatives[0][1]) < 1e-6
        summary = lp.summary()
        assert summary["lp_tokens"] == len(lp.logprobs) and summary["lp_min"] <= summary["lp_mean"] <= 0


def test_logprobs_option_is_checked_and_zero_records_none(tiny_model_dir):
    for bad in ("-1", "21", "five", "1e400"):
        with pytest.raises(EngineSpecError, match="logprobs must be"):
            create_engine(f"transformers:{tiny_model_dir}?logprobs={bad}")
    off = create_engine(f"transformers:{tiny_model_dir}?device=cpu&logprobs=0")
    off.load()
    try:
        [answer] = off.generate([Request(step=None, prompt="ls")], Sampling(max_tokens=3))
        assert answer.logprobs is None and answer.error is None
    finally:
        off.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e4, max_value=0.0), min_size=1, max_size=40))
def test_the_summary_mean_lies_between_the_minimum_and_the_maximum(values):
    """Found by a replay whose six tokens each had log-probability -6.9885: their mean was -6.988500000000001."""
    summary = TokenLogprobs(k=0, logprobs=list(values)).summary()
    assert summary["lp_min"] == min(values) <= summary["lp_mean"] <= max(values)
    assert TokenLogprobs(k=0, logprobs=[-6.9885] * 6).summary()["lp_mean"] == -6.9885


def test_compact_record_round_trips_and_rejects_garbage():
    lp = TokenLogprobs(k=2)
    lp.extend(["a", "b"], [-0.1, float("-inf")], [{"a": -0.1, "x": -2.0, "y": -3.0}, {"b": -1e5, "c": -1.0}])
    assert lp.logprobs == [-0.1, -1e4] and lp.top == [[("a", -0.1), ("x", -2.0)], [("c", -1.0), ("b", -1e4)]]
    for junk in ([-0.1, float("nan")], [-0.1, "junk"]):  # a chunk with garbage: nothing of it is kept
        with pytest.raises(MalformedLogprobs):
            lp.extend(["c", "d"], junk, None)
    assert lp.tokens == ["a", "b"]
    back = TokenLogprobs.from_record(json.loads(json.dumps(lp.to_record())))
    assert back.tokens == ["a", "b"] and back.logprobs == lp.logprobs and back.top == lp.top
    for junk in (None, 5, "x", {"lp": "no"}, {"k": 1}):
        assert TokenLogprobs.from_record(junk) is None
    assert first_parting([1, 2, 3], [1, 2, 4]) == 2 and first_parting([1, 2], [1, 2]) is None
    assert first_parting([1, 2], [1, 2, 3]) == 2


def test_reference_likelihood_is_one_forward_pass_over_prompt_and_reference(engine, steps):
    from lab.runs.reference_run import score_step
    from lab.prompts.engine_prompt import render_for_engine

    step = steps[0]
    row = score_step(engine, step)
    prompt = render_for_engine(engine, step).text
    ref_ids = engine.tokenizer(step.ref_raw, add_special_tokens=False).input_ids
    expected = forward_logprobs(engine, prompt, ref_ids)
    assert row["ref_tokens"] == len(ref_ids) and row["error"] is None
    assert max(abs(a - b) for a, b in zip(row["token_logprobs"], expected)) < 1e-3  # rounded to 4 decimals
    assert math.isclose(row["ref_logprob"], sum(expected), abs_tol=1e-2)
    assert math.isclose(row["ref_nll_per_token"], -sum(expected) / len(expected), abs_tol=1e-3)
    # every command unit of the reference is located and its tokens' log-probabilities summed
    assert row["unit_logprobs"] and all(u["tokens"] > 0 and u["logprob"] < 0 for u in row["unit_logprobs"])


def test_score_reference_run_stops_resumes_and_equals_an_uninterrupted_run(engine, steps, tmp_path):
    from lab.runs.reference_run import ReferenceConfig, score_reference_run

    stop = threading.Event()

    def progress(done: int, total: int) -> None:
        if done >= 1:
            stop.set()

    config = ReferenceConfig(out_dir=tmp_path / "a", run_name="ref", replay_fingerprint="f")
    with pytest.raises(LabError, match="1 of 2 steps scored are kept"):
        score_reference_run(engine, steps, config, progress=progress, stop=stop)
    resumed = score_reference_run(engine, steps, ReferenceConfig(out_dir=tmp_path / "a", run_name="ref",
                                                                 replay_fingerprint="f", resume=True))
    fresh = score_reference_run(engine, steps, ReferenceConfig(out_dir=tmp_path / "b", run_name="ref",
                                                               replay_fingerprint="f"))
    a, b = json.loads(resumed.read_text()), json.loads(fresh.read_text())
    assert a["per_step"] == b["per_step"] and a["aggregate"] == b["aggregate"]
    assert a["kind"] == "tb2lite-reference-likelihood" and a["aggregate"]["steps_scored"] == 2
    assert not list((tmp_path / "a").glob("*.partial.jsonl"))
    with pytest.raises(LabError, match="checkpoint is of another run"):
        (tmp_path / "a" / "ref.reference.partial.jsonl").write_text(json.dumps({"header": {"kind": "x"}}) + "\n")
        score_reference_run(engine, steps, ReferenceConfig(out_dir=tmp_path / "a", run_name="ref", resume=True))


def test_reference_engines_without_a_model_are_refused_in_one_line(steps, tmp_path):
    from lab.runs.reference_run import ReferenceConfig, score_reference_run

    ref = create_engine("reference")
    ref.load()
    with pytest.raises(LabError, match="cannot score the reference"):
        score_reference_run(ref, steps, ReferenceConfig(out_dir=tmp_path))


def test_replay_and_score_reference_land_in_duckdb_with_not_recorded_for_others(tiny_model_dir, tmp_path):
    """CLI end to end: a replay with log-probabilities, a score-reference run, then the store: steps carry
    lp_mean/lp_min/lp_low_tokens, the reference table its NLL per token, and the published runs NULL."""
    env = {"LAB_RESULTS": str(tmp_path / "results"), "LAB_DB": str(tmp_path / "lab.duckdb"), "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin"}
    spec = f"transformers:{tiny_model_dir}?device=cpu&max_tokens=6&name=tiny"
    base = [sys.executable, "-m", "lab"]
    stored = tmp_path / "results" / "published-copy.json"  # a published run: no log-probabilities in it
    stored.parent.mkdir(parents=True)
    stored.write_bytes((TB2LITE / "published" / "llada21_flash_transformers_smoke.json").read_bytes())
    for args in (["replay", "--engine", spec, "--limit", "2"], ["score-reference", "--engine", spec, "--limit", "2"]):
        done = subprocess.run(base + args + ["--replay", str(EXCERPT)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    assert "2 of 2 steps scored" in done.stdout
    result = json.loads((tmp_path / "results" / "runs" / "tiny.json").read_text())
    assert result["sampling"]["logprobs_top_k"] == 5
    assert all(len(r["logprobs"]["lp"]) == r["completion_tokens"] for r in result["per_step"])
    query = ("SELECT s.step_key, s.lp_mean, s.lp_min, s.lp_low_tokens, r.ref_nll_per_token FROM steps s "
             "JOIN runs USING (run_id) LEFT JOIN step_reference r USING (run_id, step_key) "
             "WHERE runs.path = 'runs/tiny.json' ORDER BY s.step_key")
    out = subprocess.run(base + ["results", "sql", query], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()[1:]
    assert len(lines) == 2
    for line in lines:
        key, mean, low, count, nll = line.split(",")
        assert float(low) <= float(mean) < 0 and int(count) >= 0 and float(nll) > 0
    # the published figures and stored runs without log-probabilities say NULL ("not recorded"), never 0
    published = subprocess.run(base + ["results", "sql", "SELECT count(*) AS n, count(lp_mean) AS recorded FROM steps "
                                       "JOIN runs USING (run_id) WHERE runs.path <> 'runs/tiny.json'"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    n, recorded = published.stdout.strip().splitlines()[1].split(",")
    assert published.returncode == 0 and int(n) > 0 and recorded == "0"
    # Results: the run's reference NLL per token beside its F1 (the score-reference run's own figure over
    # the same steps); every other row says "not recorded"
    from lab.settings import Settings
    from lab.store import open_store
    from lab.workspace import LabContext
    from lab.ui.results.tab import NOT_RECORDED, leaderboard_frame

    ref_file = next(p for p in (tmp_path / "results" / "runs").glob("*.json") if p.name != "tiny.json")
    expected = json.loads(ref_file.read_text())["aggregate"]["ref_nll_per_token"]
    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb", replay_path=str(EXCERPT))
    with open_store(settings) as store:
        table = leaderboard_frame(LabContext(settings=settings, store=store), False)
        by_nll = leaderboard_frame(LabContext(settings=settings, store=store), False, sort="ref_nll_per_token")
    cols = list(table.columns)
    assert cols.index("ref_nll_per_token") == cols.index("avg_command_f1") + 1
    mine = table[table["run_id"].astype(str).str.len() > 0]
    tiny = mine[mine["name"].astype(str).str.contains("tiny")].iloc[0]
    assert math.isclose(tiny["ref_nll_per_token"], expected, abs_tol=1e-4), (tiny.to_dict(), expected)
    others = table.drop(index=tiny.name)
    assert len(others) >= 1 and set(others["ref_nll_per_token"]) == {NOT_RECORDED}  # the stored published copy
    assert by_nll.iloc[0]["name"] == tiny["name"]  # sorted likeliest reference first, not-recorded last


def test_compare_columns_shade_tokens_and_mark_where_two_answers_part(engine, steps, tmp_path):
    """A run written with log-probabilities, opened as two `stored:` columns whose answers differ: each column
    shows its answer token by token with hover texts, and the first differing token is marked with both
    probabilities; a run without them says "not recorded"."""
    from lab.runs.replay import ReplayConfig, replay
    from lab.ui.compare.render_html import render_columns
    from lab.ui.compare.step_view import engine_view_from_result
    from lab.prompts.engine_prompt import render_for_engine
    from lab.runs.pipeline import score_completion

    path = replay(engine, steps[:1], ReplayConfig(out_dir=tmp_path, run_name="a", sampling=Sampling(max_tokens=6)))
    other = json.loads(path.read_text())
    row = other["per_step"][0]
    row["logprobs"]["tokens"][2] = "XX"  # the second run says something else from its third token on
    (tmp_path / "b.json").write_text(json.dumps(other))
    plain = json.loads(path.read_text())
    plain["per_step"][0].pop("logprobs")
    (tmp_path / "c.json").write_text(json.dumps(plain))
    views = []
    for name in ("a.json", "b.json", "c.json"):
        stored = create_engine(f"stored:{tmp_path / name}")
        stored.load()
        [completion] = stored.generate([Request(step=steps[0], prompt="")], Sampling())
        result = score_completion(stored, steps[0], render_for_engine(stored, steps[0]), completion)
        views.append(engine_view_from_result(stored.spec, name, result, "stored"))
    html = render_columns(views)
    assert html.count('class="lab-tok') >= 2 * len(row["logprobs"]["lp"])
    assert "top: " in html and "mean token probability" in html
    assert views[0].parting.index == views[1].parting.index == 2 and views[2].parting is None
    assert "parts from b.json at token 2" in html and "parts from a.json at token 2" in html
    assert "token log-probabilities: not recorded" in html


def test_compare_shows_the_reference_nll_beside_f1_live_stored_and_not_recorded(tiny_model_dir, tmp_path):
    """Compare's columns: a live engine's reference NLL per token is its own teacher-forced prefill (equal to
    score_reference); a stored run of a model with a score-reference run shows that run's figure for the
    step; a stored run without one, "not recorded" (never 0); the reference column shows none."""
    import re
    from html import escape

    from lab.runs.reference_run import ReferenceConfig, score_reference_run
    from lab.runs.replay import ReplayConfig, replay
    from lab.settings import Settings
    from lab.serve import create_context
    from lab.ui.compare.handlers import step_outputs
    from tests.ui.test_ui_handlers import write_stored_run

    runs = tmp_path / "results" / "runs"
    spec = f"transformers:{tiny_model_dir}?device=cpu&max_tokens=6&name=tiny"
    live = create_engine(spec)
    live.load()
    all_steps = load_replay(EXCERPT).steps
    step = all_steps[0]
    replay(live, [step], ReplayConfig(out_dir=runs, run_name="tiny-run", sampling=Sampling(max_tokens=6)))
    score_reference_run(live, [step], ReferenceConfig(out_dir=runs, run_name="tiny-run"))
    write_stored_run(runs / "other.json", "other")  # a run without any score-reference run
    settings = Settings(results_dir=tmp_path / "results", runs_dir=runs, db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference", spec, f"stored:{runs / 'tiny-run.json'}", f"stored:{runs / 'other.json'}"])
    try:
        ctx.pool.wait()
        from lab.ui.compare.step_data import answer_step

        from lab.ui.compare.answers import generate_views

        shown = list(generate_views(ctx, step.key))  # Generate: answers first, then the live model's prefill
        for entry in ctx.engine_entries():
            answer_step(ctx, entry, step) if (entry.name, step.key) not in ctx.views else None
        html = step_outputs(ctx, step.key).columns_html
        answered = next(i for i, views in enumerate(shown) if all(v.state == "ready" for v in views))
        assert all(v.ref_nll is None for v in shown[answered] if v.kind == "transformers")  # the answer is not held
        assert shown[-1][[v.kind for v in shown[-1]].index("transformers")].ref_nll.nll_per_token is not None
    finally:
        ctx.pool.close_all()
        if ctx.store is not None:
            ctx.store.close()
    from lab.prompts.engine_prompt import render_for_engine

    expected = live.score_reference(render_for_engine(live, step).text, step.ref_raw).nll_per_token

    def cell(column_spec: str) -> str:
        column_spec = escape(column_spec)
        column = html.split(f'<div class="lab-col" data-engine="{column_spec}"', 1)[1].split('<div class="lab-col" ', 1)[0]
        found = re.search(r'data-metric="ref NLL/tok"[^>]*>.*?<b[^>]*>([^<]*)</b>', column, re.S)
        return found.group(1) if found else ""

    assert float(cell(spec)) == pytest.approx(expected, abs=1e-3)
    stored_figure = float(cell(f"stored:{runs / 'tiny-run.json'}"))
    assert stored_figure == pytest.approx(expected, abs=1e-3)  # the same model's score-reference run, this step
    assert cell(f"stored:{runs / 'other.json'}") == "not recorded"
    assert cell("reference") == ""
