"""How a run was made, read from its result file, and what differs between two runs (lab.resultfiles.run_settings;
the list and which settings change answers: run_settings.yaml). Issue 51 "never compare what is not
comparable" and issue 55 item 6 (two runs on different replays with the same step keys)."""
from __future__ import annotations

import json

from lab.resultfiles.run_settings import (
    answer_changing_names, compare_settings, load_settings_table, run_settings, step_set,
)
from tests.paths import TB2LITE

KEYS = [f"task-{t:03d}/{s}" for t in range(50) for s in range(6)]
LAB_RUN = {
    "sampling": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024, "repetition_penalty": 1.0, "top_k": -1,
                 "min_p": 0.0, "stop": None, "seed": None, "thinking_mode": "auto", "backend": "transformers",
                 "preset": None, "logprobs_top_k": 5, "dtype": "bfloat16", "device": "cpu", "batch_size": 4,
                 "engine_version": "transformers 4.57.0"},
    "prompt_template": {"template_sha256": "f" * 64, "prompt_options": {"thinking_mode": "auto"}},
    "replay_sha256": "a" * 64, "selection": {"mode": "corrected", "tasks": None, "limit": None},
    "scoring_version": "corrected_303", "contract": "tb2lite-json", "engine_spec": "transformers:/m/ckpt-1",
}


def changed(**edits) -> dict:
    out = json.loads(json.dumps(LAB_RUN))
    for path, value in edits.items():
        block, _, key = path.rpartition("__")
        (out[block] if block else out)[key] = value
    return out


def diff(a: dict, b: dict, keys_a=KEYS, keys_b=KEYS):
    return compare_settings(run_settings(a, keys_a), run_settings(b, keys_b))


def test_the_same_run_differs_in_nothing():
    d = diff(LAB_RUN, LAB_RUN)
    assert d.differ == [] and d.not_recorded == [] and d.line() == "settings: no difference recorded"


def test_each_setting_that_changes_answers_is_named():
    for path, value, name, shown in (("sampling__temperature", 0.7, "temperature", "temperature 0 vs 0.7"),
                                     ("sampling__top_p", 0.9, "top_p", "top_p 1 vs 0.9"),
                                     ("sampling__max_tokens", 256, "max_tokens", "max_tokens 1024 vs 256"),
                                     ("sampling__repetition_penalty", 1.1, "sampling", "sampling.repetition_penalty 1 vs 1.1"),
                                     ("replay_sha256", "b" * 64, "replay", "replay aaaaaaaaaaaa vs bbbbbbbbbbbb"),
                                     ("selection__mode", "all", "mode", "replay mode corrected vs all"),
                                     ("prompt_template__template_sha256", "e" * 64, "template", "chat template"),
                                     ("prompt_template__prompt_options", {"thinking_mode": "on"}, "prompt_options",
                                      'prompt options {"thinking_mode":"auto"} vs {"thinking_mode":"on"}')):
        d = diff(LAB_RUN, changed(**{path: value}))
        assert [x.name for x in d.differ] == [name] and d.changing == d.differ, (path, d.differ)
        assert shown in d.line() and "(changes answers)" in d.line()
        assert name in answer_changing_names()


def test_how_a_run_was_served_is_shown_but_changes_no_answer():
    d = diff(LAB_RUN, changed(sampling__dtype="float32", sampling__engine_version="transformers 4.58.0",
                              contract="bash-block", sampling__backend="vllm", sampling__device="cuda:0",
                              sampling__batch_size=64))
    assert [x.name for x in d.differ] == ["contract", "engine", "engine_version", "dtype"]  # device, batch: not at all
    assert d.changing == [] and "dtype bfloat16 vs float32" in d.line()


def test_the_seed_matters_only_when_a_run_samples():
    greedy = diff(LAB_RUN, changed(sampling__seed=3))
    assert greedy.not_recorded == ["seed"] and greedy.changing == []  # None on one side: not recorded
    both = diff(changed(sampling__seed=1), changed(sampling__seed=2))
    assert [x.name for x in both.differ] == ["seed"] and both.changing == []
    hot = diff(changed(sampling__seed=1, sampling__temperature=0.7), changed(sampling__seed=2, sampling__temperature=0.7))
    assert [x.name for x in hot.changing] == ["seed"]


def test_a_replay_not_recorded_falls_back_to_the_step_sets():
    old = changed()
    old.pop("replay_sha256")
    same_steps = diff(old, LAB_RUN)
    assert same_steps.differ == [] and same_steps.not_recorded == ["replay sha256"]
    fewer = diff(old, LAB_RUN, KEYS, KEYS[:12])
    assert [x.name for x in fewer.changing] == ["replay"]
    assert "replay steps (no sha256 recorded) 300 steps · " in fewer.line() and step_set(KEYS[:12]).startswith("12 steps")
    assert step_set(reversed(KEYS)) == step_set(KEYS)  # a set: order does not matter


def test_a_published_file_records_less_and_that_is_not_a_difference():
    published = json.loads((TB2LITE / "published" / "llada21_flash_transformers_smoke.json").read_text())
    published.pop("per_step")
    d = diff(published, LAB_RUN)
    names = [x.name for x in d.differ]
    assert "max_tokens" in names  # LLaDA's gen_length 256 stands for max_tokens
    assert "dtype" not in names and "temperature" not in names  # bfloat16, 0.0 on both sides
    assert "replay sha256" in d.not_recorded
    assert "chat template" in d.not_recorded and "contract" not in names
    rest = run_settings(published, KEYS).rest["sampling"]
    assert set(rest) == {"block_length", "threshold", "editing_threshold", "max_post_steps"}  # compared where both have them


def test_a_long_list_stays_one_line():
    many = changed(sampling__temperature=0.5, sampling__top_p=0.5, sampling__max_tokens=9, sampling__min_p=0.1,
                   sampling__top_k=5, sampling__repetition_penalty=1.2, sampling__dtype="x", contract="y")
    line = diff(LAB_RUN, many).line()
    assert "\n" not in line and f"+{8 - load_settings_table().shown} more" in line


def test_hostile_values_stay_short_and_on_one_line():
    bad = changed(sampling__dtype="<img src=x onerror=alert(1)>\n" + "x" * 5000)
    line = diff(LAB_RUN, bad).line()
    assert "\n" not in line and len(line) < 300
