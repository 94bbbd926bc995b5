"""Runs as a Hugging Face dataset: `results export RUN… --out DIR` writes one Parquet config per run and a card
that `datasets.load_dataset(DIR, CONFIG)` reads; `results import DIR` brings back the same figures: `lab compare` of a run and its round trip gives Δ = 0 on
identical per-step values, sampled answers, log-probability summaries and reference likelihoods included."""
from __future__ import annotations

import json
import shutil

import pytest
import yaml

from lab.cli import main
from lab.store.opening import open_store
from tests.helpers_paired import reference_file, variant, write
from tests.helpers_store import make_results_dir

STEP_COLUMNS = ("task_id", "step_idx", "command_f1", "command_precision", "command_recall", "first_cmd_exact",
                "valid_json", "pred_command_units", "ref_command_units", "raw_output", "finish_reason", "lp_mean",
                "lp_min", "lp_low_tokens", "extra_json")
FAST = ["--resamples", "1000"]


def with_logprobs(result: dict) -> dict:
    """Token log-probabilities on every third step (the export keeps their summary)."""
    for i, row in enumerate(result["per_step"][::3]):
        lp = [-0.01 * (i % 7), -2.5, -0.2]
        row["logprobs"] = {"k": 1, "tokens": ["a", "b", "c"], "lp": lp, "top": [[["a", lp[0]]], [["b", lp[1]]],
                                                                                 [["c", lp[2]]]]}
        row["lab_note"] = {"kept": i}  # a key the lab does not know: kept as it was
    return result


@pytest.fixture(scope="module")
def lab_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("dataset")
    results = make_results_dir(root / "a")
    sampled = with_logprobs(variant("ckpt-sampled", shift=0.02, seed=3, samples=3))
    write(results / "runs", "ckpt-sampled", sampled)
    better = variant("ckpt-better", shift=0.06, seed=4, model_path="org/ckpt-better")
    write(results / "runs", "ckpt-better", better)
    write(results / "runs", "ckpt-better.reference", reference_file(better, 0.8))
    open_store(root / "a" / "lab.duckdb", results).close()
    return root, results


def store_args(root, side: str) -> list[str]:
    return ["--db", str(root / side / "lab.duckdb"), "--results", str(root / side / "results")]


@pytest.fixture(scope="module")
def exported(lab_files):
    root, _ = lab_files
    out = root / "ds"
    assert main(["results", *store_args(root, "a"), "export", "ckpt-sampled", "ckpt-better", "--out", str(out),
                 "--seed", "1"]) == 0
    return out


def test_the_folder_is_a_dataset_the_datasets_library_reads(exported):
    import datasets

    header = yaml.safe_load((exported / "README.md").read_text(encoding="utf-8").split("---")[1])
    names = [c["config_name"] for c in header["configs"]]
    assert names == ["ckpt-sampled", "org-ckpt-better"]  # names from the runs' names, never a path
    steps = datasets.load_dataset(str(exported), "org-ckpt-better", split="steps")
    assert len(steps) == 303 and steps[0]["step_key"] == f"{steps[0]['task_id']}/{steps[0]['step_idx']}"
    assert steps[0]["ref_nll_per_token"] is not None and steps[0]["ref_tokens"] >= 20
    sampled = datasets.load_dataset(str(exported), "ckpt-sampled", split="steps")
    assert len(sampled[0]["samples"]) == 3 and sampled[0]["samples"][0]["command_f1"] == sampled[0]["command_f1"]
    assert sampled[0]["lp_min"] == -2.5 and sampled[1]["lp_mean"] is None  # every third step has them
    assert json.loads(sampled[0]["extra_json"])["lab_note"] == {"kept": 0}


def test_the_card_gives_scores_with_intervals_settings_and_the_replay(exported):
    card = (exported / "README.md").read_text(encoding="utf-8")
    score_row = next(line for line in card.splitlines() if line.startswith("| `org-ckpt-better`"))
    assert "[" in score_row and "]" in score_row and "303" in score_row  # score [low, high], Δ [low, high], steps
    assert "## Settings" in card and "org/ckpt-better" in card and "## The replay" in card
    fingerprints = [line.split("|")[2].strip() for line in card.splitlines() if line.startswith(("| `ckpt-", "| `org-"))][-2:]
    assert fingerprints[0] == fingerprints[1]  # the same steps and references: the same replay fingerprint


def test_import_into_a_fresh_store_gives_the_same_figures(lab_files, exported, capsys):
    root, results = lab_files
    make_results_dir(root / "b")
    assert main(["results", *store_args(root, "b"), "import", str(exported)]) == 0
    capsys.readouterr()
    for file, name in (("ckpt-sampled", "ckpt-sampled"), ("ckpt-better", "org/ckpt-better")):
        assert main(["compare", str(results / "runs" / f"{file}.json"), name, "--json", "--seed", "2", *FAST,
                     *store_args(root, "b")]) == 0
        metrics = json.loads(capsys.readouterr().out)["metrics"]
        for metric in ("score", "first_cmd_exact", "valid_json"):  # the reference NLL: compared in the store below
            assert metrics[metric]["delta"] == 0 and metrics[metric]["unchanged"] == 303, (name, metric)
            if not metrics[metric]["two_level"]:  # sampled answers are drawn apart for each side: not [0, 0]
                assert metrics[metric]["ci"] == [0.0, 0.0], (name, metric)
    with open_store(root / "a" / "lab.duckdb", results, sync=False) as a, \
            open_store(root / "b" / "lab.duckdb", root / "b" / "results", sync=False) as b:
        for name in ("ckpt-sampled", "org/ckpt-better"):
            sql = f"SELECT {', '.join(STEP_COLUMNS)} FROM steps JOIN runs USING (run_id) WHERE display_name = ? ORDER BY ord"
            assert a.rows(sql, [name]) == b.rows(sql, [name])
            sql = ("SELECT step_key, sample, command_f1, seed FROM samples JOIN runs USING (run_id) "
                   "WHERE display_name = ? ORDER BY step_key, sample")
            assert a.rows(sql, [name]) == b.rows(sql, [name])
            sql = ("SELECT step_key, ref_tokens, ref_logprob FROM step_reference JOIN runs USING (run_id) "
                   "WHERE display_name = ? ORDER BY step_key")
            assert a.rows(sql, [name]) == b.rows(sql, [name])
        assert len(b.rows("SELECT 1 FROM samples")) == 303 * 3 and len(b.rows("SELECT 1 FROM step_reference")) == 303
    assert main(["results", *store_args(root, "b"), "import", str(exported)]) == 0  # again: nothing new
    assert "0 added, 3 unchanged" in capsys.readouterr().out


@pytest.mark.parametrize("argv, says", [
    (["nosuchrun"], "names no run of the store"),
    (["ckpt-better", "--push-to-hub", "not a repo"], "give a dataset repository as OWNER/NAME"),
    (["ckpt-better", "--push-to-hub", "../../etc"], "give a dataset repository as OWNER/NAME"),
])
def test_export_refuses_in_one_line(lab_files, tmp_path, capsys, argv, says):
    root, _ = lab_files
    assert main(["results", *store_args(root, "a"), "export", *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


def test_export_never_writes_over_a_folder_with_files(lab_files, tmp_path, capsys):
    root, _ = lab_files
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["results", *store_args(root, "a"), "export", "ckpt-better", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err and (tmp_path / "keep.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]  # nothing staged left behind
    (tmp_path / "file").write_text("x")
    assert main(["results", *store_args(root, "a"), "export", "ckpt-better", "--out", str(tmp_path / "file")]) == 2


def test_a_public_deployment_never_pushes(lab_files, tmp_path, monkeypatch, capsys):
    root, _ = lab_files
    monkeypatch.setenv("LAB_PUBLIC", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing may be sent anywhere
    assert main(["results", *store_args(root, "a"), "export", "ckpt-better", "--out", str(tmp_path / "x"),
                 "--push-to-hub", "someone/runs"]) == 2
    assert "off on a public deployment" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_the_import_keeps_what_the_results_folder_already_holds(lab_files, exported, capsys):
    """A file of the same name with other content stays; the import takes the next free name."""
    root, _ = lab_files
    results = make_results_dir(root / "d")
    mine = results / "datasets" / "ds" / "org-ckpt-better.json"
    mine.parent.mkdir(parents=True)
    shutil.copy(root / "a" / "results" / "runs" / "ckpt-sampled.json", mine)
    before = mine.read_bytes()
    assert main(["results", *store_args(root, "d"), "import", str(exported)]) == 0
    assert mine.read_bytes() == before and (mine.parent / "org-ckpt-better-2.json").is_file()
