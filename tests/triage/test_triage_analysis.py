"""Disagreement, regressions, flip table, parse-failure taxonomy and risk flags on real steps."""
from __future__ import annotations

import pytest

from lab.errors import LabError
from lab.scoring.metrics import score_units
from lab.triage import (
    classify_output, disagreement, flip_summary, flip_table, order_as_series, run_taxonomy, unit_risks,
)
from lab.triage.compare_runs import RIGHT_TO_WRONG, WRONG_TO_RIGHT
from lab.triage.risk import command_risks
from tests.triage.test_triage_common import PERTURBATIONS, run_id, step_keys, triage_store  # noqa: F401


def steps_f1(store, model: str) -> dict[str, float]:
    df = store.query("SELECT step_key, command_f1 FROM steps WHERE run_id = ?", [run_id(store, model)])
    return dict(zip(df.step_key, df.command_f1))


def test_disagreement_sorted_by_difference_with_regressed_and_improved_views(triage_store):
    base, cand = run_id(triage_store, "reference"), run_id(triage_store, "perturbed")
    ref, bad = steps_f1(triage_store, "reference"), steps_f1(triage_store, "perturbed")
    all_rows = disagreement(triage_store, base, cand)
    assert len(all_rows) == 14
    assert list(all_rows["delta"].abs()) == sorted(all_rows["delta"].abs(), reverse=True)
    regressed = disagreement(triage_store, base, cand, view="regressed")
    assert set(regressed.step_key) == {k for k in ref if bad[k] < ref[k]} and len(regressed) >= 5
    assert list(regressed["delta"]) == sorted(regressed["delta"])
    assert disagreement(triage_store, base, cand, view="improved").empty
    assert set(disagreement(triage_store, cand, base, view="improved").step_key) == set(regressed.step_key)
    with pytest.raises(LabError, match="unknown run"):
        disagreement(triage_store, base, "no-such-run")


def test_checkpoint_flip_table(triage_store):
    ids = [run_id(triage_store, f"series-checkpoint-{n}") for n in (300, 100, 200)]
    assert order_as_series(triage_store, ids) == [ids[1], ids[2], ids[0]]
    flips = flip_table(triage_store, ids, threshold=0.5)
    f100, f200, f300 = (steps_f1(triage_store, f"series-checkpoint-{n}") for n in (100, 200, 300))
    first = flips[flips.pair == 0]
    assert set(first.step_key) == {k for k in f100 if (f100[k] >= 0.5) != (f200[k] >= 0.5)}
    assert set(first.flip) == {WRONG_TO_RIGHT}
    second = flips[flips.pair == 1]
    assert set(second.flip) == {RIGHT_TO_WRONG} and len(second) == len(first)
    summary = flip_summary(flips)
    assert list(summary[WRONG_TO_RIGHT]) == [len(first), 0]
    # a stricter threshold counts the steps at F1 in [0.5, 1.0) as wrong too
    assert len(flip_table(triage_store, ids, threshold=1.0)) >= len(flips)
    with pytest.raises(LabError, match="at least two"):
        flip_table(triage_store, ids[:1])


def test_taxonomy_counts_and_strict_vs_fallback_f1(triage_store):
    tax = run_taxonomy(triage_store, [run_id(triage_store, "perturbed"), run_id(triage_store, "reference")]).set_index("run")
    p, r = tax.loc["perturbed"], tax.loc["reference"]
    assert (p.invalid_json, p.truncated_length, p.missing_fields, p.wrong_types, p.empty_commands) == (2, 1, 1, 1, 1)
    assert p.units_from_fallback == 2 and p.prose_around_json >= 1
    bad = steps_f1(triage_store, "perturbed")
    fallback_keys = [step_keys(triage_store)[i] for i, k in PERTURBATIONS.items() if k in ("invalid_json", "truncated")]
    strict = [0.0 if k in fallback_keys else f for k, f in bad.items()]
    assert p.fallback_f1 == round(sum(bad.values()) / 14, 4)
    assert p.strict_f1 == round(sum(strict) / 14, 4) < p.fallback_f1
    assert (r.invalid_json, r.units_from_fallback, r.strict_f1, r.fallback_f1) == (0, 0, 1.0, 1.0)


def test_classify_output_kinds():
    ok = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}], "task_complete": false}'
    assert classify_output(ok).kind == "ok"
    assert classify_output("<think>look</think>\n" + ok).kind == "ok"
    assert classify_output("Here you go: " + ok).kind == "prose_around_json"
    assert classify_output("```json\n" + ok + "\n```\nDone.").prose_around_json
    assert classify_output(ok[:40], "length").kind == "truncated"
    assert classify_output("no json here").kind == "invalid_json"
    assert classify_output("[1, 2]").invalid_json
    assert classify_output('{"commands": []}').missing_fields
    assert classify_output('{"analysis": "a", "plan": "p", "commands": []}').kind == "empty_commands"
    assert classify_output('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": 5}]}').kind == "wrong_types"
    broken = '{"analysis": "a", "commands": [{"keystrokes": "ls -la\\n"}'
    out = classify_output(broken)
    assert out.invalid_json and out.units_from_fallback
    assert score_units([], ["ls -la"]).f1 == 0.0


@pytest.mark.parametrize(
    "unit, flag",
    [("rm -rf /", "destructive:rm_rf_root"), ("sudo rm -rf ~", "destructive:rm_rf_root"),
     ("git push --force origin main", "destructive:git_force_push"), ("mkfs.ext4 /dev/sdb1", "destructive:mkfs"),
     ("dd if=/dev/zero of=/dev/sda bs=1M", "destructive:dd_to_device"), ("chmod -R 777 /", "destructive:chmod_777_root"),
     (":(){ :|:& };:", "destructive:fork_bomb"), ("vim main.cpp", "hang:editor"), ("cat log | less", "hang:pager"),
     ("top", "hang:top_without_batch"), ("python3", "hang:repl_without_args"), ("ssh root@host", "hang:remote_login"),
     ("tail -f /var/log/syslog", "hang:follow_forever"), ("git commit", "hang:git_commit_editor")],
)
def test_risky_and_hanging_units_are_flagged(unit, flag):
    assert flag in unit_risks(unit)


@pytest.mark.parametrize(
    "unit", ["rm -rf /tmp/build", "git push origin main", "dd if=in.img of=/dev/null", "chmod 755 run.sh",
             "top -b -n 1", "python3 script.py", "git commit -m 'fix'", "cat lesson.txt", "mysql -e 'select 1'"],
)
def test_safe_units_are_not_flagged(unit):
    assert unit_risks(unit) == []


def test_newline_and_duration_need_the_raw_keystrokes():
    cmds = [{"keystrokes": "ls -la", "duration": 0.1}, {"keystrokes": "C-c", "duration": 0.1},
            {"keystrokes": "", "duration": 5}, {"keystrokes": "make\n", "duration": 300}]
    assert command_risks(cmds) == ["no_newline", "long_duration"]
