"""No run replaces another unasked (lab.runs.claims): a name taken by a file, by a run in the store or by another
process writing it now gets NAME-2 … (a name the lab made up) or a refusal naming --overwrite (the user's --name),
across processes; default names tell engines apart (kind, preset)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lab.engines import create_engine
from lab.runs.claims import RunNameTaken, check_run_name, claim_run
from lab.runs.replay import run_file_name
from tests.paths import EXCERPT, REPO

REPLAY = ["--replay", str(EXCERPT), "--limit", "3"]


def lab(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=120)


HOLDER = textwrap.dedent("""
    import sys, time
    from lab.runs.claims import claim_run
    claim = claim_run(sys.argv[1], sys.argv[2], explicit=False)
    claim.checkpoint.write_text('{"header": {}}\\n{"row": {}}\\n')
    print(claim.stem, flush=True)
    time.sleep(float(sys.argv[3]))
""")


def hold_in_other_process(out: Path, name: str, seconds: float = 30) -> tuple[subprocess.Popen, str]:
    """Another process that claims `name` in `out` and writes its checkpoint, then holds it for `seconds`."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), name, str(seconds)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_a_free_name_is_claimed_and_an_unused_claim_leaves_nothing(tmp_path):
    with claim_run(tmp_path, "run") as claim:
        assert (claim.stem, claim.resumed, claim.note) == ("run", False, None)
        assert claim.checkpoint.exists()  # held: the checkpoint is this process's
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lab-runs.lock"]


def test_a_finished_run_is_never_replaced_unasked(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    with claim_run(tmp_path, "run") as claim:  # a name the lab made up: the next free one
        assert claim.stem == "run-2" and "run.json holds a finished run" in claim.note
    with pytest.raises(RunNameTaken, match="--overwrite"):  # the user's --name: refused
        claim_run(tmp_path, "run", explicit=True)
    with pytest.raises(RunNameTaken, match="nothing to resume"):
        claim_run(tmp_path, "run", resume=True)
    with claim_run(tmp_path, "run", explicit=True, overwrite=True) as claim:
        assert claim.stem == "run"
        claim.write_final({"x": 1})
    assert json.loads((tmp_path / "run.json").read_text()) == {"x": 1}


def test_an_interrupted_run_is_resumed_only_when_asked(tmp_path):
    (tmp_path / "run.partial.jsonl").write_text('{"header": {}}\n{"row": {}}\n')
    with claim_run(tmp_path, "run", resume=True) as claim:
        assert claim.resumed and claim.stem == "run"
    with claim_run(tmp_path, "run") as claim:
        assert claim.stem == "run-2" and "interrupted run" in claim.note
    with pytest.raises(RunNameTaken, match="--resume to continue it"):
        claim_run(tmp_path, "run", explicit=True)
    assert (tmp_path / "run.partial.jsonl").read_text().count("\n") == 2  # untouched


def test_another_process_writing_a_name_holds_it(tmp_path):
    proc, stem = hold_in_other_process(tmp_path, "run")
    try:
        assert stem == "run"
        with claim_run(tmp_path, "run") as claim:
            assert claim.stem == "run-2" and "another process is writing run.partial.jsonl" in claim.note
        for asked in ({"explicit": True}, {"resume": True}, {"overwrite": True, "explicit": True}):
            with pytest.raises(RunNameTaken, match="another process is writing"):
                claim_run(tmp_path, "run", **asked)
    finally:
        proc.kill()
        proc.wait()
    with claim_run(tmp_path, "run", resume=True) as claim:  # its process is gone: the run can be resumed
        assert claim.resumed


def test_processes_claiming_one_name_at_once_get_different_names(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "run", "3"], cwd=REPO,
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    stems = sorted(p.stdout.readline().strip() for p in procs)
    for p in procs:
        p.wait()
    assert stems == ["run", "run-2", "run-3", "run-4"]


def test_a_file_that_appears_meanwhile_is_not_replaced(tmp_path):
    with claim_run(tmp_path, "run") as claim:
        (tmp_path / "run.json").write_text('{"theirs": 1}')  # a lab that does not claim names wrote it
        path = claim.write_final({"mine": 1})
    assert path.name == "run-2.json" and "appeared" in claim.note
    assert json.loads((tmp_path / "run.json").read_text()) == {"theirs": 1}


def test_a_run_in_the_store_whose_file_is_gone_holds_its_name(tmp_path):
    from lab.store.autoimport import stored_run_names
    from lab.store.importer import import_file
    from lab.store.opening import open_store
    from lab.settings import Settings

    settings = Settings(results_dir=tmp_path / "results")
    runs = settings.runs_dir
    assert lab("replay", *REPLAY, "--engine", "reference", "--out", str(runs)).returncode == 0
    store = open_store(settings)
    try:
        import_file(store, runs / "reference.json")
        (runs / "reference.json").unlink()  # the store's row is now the only copy
        taken = stored_run_names(store)
    finally:
        store.close()
    assert check_run_name(runs, "reference", taken=taken).startswith("run 'reference' is taken (a run in the results")
    with pytest.raises(RunNameTaken, match="results database"):
        check_run_name(runs, "reference", explicit=True, taken=taken)


def test_default_names_tell_engines_and_presets_apart(tmp_path):
    ckpt = tmp_path / "train" / "checkpoint-3"
    names = {spec: run_file_name(create_engine(spec)) for spec in (
        f"transformers:{ckpt}", f"vllm:{ckpt}", f"vllm:{ckpt}?preset=gemma4-e4b-sft", f"transformers-serve:{ckpt}",
        f"transformers:{ckpt}?name=mine", "reference")}
    assert names == {
        f"transformers:{ckpt}": "checkpoint-3-transformers", f"vllm:{ckpt}": "checkpoint-3-vllm",
        f"vllm:{ckpt}?preset=gemma4-e4b-sft": "checkpoint-3-vllm-gemma4-e4b-sft",
        f"transformers-serve:{ckpt}": "checkpoint-3-transformers-serve", f"transformers:{ckpt}?name=mine": "mine",
        "reference": "reference"}


def test_cli_replay_never_replaces_a_run(tmp_path):
    out = tmp_path / "runs"
    first = lab("replay", *REPLAY, "--engine", "reference", "--out", str(out))
    assert first.returncode == 0, first.stderr
    kept = (out / "reference.json").read_bytes()
    again = lab("replay", *REPLAY, "--engine", "reference", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert "note: run 'reference' is taken (reference.json holds a finished run); this run is 'reference-2'" in again.stderr
    assert (out / "reference-2.json").exists() and (out / "reference.json").read_bytes() == kept
    named = lab("replay", *REPLAY, "--engine", "reference", "--out", str(out), "--name", "reference")
    assert named.returncode == 1 and "pass --overwrite to replace it" in named.stderr
    assert "Traceback" not in named.stderr and (out / "reference.json").read_bytes() == kept
    replaced = lab("replay", *REPLAY, "--engine", "reference", "--out", str(out), "--name", "reference", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert (out / "reference.json").read_bytes() != kept  # replaced, as asked (a new timestamp at least)


def test_cli_replay_waits_for_no_one_and_replaces_nothing_another_process_writes(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    proc, stem = hold_in_other_process(out, "reference")
    try:
        t0 = time.monotonic()
        run = lab("replay", *REPLAY, "--engine", "reference", "--out", str(out))
        assert run.returncode == 0 and (out / "reference-2.json").exists(), run.stderr
        assert "another process is writing reference.partial.jsonl now" in run.stderr
        refused = lab("replay", *REPLAY, "--engine", "reference", "--out", str(out), "--resume")
        assert refused.returncode == 1 and "another process is writing" in refused.stderr
        assert time.monotonic() - t0 < 60
        assert (out / "reference.partial.jsonl").read_text().count("\n") == 2  # the other process's, untouched
    finally:
        proc.kill()
        proc.wait()


def test_cli_score_reference_never_replaces_a_run(tmp_path):
    """score-reference names its files NAME.reference.json the same way (a `reference` engine has no model, so a
    stored file stands in for a finished run of the name here)."""
    out = tmp_path / "runs"
    out.mkdir()
    (out / "mine.reference.json").write_text("{}")
    refused = lab("score-reference", *REPLAY, "--engine", "reference", "--out", str(out), "--name", "mine")
    assert refused.returncode == 1 and "pass --overwrite" in refused.stderr
    assert (out / "mine.reference.json").read_text() == "{}"
