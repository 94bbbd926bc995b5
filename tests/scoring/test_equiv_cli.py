"""`python -m lab equiv`: one JSON object per pair, one error line for bad input, no heavy imports."""
import json
import subprocess
import sys

from lab.scoring import score_units
from tests.paths import REPO

BANNED = ("openai", "gradio", "torch", "ray")


def lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_prints_f1_and_equiv_f1_of_a_pair():
    ref, pred = ["cd myproject", "ls -al"], ["cd /app/myproject", "ls -la"]
    done = lab("equiv", "--cwd", "/app", "--home", "/root", "--ref", json.dumps(ref), "--pred", json.dumps(pred))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["f1"] == score_units(pred, ref).f1 < 1.0
    assert out["equiv_f1"] == 1.0 and out["written_alike"] is True
    assert out["ref_normalised"] == out["pred_normalised"] == ["cd /app/myproject", "ls -al"]


def test_home_and_connectors_follow_the_rules():
    def one(ref, pred, *extra):
        return json.loads(lab("equiv", "--cwd", "/w", *extra, "--ref", json.dumps(ref), "--pred", json.dumps(pred)).stdout)

    assert one(["cd ~"], ["cd $HOME"], "--home", "/h")["written_alike"] is True
    assert one(["cd ~"], ["cd $HOME"])["written_alike"] is True  # home unknown: both stay `cd ~`
    chained = one(["cd build && rm -rf *"], ["cd build", "rm -rf *"])
    assert chained["written_alike"] is False and chained["equiv_f1"] < 1.0
    assert one(["rm -if a"], ["rm -fi a"])["written_alike"] is False


def test_bad_input_is_one_line_and_exit_2():
    for ref, needle in (('["a"', "--ref: invalid JSON"), ('{"a": 1}', "--ref: expected a JSON list of strings"),
                        ("[1, 2]", "--ref: expected a JSON list of strings"), ("[" * 50_000, "--ref: nested deeper"),
                        ("[" + "9" * 5000 + "]", "--ref: a number longer than"), ('["\\ud800"]', "--ref:")):
        done = lab("equiv", "--cwd", "/", "--ref", ref, "--pred", "[]")
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and needle in done.stderr


def test_imports_no_engine_ui_or_cluster_library():
    code = ("import sys; from lab.cli import main; rc = main(['equiv', '--cwd', '/', '--ref', '[\"ls -la\"]', "
            "'--pred', '[\"ls -al\"]']); print(sorted(m for m in sys.modules if m.split('.')[0] in %r)); sys.exit(rc)" % (BANNED,))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
