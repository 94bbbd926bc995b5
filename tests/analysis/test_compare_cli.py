"""`python -m lab compare BASELINE CANDIDATE`: result files, store runs and published runs; the table, --json,
a look without --max-drop (exit 0 whatever it finds) and the gate's exit codes with it (1: worse by more than
--max-drop with 95 % confidence, 0 otherwise, 2: bad input or any other error, in one line)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lab.cli import main
from lab.store.opening import open_store
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import REPO

FAST = ["--resamples", "1000"]
GATE = ["--max-drop", "0"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare-cli")
    results = make_results_dir(root)
    out = {"root": root, "results": results}
    for name, shift, seed, steps in (("base", 0.0, 1, None), ("better", 0.08, 2, None), ("worse", -0.08, 3, None),
                                     ("tiny", 0.0, 4, 12)):
        out[name] = write(root / "files", name, variant(name, shift=shift, seed=seed, steps=steps))
    write(results / "runs", "stored-better", variant("stored-better", shift=0.08, seed=2))
    write(results / "published" / "lfm25_echo_rlvr_gpu6_eval_20260612", "lfm25-echo-rlvr-continue-checkpoint-20",
          variant("continue-20", shift=0.01, seed=5))  # where `data published fetch` puts that catalogue run
    open_store(root / "lab.duckdb", results).close()
    return out


def store_args(files) -> list[str]:
    return ["--db", str(files["root"] / "lab.duckdb"), "--results", str(files["results"])]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["compare", *argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_two_result_files_print_every_metric_and_pass_the_gate(files, capsys):
    rc, out, err = run(capsys, str(files["base"]), str(files["better"]), *FAST, *GATE, *store_args(files))
    assert rc == 0, err
    assert "score (100 × command F1)" in out and "valid JSON (%)" in out and "first command exact (%)" in out
    score_line = next(line for line in out.splitlines() if line.startswith("score (100"))
    assert " better " in score_line and "[+" in score_line
    assert "gate (score, --max-drop 0): passed" in out


def test_a_worse_candidate_fails_the_gate_unless_the_drop_is_allowed(files, capsys):
    rc, out, _ = run(capsys, str(files["base"]), str(files["worse"]), *FAST, *GATE)
    assert rc == 1 and "FAILED" in out and "worse by more than 0 points" in out
    rc, out, _ = run(capsys, str(files["base"]), str(files["worse"]), "--max-drop", "30", *FAST)
    assert rc == 0 and "passed" in out


def test_json_holds_each_metric_under_its_name(files, capsys):
    rc, out, _ = run(capsys, str(files["base"]), str(files["worse"]), "--json", "--seed", "3", *FAST, *GATE)
    data = json.loads(out)
    assert rc == 1 and data["gate"]["failed"] is True and data["gate"]["metric"] == "score"
    score = data["metrics"]["score"]
    assert {"delta", "ci", "improved", "regressed", "unchanged", "steps"} <= set(score)
    assert score["steps"] == 303 and score["ci"][1] < 0 and score["seed"] == 3 and score["resamples"] == 1000
    assert data["metrics"]["ref_nll"]["ci"] is None and data["metrics"]["ref_nll"]["note"]
    again = json.loads(run(capsys, str(files["base"]), str(files["worse"]), "--json", "--seed", "3", *FAST, *GATE)[1])
    assert again["metrics"]["score"]["ci"] == score["ci"]  # the same seed, the same interval


def test_a_fetched_published_run_by_its_catalogue_name(files, capsys):
    rc, out, err = run(capsys, "lfm25-echo-rlvr-continue-checkpoint-20", str(files["base"]), *FAST, *store_args(files))
    assert rc == 0, err
    assert out.splitlines()[0].startswith("baseline:  continue-20")


def test_a_store_run_by_name_against_a_file(files, capsys):
    rc, out, err = run(capsys, str(files["base"]), "stored-better", *FAST, *store_args(files))
    assert rc == 0, err
    assert "candidate: stored-better" in out


@pytest.mark.parametrize("argv, expected", [
    (["no-such-run", "base"], "names no run of the store"),
    (["{base}", "{tiny}", "--max-drop", "0"], "cannot gate on score: fewer than 30 common steps (12): no interval"),
    (["{base}", "{better}", "--max-drop", "-1"], "--max-drop -1.0: give a number of points ≥ 0"),
    (["{base}", "{better}", "--max-drop", "nan"], "--max-drop nan"),
    (["{base}", "{better}", "--resamples", "5"], "--resamples 5: use 100 to"),
    (["lfm25-echo-rlvr-continue-checkpoint-10", "{base}"],
     "is not fetched yet: fetch it with `python -m lab data published fetch "
     "lfm25_echo_rlvr_gpu6_eval_20260612/lfm25-echo-rlvr-continue-checkpoint-10`"),
    (["{broken}", "{base}"], "broken.json"),
    (["{base}", "{folder}"], "not a regular file"),
])
def test_bad_input_exits_2_with_one_line(files, capsys, argv, expected):
    broken = files["root"] / "files" / "broken.json"
    broken.write_text('{"per_step": [')
    argv = [a.format(base=files["base"], better=files["better"], tiny=files["tiny"], broken=broken,
                     folder=files["root"] / "files") for a in argv]
    rc, out, err = run(capsys, *FAST, *argv, *store_args(files))  # the case's own options come last
    assert rc == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, err


def test_too_few_common_steps_still_print_the_figures(files, capsys):
    """A comparison the gate cannot decide (12 common steps) prints every figure, then exits 2 saying why."""
    rc, out, err = run(capsys, *FAST, *GATE, str(files["base"]), str(files["tiny"]), *store_args(files))
    assert rc == 2 and "fewer than 30 common steps" in err
    assert "score (100 × command F1)" in out and "fewer than 30 common steps" in out
    rc, out, _ = run(capsys, *FAST, *GATE, "--json", str(files["base"]), str(files["tiny"]), *store_args(files))
    assert rc == 2 and json.loads(out)["gate"]["failed"] is None


def test_the_command_exits_1_as_a_process(files):
    """The exit status a CI step sees, from a real `python -m lab compare` process."""
    proc = subprocess.run([sys.executable, "-m", "lab", "compare", str(files["base"]), str(files["worse"]), *FAST, *GATE],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "FAILED" in proc.stdout and "Traceback" not in proc.stderr
