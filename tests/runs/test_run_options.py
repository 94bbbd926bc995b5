"""Issue 53: one typed RunOptions for what a run is asked to do, built from `replay`'s, `score-reference`'s and
`sweep`'s arguments in their CLI (lab.runs.replay_cli.run_options) and by the Batch tab, the sweep and the training
callback directly; its defaults are the replay parser's, and the replay's ReplayConfig is made from it one way."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from lab.engines import create_engine
from lab.engines.base import Sampling
from lab.runs.options import ReplaySource, RunOptions, SamplingAsked, replay_config, select_steps
from lab.runs.replay_cli import add_arguments, run_options
from lab.scoring.stability import DEFAULT_PASS_THRESHOLD
from tests.paths import EXCERPT


def parsed(add, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add(parser)
    return parser.parse_args(["--engine", "reference", *argv])


def test_the_defaults_are_the_replay_parsers_and_every_option_is_one_of_its_flags():
    args = parsed(add_arguments)
    assert run_options(args) == RunOptions()
    dests = set(vars(args))
    run_fields = {f.name for f in dataclasses.fields(RunOptions)} - {"sampling"}
    assert run_fields <= dests and {f.name for f in dataclasses.fields(SamplingAsked)} <= dests
    assert dests - run_fields - {f.name for f in dataclasses.fields(SamplingAsked)} == {"engine"}  # which engines run


def test_the_arguments_become_typed_options():
    options = run_options(parsed(add_arguments, "--replay", "r.jsonl", "--mode", "all", "--tasks", "b", "a", "b",
                                 "--limit", "5", "--scorer", "legacy", "--temperature", "0.7", "--seed", "3",
                                 "--samples", "4", "--pass-threshold", "0.6", "--name", "mine", "--resume",
                                 "--chunk-size", "2", "--max-model-len", "4096", "--allow-raw-fallback", "--out", "o"))
    assert options == RunOptions(replay="r.jsonl", mode="all", tasks=("b", "a", "b"), limit=5, scorer="legacy",
                                 sampling=SamplingAsked(temperature=0.7, seed=3), samples=4, pass_threshold=0.6,
                                 name="mine", resume=True, chunk_size=2, max_model_len=4096, allow_raw_fallback=True,
                                 out="o")
    assert options.selection == {"mode": "all", "tasks": ["a", "b"], "limit": 5}
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.resume = False  # type: ignore[misc]


def test_score_reference_and_sweep_take_their_part_of_the_options():
    from lab.runs.reference_cli import add_arguments as reference_arguments
    from lab.sweep.cli import add_arguments as sweep_arguments

    reference = run_options(parsed(reference_arguments, "--tasks", "t", "--overwrite"))
    assert reference == RunOptions(tasks=("t",), overwrite=True)  # no scorer or sampling flags: their defaults
    sweep = run_options(parsed(sweep_arguments, "--samples", "2", "--top-p", "0.9", "--shards", "3"))
    assert sweep == RunOptions(samples=2, sampling=SamplingAsked(top_p=0.9))


def test_the_sampling_asked_goes_over_the_engines_own():
    engine = create_engine("reference?max_tokens=64&temperature=0.5")
    assert RunOptions().sampling_for(engine) == engine.default_sampling
    asked = RunOptions(sampling=SamplingAsked(max_tokens=8, seed=1)).sampling_for(engine)
    assert asked == Sampling(**{**engine.default_sampling.to_dict(), "max_tokens": 8, "seed": 1})


@pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
def test_the_replay_config_is_made_from_the_options_and_the_source(tmp_path):
    from lab.settings import Settings

    options = RunOptions(replay=str(EXCERPT), tasks=None, limit=3, samples=2, resume=True, chunk_size=4,
                         sampling=SamplingAsked(temperature=0.7))
    replay_set, steps = select_steps(options, Settings(replay_path=str(EXCERPT)))
    assert len(steps) == 3
    engine = create_engine("reference")
    source = ReplaySource.of(replay_set)
    assert source == ReplaySource(str(replay_set.path), replay_set.fingerprint, len(replay_set.steps))
    config = replay_config(options, engine, source, tmp_path, run_name="r", name_given=True, extra={"k": 1})
    assert (config.out_dir, config.eval_path, config.replay_fingerprint, config.replay_steps) == \
        (Path(tmp_path), source.path, source.fingerprint, source.steps)
    assert (config.resume, config.chunk_size, config.samples, config.run_name, config.name_given, config.extra) == \
        (True, 4, 2, "r", True, {"k": 1})
    assert config.selection == options.selection and config.sampling.temperature == 0.7
    assert config.pass_threshold == DEFAULT_PASS_THRESHOLD  # not asked: the replay's own default
    batch = replay_config(RunOptions(pass_threshold=0.9), engine, source, tmp_path, selection={})
    assert batch.selection == {} and batch.pass_threshold == 0.9 and not batch.name_given
