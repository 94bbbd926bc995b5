"""Malformed log-probabilities are "not recorded" for the step, with the reason, and the answer still
counts (issue 40 item 4). A real OpenAI-compatible HTTP server on 127.0.0.1 (tests/engines/
hostile_openai.py) answers with `top_logprobs` as a list, a string or a number, 400-digit values, keys
and tokens holding a lone UTF-16 surrogate; before, each failed the whole engine with a raw
AttributeError / OverflowError, `replay` with a lone-surrogate key crashed leaving a checkpoint of its
header alone, and `score-reference` with a 400-digit prompt log-probability ended in a traceback."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lab.data import load_replay
from lab.engines import create_engine
from lab.engines.logprobs import read_record
from lab.runs.pipeline import run_steps
from tests.engines.hostile_openai import HostileAnswer, good_logprobs, hostile_openai
from tests.paths import EXCERPT, REPO

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
HUGE = int("9" * 400)
SURROGATE = "\ud800"


def _bad(**fields):
    """Chunk 1's logprobs with `fields` over a good chunk's (chunks 0 and 2 are well-formed)."""
    def logprobs(index: int, piece: str):
        good = good_logprobs(index, piece)
        return {**good, **fields} if index == 1 else good
    return logprobs


MALFORMED = {
    "top_logprobs a list of lists": (_bad(top_logprobs=[["ls", -0.5]]), "top_logprobs is a list, not an object"),
    "top_logprobs a string": (_bad(top_logprobs="ls"), "top_logprobs is a string, not a list"),
    "top_logprobs a number": (_bad(top_logprobs=3), "top_logprobs is a number, not a list"),
    "an alternative a string": (_bad(top_logprobs=["ls"]), "top_logprobs is a string, not an object"),
    "a 400-digit log-probability": (_bad(token_logprobs=[-HUGE]), "log-probability is an integer of 1,329 bits"),
    "a 400-digit alternative": (_bad(top_logprobs=[{"ls": -HUGE}]), "is an integer of 1,329 bits, past any float"),
    "a lone-surrogate key": (_bad(top_logprobs=[{SURROGATE: -0.5}]), "a key holds a lone UTF-16 surrogate"),
    "a lone-surrogate token": (_bad(tokens=[SURROGATE]), "token 1 holds a lone UTF-16 surrogate"),
    "a NaN log-probability": (_bad(token_logprobs=[float("nan")]), "is nan, not a log-probability"),
    "tokens an object": (_bad(tokens={"a": 1}), "tokens is an object, not a list"),
    "fewer log-probabilities than tokens": (_bad(tokens=["a", "b"]), "2 tokens but 1 log-probabilities"),
}


@pytest.fixture(scope="module")
def step():
    return load_replay(str(EXCERPT)).steps[0]


def answer_one(model_dir, step, answer: HostileAnswer):
    """One Generate of `step` through an openai: engine on the hostile server; the scored result."""
    with hostile_openai(str(model_dir), answer) as url:
        engine = create_engine(f"openai:{url}#{model_dir}?logprobs=3&retries=0")
        engine.load()
        try:
            [result] = run_steps(engine, [step])
        finally:
            engine.close()
    return result


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_malformed_logprobs_are_not_recorded_and_the_answer_counts(tiny_model_dir, step, shape):
    logprobs, said = MALFORMED[shape]
    result = answer_one(tiny_model_dir, step, HostileAnswer(logprobs=logprobs))
    row = result.per_step
    assert result.completion.error is None and row["error"] is None
    assert row["pred_command_units"] == ["ls -la"] and row["command_f1"] is not None  # the answer is scored
    assert row["logprobs"] is None and said in row["logprobs_error"], row["logprobs_error"]
    assert row["logprobs_error"].startswith("the server's ")
    json.dumps(row, ensure_ascii=False).encode("utf-8")  # a result file can hold the row


def test_well_formed_logprobs_are_recorded_with_positive_ones_clamped(tiny_model_dir, step):
    def logprobs(index: int, piece: str):
        return {**good_logprobs(index, piece), "token_logprobs": [0.5 if index == 1 else -0.25]}
    result = answer_one(tiny_model_dir, step, HostileAnswer(logprobs=logprobs))
    record = result.per_step["logprobs"]
    assert "logprobs_error" not in result.per_step
    assert record["lp"] == [-0.25, 0.0, -0.25] and len(record["top"]) == 3  # a positive one (rounding) is 0


def test_a_lone_surrogate_in_the_answer_text_is_replaced(tiny_model_dir, step):
    text = HostileAnswer().text.replace('"a"', f'"{SURROGATE}"')
    result = answer_one(tiny_model_dir, step, HostileAnswer(text=text, logprobs=good_logprobs))
    assert "\ufffd" in result.per_step["raw_output"] and result.per_step["pred_command_units"] == ["ls -la"]
    json.dumps(result.per_step, ensure_ascii=False).encode("utf-8")


def lab_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})


def test_replay_cli_with_a_lone_surrogate_key_writes_the_whole_run(tiny_model_dir, tmp_path):
    answer = HostileAnswer(logprobs=_bad(top_logprobs=[{SURROGATE: -0.5}]))
    with hostile_openai(str(tiny_model_dir), answer) as url:
        out = lab_cli("replay", "--replay", str(EXCERPT), "--engine", f"openai:{url}#{tiny_model_dir}?retries=0",
                      "--out", str(tmp_path), "--limit", "2", "--name", "hostile")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["hostile.json"]  # no checkpoint
    rows = json.loads((tmp_path / "hostile.json").read_text(encoding="utf-8"))["per_step"]
    assert len(rows) == 2 and all(r["logprobs"] is None and "lone UTF-16 surrogate" in r["logprobs_error"] for r in rows)
    assert all(r["pred_command_units"] == ["ls -la"] for r in rows)


def test_score_reference_cli_with_a_400_digit_log_probability_says_why(tiny_model_dir, tmp_path):
    def prompt_logprobs(prompt: list[int]):
        return [None] + [{str(t): {"logprob": -HUGE, "decoded_token": "x"}} for t in prompt[1:]]

    with hostile_openai(str(tiny_model_dir), HostileAnswer(prompt_logprobs=prompt_logprobs)) as url:
        out = lab_cli("score-reference", "--replay", str(EXCERPT), "--engine", f"openai:{url}#{tiny_model_dir}",
                      "--out", str(tmp_path), "--limit", "2", "--name", "hostile")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "0 of 2 steps scored" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["hostile.reference.json"]
    rows = json.loads((tmp_path / "hostile.reference.json").read_text(encoding="utf-8"))["per_step"]
    assert all(r["ref_logprob"] is None and r["error"] == "the server's log-probability of reference token 0 is an "
               "integer of 1,329 bits, past any float" for r in rows), rows[0]["error"]


@pytest.mark.parametrize("record,why", [
    ({"k": 3, "tokens": ["a"], "lp": [-0.1], "top": [[["b", -HUGE]]]}, "integer of 1,329 bits"),
    ({"k": 3, "tokens": ["a"], "lp": [-0.1], "top": "b"}, "top is a string, not a list"),
    ({"k": 3, "tokens": [SURROGATE], "lp": [-0.1], "top": []}, "lone UTF-16 surrogate"),
    ({"k": 3, "tokens": ["a"], "lp": "x", "top": []}, "the log-probabilities are a string, not a list"),
    (["a"], "the record is a list, not an object"),
])
def test_a_stored_runs_malformed_record_is_not_recorded_with_the_reason(record, why):
    recorded, reason = read_record(record)
    assert recorded is None and reason.startswith("the file's ") and why in reason


@pytest.mark.slow  # about 7 s on two cores: the full run, not the fast loop
def test_a_stored_run_of_10000_alternatives_a_token_shows_k_of_them(tmp_path):
    """50 tokens x 10,000 alternatives made one step switch send 27 MB (16 s) to every visitor who opened
    the run: the stored engine and every reader cut each token's alternatives to the record's k, at most
    max_top_k of assets/logprobs.yaml."""
    from lab.engines.logprobs import logprob_settings
    from lab.settings import Settings
    from lab.serve import create_context
    from lab.ui.compare.handlers import step_outputs
    from tests.ui.test_ui_handlers import write_stored_run

    result = write_stored_run(tmp_path / "plain.json", "huge-top")
    first = result["per_step"][0]
    tokens = [f"t{i}" for i in range(50)]
    first["logprobs"] = {"k": 10_000, "tokens": tokens, "lp": [-0.5] * 50,
                         "top": [[[f"alt{j}", round(-j / 1000 - 0.5, 4)] for j in range(10_000)] for _ in tokens]}
    path = tmp_path / "huge-top.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    assert path.stat().st_size > 10_000_000
    recorded, why = read_record(first["logprobs"])
    cap = logprob_settings()["max_top_k"]
    assert why is None and recorded.k == cap and {len(t) for t in recorded.top} == {cap}
    assert recorded.top[0][0] == ("alt0", -0.5)  # the likeliest kept
    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache",
                        replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"stored:{path}"], open_db=False)
    try:
        ctx.pool.wait()
        engine = ctx.engine_entries()[0].engine
        assert {len(t) for t in engine.rows[f"{first['task_id']}/{first['step_idx']}"]["logprobs"]["top"]} == {cap}
        html = step_outputs(ctx, f"{first['task_id']}/{first['step_idx']}").columns_html
    finally:
        ctx.pool.close_all()
    assert 'class="lab-tok' in html and "alt19" in html and "alt20" not in html
    assert len(html.encode("utf-8")) < 300_000  # was 27 MB


@pytest.mark.parametrize("usage", [{"prompt_tokens": "many", "completion_tokens": -3},
                                   {"prompt_tokens": 10 ** 400, "completion_tokens": 2 ** 40},
                                   {"prompt_tokens": [1], "completion_tokens": {"n": 1}}])
def test_a_servers_token_counts_that_are_no_counts_are_not_recorded(tiny_model_dir, step, usage):
    """Counts a result file could not take into the store (`results import` refused the whole run) are left
    out: the lab counts the answer's tokens itself, and the run imports."""
    from lab.store.records import steps_table

    result = answer_one(tiny_model_dir, step, HostileAnswer(logprobs=good_logprobs, usage=usage))
    row = result.per_step
    assert isinstance(row["completion_tokens"], int) and 0 < row["completion_tokens"] < 2 ** 31
    assert row["prompt_tokens"] is None or 0 < row["prompt_tokens"] < 2 ** 31
    assert steps_table("r", [row], "r").num_rows == 1  # the store takes the row
