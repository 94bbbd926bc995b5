"""What a new result file records so that comparisons can check it (issue 51): the replay's sha256, the step
selection and the chat template's hash (a fixed probe conversation rendered as the engine renders every step);
and `--name` past its limit is an input error like any other (issue 55 item 6: exit 2, not 1)."""
from __future__ import annotations

import re

import pytest

from lab.cli import main
from lab.engines import create_engine
from lab.resultfiles.files import read_result_file
from lab.runs.template_hash import template_sha256
from tests.paths import EXCERPT

EXCERPT_SHA256 = "a26f5b8c8095602669136c28e0f806e42878cc5bfc249e21233ec214fd6ddd29"  # ../shared/tb2lite/README.md


def test_a_run_records_its_replay_selection_and_template(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RESULTS", str(tmp_path / "results"))
    rc = main(["replay", "--replay", str(EXCERPT), "--engine", "reference", "--out", str(tmp_path / "out"),
               "--limit", "3", "--name", "probe"])
    assert rc == 0
    data = read_result_file(tmp_path / "out" / "probe.json")
    assert data["replay_sha256"] == EXCERPT_SHA256
    assert data["selection"] == {"mode": "corrected", "tasks": None, "limit": 3, "steps": 3}
    assert re.fullmatch(r"[0-9a-f]{64}", data["prompt_template"]["template_sha256"])
    assert data["prompt_template"]["template_sha256"] == template_sha256(create_engine("reference"))


def test_the_template_hash_follows_what_renders_the_prompt(tiny_model_dir):
    """A model's chat template, its prompt options and the output contract each change the hash; the same
    rendering gives the same hash."""
    hashes = {}
    for options in ("", "&strip_thinking_history=on", "&strip_thinking_history=off", "&contract=bash-block"):
        engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu{options}")
        engine.load()
        try:
            hashes[options] = template_sha256(engine)
            assert template_sha256(engine) == hashes[options]
        finally:
            engine.close()
    assert len(set(hashes.values())) == 3, hashes  # "auto" resolves to on or off for this model: one of them
    assert hashes["&strip_thinking_history=off"] != hashes["&strip_thinking_history=on"]
    assert hashes["&contract=bash-block"] != hashes[""]
    assert template_sha256(create_engine("reference")) not in hashes.values()  # no tokenizer: another rendering


@pytest.mark.parametrize("command", ["replay", "score-reference"])
def test_an_overlong_name_exits_2_before_any_engine_loads(tmp_path, capsys, command):
    rc = main([command, "--replay", str(EXCERPT), "--engine", "reference", "--out", str(tmp_path), "--limit", "1",
               "--name", "n" * 121])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: run name 'nnnn") and "give at most 120" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
