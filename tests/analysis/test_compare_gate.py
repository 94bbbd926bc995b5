"""`python -m lab compare`: a look is not a gate, and a gate never reads a failure as "worse" (issue 55 item 2,
issue 56 item 1): without --max-drop the command exits 0 whatever it finds; with it, 1 means only "the
candidate is worse", and every other outcome (bad input, a result file with a bad number anywhere, an error
of any cause, runs made with settings that change answers) exits 2 in one line, the figures still printed
where there are any. Also --replay (issue 56 item 5) and the settings line of every comparison (issue 51)."""
from __future__ import annotations

import copy
import json

import pytest

from lab.cli import main
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT, TB2LITE

FAST = ["--resamples", "1000"]
PUBLISHED = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare-gate")
    out = {"root": root, "results": make_results_dir(root)}
    base = variant("base", seed=1)
    worse = variant("worse", shift=-0.08, seed=3)
    for result in (base, worse):
        result["sampling"] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024}
        result["replay_sha256"] = "a" * 64
    hot = copy.deepcopy(worse)
    hot["sampling"]["temperature"] = 0.7
    hot["model"] = hot["model_short"] = "worse-hot"
    other_replay = copy.deepcopy(worse)
    other_replay["replay_sha256"] = "b" * 64
    other_replay["model"] = other_replay["model_short"] = "worse-other-replay"
    sampled = variant("sampled", samples=3, seed=4)
    sampled["per_step"][5]["samples"][1]["command_f1"] = 5.0
    for name, data in (("base", base), ("worse", worse), ("hot", hot), ("other-replay", other_replay),
                       ("bad-samples", sampled), ("tiny", variant("tiny", seed=5, steps=10))):
        out[name] = write(root / "files", name, data)
    return out


def run(capsys, files, *argv: str) -> tuple[int, str, str]:
    rc = main(["compare", *FAST, *argv, "--db", str(files["root"] / "lab.duckdb"), "--results", str(files["results"])])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def one_line_error(err: str, expected: str) -> None:
    assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, err
    assert "Traceback" not in err


def test_a_look_exits_0_whatever_it_finds(files, capsys):
    rc, out, err = run(capsys, files, str(files["base"]), str(files["worse"]))
    assert rc == 0, err
    assert " worse " in next(line for line in out.splitlines() if line.startswith("score (100"))
    assert "a look, not a gate" in out and "--max-drop" in out
    rc, out, _ = run(capsys, files, "--json", str(files["base"]), str(files["tiny"]))
    data = json.loads(out)
    assert rc == 0 and data["gate"] is None and data["metrics"]["score"]["ci"] is None


def test_a_gate_keeps_its_exits(files, capsys):
    assert run(capsys, files, "--max-drop", "0", str(files["base"]), str(files["worse"]))[0] == 1
    assert run(capsys, files, "--max-drop", "30", str(files["base"]), str(files["worse"]))[0] == 0
    rc, _, err = run(capsys, files, "--max-drop", "0", str(files["base"]), str(files["tiny"]))
    assert rc == 2
    one_line_error(err, "cannot gate on score: fewer than 30 common steps (10)")


def test_too_few_steps_says_what_would_give_an_interval(files, capsys):
    """Issue 56 item 1: the excerpt's 10 common steps of 2 tasks: how many more, the command for the full
    replay or the published runs, and that --samples cannot add tasks."""
    rc, out, _ = run(capsys, files, str(files["base"]), str(files["tiny"]))
    assert rc == 0
    hint = next(line for line in out.splitlines() if line.startswith("to get an interval"))
    assert "20 more common steps and 3 more tasks" in hint and "share 10 steps of 2 tasks" in hint
    assert "`python -m lab data download`" in hint and "`python -m lab data published list`" in hint
    assert "--samples" in hint and "not tasks" in hint and "`python -m lab demo`" in hint


@pytest.mark.parametrize("argv, expected", [
    (["--seed", "-1", "{base}", "{worse}"], "--seed -1: give a whole number from 0 to 4294967295"),
    (["--seed", str(2**40), "{base}", "{worse}"], "--seed 1099511627776"),
    (["--max-drop", "0", "--seed", "-1", "{base}", "{worse}"], "--seed -1"),
    (["", "{worse}"], "BASELINE is empty: give a result JSON file"),
    (["{base}", " "], "CANDIDATE is empty"),
    (["{bad}", "{base}"], "bad-samples.json: per_step[5] (task-"),
    (["--max-drop", "0", "{base}", "{bad}"], "field 'samples[1].command_f1': input should be less than or equal to 1"),
    (["--allow-mismatch", "temperature", "{base}", "{worse}"], "--allow-mismatch only matters to a gate"),
    (["--replay", "{root}/no-such.jsonl", "{base}", "{worse}"], "--replay"),
    (["--replay", "{root}", "{base}", "{worse}"], "not a replay .jsonl file"),
])
def test_bad_input_exits_2_in_one_line_look_or_gate(files, capsys, argv, expected):
    argv = [a.format(base=files["base"], worse=files["worse"], bad=files["bad-samples"], root=files["root"])
            for a in argv]
    rc, _, err = run(capsys, files, *argv)
    assert rc == 2, err
    one_line_error(err, expected)


def test_an_unknown_setting_name_is_refused_by_the_parser(files, capsys):
    with pytest.raises(SystemExit) as exit_:
        run(capsys, files, "--max-drop", "0", "--allow-mismatch", "colour", str(files["base"]), str(files["worse"]))
    assert exit_.value.code == 2


def test_any_other_error_exits_2_never_1(files, capsys, monkeypatch):
    """Whatever breaks inside the comparison, a CI step never reads it as "worse"."""
    import lab.analysis.run_pairs as paired

    def broken(*args, **kwargs):
        raise ValueError("something inside broke")

    monkeypatch.setattr(paired, "compare_loaded", broken)
    rc, out, err = run(capsys, files, "--max-drop", "0", str(files["base"]), str(files["worse"]))
    assert rc == 2 and out == ""
    one_line_error(err, "compare failed: ValueError: something inside broke")


@pytest.mark.parametrize("other, setting, shown", [
    ("hot", "temperature", "temperature 0 vs 0.7"),
    ("other-replay", "replay", "replay aaaaaaaaaaaa vs bbbbbbbbbbbb"),  # the same step keys, another replay
])
def test_a_gate_refuses_runs_made_with_settings_that_change_answers(files, capsys, other, setting, shown):
    rc, out, err = run(capsys, files, "--max-drop", "0", str(files["base"]), str(files[other]))
    assert rc == 2
    one_line_error(err, f"the runs differ in {shown}, which changes the answers")
    assert f"--allow-mismatch {setting}" in err
    assert "score (100 × command F1)" in out and f"settings differ: {shown} (changes answers)" in out
    rc, out, _ = run(capsys, files, "--max-drop", "0", "--allow-mismatch", setting, str(files["base"]), str(files[other]))
    assert rc == 1 and "FAILED" in out  # accepted: the gate decides (the candidate is worse)
    rc, out, _ = run(capsys, files, "--json", str(files["base"]), str(files[other]))
    settings = json.loads(out)["settings"]
    assert rc == 0 and settings["differ"][0]["name"] == setting and settings["differ"][0]["changes_answers"] is True


def test_the_same_settings_say_so(files, capsys):
    rc, out, _ = run(capsys, files, "--max-drop", "0", str(files["base"]), str(files["worse"]))
    assert rc == 1 and "settings: no difference recorded" in out


@pytest.mark.skipif(not PUBLISHED.exists(), reason=f"published file missing at {PUBLISHED}")
def test_the_equiv_row_names_the_replay_option_compare_has(files, capsys, monkeypatch, tmp_path):
    """Issue 56 item 5: without a replay the equiv row asks for --replay, which compare now takes; with the
    replay the runs were made on it is computed; with another replay it says the steps are not in it."""
    monkeypatch.delenv("LAB_REPLAY", raising=False)
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    rc, out, _ = run(capsys, files, str(PUBLISHED), str(PUBLISHED))
    equiv = next(line for line in out.splitlines() if line.startswith("equiv"))
    assert rc == 0 and "needs the replay its steps came from (--replay PATH" in equiv, equiv
    rc, out, _ = run(capsys, files, "--replay", str(EXCERPT), str(PUBLISHED), str(PUBLISHED))
    equiv = next(line for line in out.splitlines() if line.startswith("equiv"))
    assert rc == 0 and "needs" not in equiv and "0.00" in equiv, equiv
    other = tmp_path / "task-001-only.jsonl"
    other.write_text("".join(line for line in EXCERPT.read_text(encoding="utf-8").splitlines(keepends=True)
                             if '"task-001"' in line), encoding="utf-8")
    rc, out, _ = run(capsys, files, "--replay", str(other), str(PUBLISHED), str(PUBLISHED))
    equiv = next(line for line in out.splitlines() if line.startswith("equiv"))
    assert rc == 0 and "which the loaded replay does not have" in equiv, equiv
