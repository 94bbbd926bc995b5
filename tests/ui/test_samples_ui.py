"""Sampling stability in the UI and triage: collapsed answers (HTML), "Sample N on all engines" over a
real Gradio server (tiny model + reference + a stored sampled run), and triage's stability queries."""
from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import fmean

import pytest

from lab.data import load_replay
from lab.engines import create_engine
from lab.runs.replay import ReplayConfig, replay
from lab.runs.rescore import rescore_result
from lab.resultfiles.files import write_result_file
from lab.scoring.stability import summarize_samples
from lab.settings import Settings
from lab.ui.compare.samples_view import READY, SampleSet, render_sample_set, render_samples
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
EVIL = '<script>alert("x")</script>'


def test_collapsed_answers_render_most_frequent_first_and_escaped():
    samples = [
        {"sample": 0, "seed": 5, "pred_command_units": ["ls -la"], "command_f1": 1.0, "raw_output": "A"},
        {"sample": 1, "seed": 6, "pred_command_units": [EVIL], "command_f1": 0.0, "raw_output": EVIL},
        {"sample": 2, "seed": 7, "pred_command_units": ["ls -la"], "command_f1": 1.0, "raw_output": "B"},
        {"sample": 3, "seed": 8, "pred_command_units": ["cd /app", "ls"], "command_f1": 0.4, "raw_output": "C"},
        {"sample": 4, "seed": 9, "pred_command_units": ["ls -la"], "command_f1": 1.0, "raw_output": "A"},
    ]
    block = render_sample_set(SampleSet("engine-x", READY, samples, {"temperature": 0.7, "top_p": 0.95, "seed": 5},
                                        summary=summarize_samples(samples)))
    assert "<script>" not in block and "&lt;script&gt;" in block
    counts = re.findall(r'<td class="lab-count">(\d+)×</td>', block)
    assert counts == ["3", "1", "1"]  # ls -la ×3 first, then the two singletons
    first_row = block.split('<tr class="lab-answer">')[1]
    assert "<code>ls -la</code>" in first_row and "samples 0, 2, 4 · 2 wordings" in first_row
    assert block.count('class="lab-dot"') == 5 and "seeds 5–9" in block
    assert "mean F1 <b>0.68</b>" in block and "pass@1 0.60" in block and "pass@5 1.00" in block
    assert "3 distinct" in block
    empty = render_samples([])
    assert "Sample N on all engines" in empty


def sampled_result(steps, name: str, pattern) -> dict:
    """A reference replay with 3 samples per step whose sample units follow `pattern(step_no, sample, ref)`,
    rescored with the lab's scorer (so every figure is the real one)."""
    import tempfile

    engine = create_engine("reference")
    engine.load()
    with tempfile.TemporaryDirectory() as tmp:
        data = json.loads(replay(engine, steps, ReplayConfig(out_dir=Path(tmp), run_name=name, samples=3)).read_text())
    for i, row in enumerate(data["per_step"]):
        for sample in row["samples"]:
            sample["pred_command_units"] = pattern(i, sample["sample"], list(row["ref_command_units"]))
        row["pred_command_units"] = row["samples"][0]["pred_command_units"]
    data["model"] = data["model_short"] = name
    return rescore_result(data, "corrected")


def steady(i: int, k: int, ref: list[str]) -> list[str]:
    """Always the reference's first unit only."""
    return ref[:1]


def shaky(i: int, k: int, ref: list[str]) -> list[str]:
    """Even steps: right, wrong, right; odd steps: wrong every time."""
    return ref if i % 2 == 0 and k != 1 else ["echo nothing"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory, tiny_model_dir):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("samples-ui")
    results = root / "results"
    runs = results / "runs"
    steps = load_replay(str(EXCERPT)).steps
    files = {}
    for name, pattern in (("steady", steady), ("shaky", shaky)):
        files[name] = sampled_result(steps, name, pattern)
        write_result_file(runs / f"{name}.json", files[name])
    settings = Settings(results_dir=results, runs_dir=runs, db_path=root / "lab.duckdb", cache_dir=root / "cache",
                        replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference", f"stored:{runs / 'shaky.json'}",
                                    f"transformers:{tiny_model_dir}?device=cpu&max_tokens=8&name=tiny"])
    ctx.pool.wait()
    with serve_lab(ctx) as (demo, url):
        yield ctx, url, files


def test_sample_n_on_all_engines_over_http(lab):
    from gradio_client import Client

    ctx, url, files = lab
    key = ctx.step_keys()[0]
    client = Client(url, verbose=False)
    html = client.submit(key, 3, "1.0", "", 21, api_name="/sample_step").result()
    blocks = {m.group(1): m.group(0) for m in re.finditer(r'<div class="lab-samples" data-engine="([^"]+)">.*?</table>',
                                                           html, re.S)}
    assert set(blocks) == {"reference", "shaky", "tiny"}
    assert "3 samples" in blocks["tiny"] and "seeds 21–23" in blocks["tiny"] and "T 1 · top_p 1" in blocks["tiny"]
    assert blocks["reference"].count('class="lab-dot"') == 3 and "3×" in blocks["reference"]  # one answer, 3 times
    assert "stored samples" in blocks["shaky"]
    shaky_row = files["shaky"]["per_step"][0]
    f1s = [s["command_f1"] for s in shaky_row["samples"]]
    assert f"mean F1 <b>{fmean(f1s):.2f}</b>" in blocks["shaky"] and "2×" in blocks["shaky"]
    # the cache key starts with the session (None: the local lab has no visitor sessions)
    # the tiny model's 3 answers, and again the same 3 with the same seeds (reproducible)
    tiny = ctx.sample_sets.get((None, "tiny", ctx.pool.status()[2]["spec"], key))
    assert tiny is not None and [s["seed"] for s in tiny.samples] == [21, 22, 23]
    assert len({s["raw_output"] for s in tiny.samples}) > 1
    again = client.submit(key, 3, "1.0", "", 21, api_name="/sample_step").result()
    tiny2 = ctx.sample_sets.get((None, "tiny", ctx.pool.status()[2]["spec"], key))
    assert [s["raw_output"] for s in tiny2.samples] == [s["raw_output"] for s in tiny.samples]
    assert "tiny" in again


def test_sample_inputs_are_checked(lab):
    from lab.errors import LabError
    from lab.ui.compare.samples_panel import check_inputs

    assert check_inputs(5, "", " ", 0) == (5, None, None, 0)
    assert check_inputs(3, "0.7", "0.95", 2) == (3, 0.7, 0.95, 2)
    for bad in ((0, "", "", 0), (5, "-1", "", 0), (5, "0.7", "1.5", 0), (5, "warm", "", 0)):
        with pytest.raises(LabError):
            check_inputs(*bad)


def test_triage_unstable_steps_by_run_and_head_to_head(lab):
    from lab.triage.stability import (
        LOSS, TIE, WIN, head_to_head_summary, samples_head_to_head, stability_by_run, unstable_steps, verdict_flips,
    )  # fmt: skip

    ctx, _, files = lab
    ids = {name: ctx.query("SELECT run_id FROM runs WHERE model_short = ?", [name])["run_id"][0] for name in files}
    spreads = {name: {f"{r['task_id']}/{r['step_idx']}": max(s["command_f1"] for s in r["samples"])
                      - min(s["command_f1"] for s in r["samples"]) for r in result["per_step"]}
               for name, result in files.items()}
    with ctx.store_session() as store:
        unstable = unstable_steps(store, [], 0.5)
        by_run = stability_by_run(store, 0.5)
        table = samples_head_to_head(store, ids["steady"], ids["shaky"])
    expected = sorted((ids[n], k) for n, d in spreads.items() for k, v in d.items() if round(v, 4) >= 0.5)
    assert sorted(zip(unstable["run_id"], unstable["step_key"])) == expected and len(expected) > 0
    assert list(unstable["f1_spread"]) == sorted(unstable["f1_spread"], reverse=True)
    assert (unstable["run_id"] == ids["shaky"]).all()  # the steady run never varies
    row = by_run.set_index("run_id").loc[ids["shaky"]]
    agg = files["shaky"]["aggregate"]
    assert row["mean_f1_over_samples"] == agg["mean_f1_over_samples"] and row["f1_std_mean"] == agg["f1_std_mean"]
    assert row["pass_at_1"] == agg["pass_at_k"]["1"]
    assert by_run.set_index("run_id").loc[ids["steady"], "f1_std_mean"] == 0.0
    # per step, whose samples are better: means by hand from the files
    means = {name: {f"{r['task_id']}/{r['step_idx']}": fmean(s["command_f1"] for s in r["samples"])
                    for r in result["per_step"]} for name, result in files.items()}
    for rec in table.itertuples():
        a, b = means["steady"][rec.step_key], means["shaky"][rec.step_key]
        assert rec.a_mean_f1 == round(a, 4) and rec.b_mean_f1 == round(b, 4)
        assert rec.samples_say == (WIN if a - b > 0 else LOSS if b - a > 0 else TIE)
    summary = head_to_head_summary(table).set_index("verdict")
    assert summary.loc["by mean sample F1"].sum() == len(table) == len(files["steady"]["per_step"])
    assert verdict_flips(table) == int((table["samples_say"] != table["greedy_says"]).sum())


def test_triage_stability_endpoints_over_http(lab):
    from gradio_client import Client

    ctx, url, files = lab
    client = Client(url, verbose=False)
    line, table, plot = client.predict([], 0.5, api_name="/unstable_steps")
    assert re.search(r"\*\*\d+\*\* unstable steps", line) and "2 sampled runs" in line
    assert table["headers"][:3] == ["run", "run_id", "step_key"] and len(table["data"]) > 0
    assert plot is not None
    ids = list(ctx.query("SELECT run_id FROM runs ORDER BY model_short")["run_id"])  # shaky, steady
    summary, note, fig, rows = client.predict(ids[1], ids[0], 0.0, api_name="/samples_head_to_head")
    assert summary["headers"] == ["verdict", "A better", "B better", "tie"]
    assert len(rows["data"]) == len(files["steady"]["per_step"]) and "steps both runs sampled" in note


def test_malformed_stored_samples_are_a_message(tmp_path):
    from lab.ui.compare.samples_view import ERROR, render_sample_set, stored_set

    steps = load_replay(str(EXCERPT)).steps
    data = sampled_result(steps[:2], "broken", steady)
    del data["per_step"][0]["samples"][1]["command_f1"]
    write_result_file(tmp_path / "broken.json", data)
    engine = create_engine(f"stored:{tmp_path / 'broken.json'}")
    engine.load()
    bad = stored_set("broken", engine, steps[0], 0.5)
    assert bad.state == ERROR and "malformed samples" in bad.error
    assert "malformed samples" in render_sample_set(bad) and "Traceback" not in render_sample_set(bad)
    assert stored_set("broken", engine, steps[1], 0.5).state == "ready"
