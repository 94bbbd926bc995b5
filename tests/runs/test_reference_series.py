"""A real (if tiny) training run, then the lab on its checkpoints (issue 25): the reference's likelihood of the
steps it was trained on rises from checkpoint to checkpoint while the other steps' changes far less, and the
Results series plot and Triage's "moved toward the reference" show exactly those steps.

The model is the tests' random-weight Qwen2 of head size 32 (hidden 64). It is trained with AdamW on two
excerpt steps' reference answers (loss on the reference tokens only; each example the last 384 tokens of the
step's rendered prompt and the reference, so an update takes milliseconds) and saved as
`tinyrun-checkpoint-10/-25/-40`. The first updates teach any step the replies' shared format, so the series
starts at update 10, as a real run's first saved checkpoint would. Each checkpoint is replayed (2 new tokens)
and scored with `score-reference` on four steps, the two trained and two it never saw, with their whole
prompts, and imported into a DuckDB store.

Measured (with the tests' 2,000-entry tiny tokenizer): NLL per token of the trained steps 4.36 → 2.37 → 2.16 and
4.64 → 2.67 → 2.05; of the untrained 6.91 → 7.48 and 5.18 → 4.83.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.data import load_replay
from lab.engines import Sampling, create_engine
from tests.paths import EXCERPT

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]
CHECKPOINTS = (10, 25, 40)
LEARNING_RATE = 3e-3
TRAINED_CONTEXT = 384  # prompt tokens before the reference in each training example


def train_series(base: Path, folder: Path, trained: list) -> dict[int, Path]:
    """AdamW on the trained steps' references; a checkpoint folder (model + tokenizer) at each of CHECKPOINTS."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lab.prompts.engine_prompt import render_for_engine

    renderer = create_engine(f"transformers:{base}?device=cpu")
    renderer.load()
    tokenizer = AutoTokenizer.from_pretrained(base)
    examples = []
    for step in trained:
        prompt = tokenizer(render_for_engine(renderer, step).text).input_ids[-TRAINED_CONTEXT:]
        ref = tokenizer(step.ref_raw, add_special_tokens=False).input_ids
        examples.append((torch.tensor([prompt + ref]), torch.tensor([[-100] * len(prompt) + ref])))
    renderer.close()
    from lab.engines.loading import MODEL_BUILD_LOCK

    torch.manual_seed(0)
    with MODEL_BUILD_LOCK:  # never while an engine of this process builds its model (lab.engines.loading)
        model = AutoModelForCausalLM.from_pretrained(base)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    saved = {}
    for update in range(CHECKPOINTS[-1] + 1):
        if update in CHECKPOINTS:
            path = folder / f"tinyrun-checkpoint-{update}"
            model.save_pretrained(path)
            tokenizer.save_pretrained(path)
            saved[update] = path
        if update == CHECKPOINTS[-1]:
            break
        for ids, labels in examples:
            model(input_ids=ids, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    return saved


def test_training_moves_the_reference_likelihood_of_the_trained_steps_and_the_lab_shows_it(vllm_model_dir, tmp_path):
    from lab.runs.reference_run import ReferenceConfig, score_reference_run
    from lab.runs.replay import ReplayConfig, replay
    from lab.store.opening import open_store
    from lab.store.series import series_figure, series_frame
    from lab.triage.compare_runs import disagreement

    steps = load_replay(str(EXCERPT)).steps
    trained, untrained = [steps[0], steps[7]], [steps[3], steps[10]]  # one of each task on each side
    chosen = trained + untrained
    series = train_series(vllm_model_dir, tmp_path / "ckpts", trained)
    runs = tmp_path / "results" / "runs"
    nll: dict[int, dict[str, float]] = {}
    whole: dict[int, float] = {}  # each checkpoint's NLL per token over the four steps
    for update, folder in series.items():
        # one prompt a generate call: a batch of the excerpt's uneven prompts (2k to 18k tokens) is padded,
        # and the padded attention mask takes torch's slow path (30 s or more a checkpoint, not 3)
        engine = create_engine(f"transformers:{folder}?device=cpu&logprobs=2&batch_size=1")
        engine.load()
        try:
            replay(engine, chosen, ReplayConfig(out_dir=runs, sampling=Sampling(max_tokens=2)))
            path = score_reference_run(engine, chosen, ReferenceConfig(out_dir=runs))
        finally:
            engine.close()
        scored = json.loads(path.read_text())
        nll[update] = {f"{r['task_id']}/{r['step_idx']}": r["ref_nll_per_token"] for r in scored["per_step"]}
        whole[update] = scored["aggregate"]["ref_nll_per_token"]
    report = {key: [nll[u][key] for u in CHECKPOINTS] for key in nll[CHECKPOINTS[0]]}
    first, last = CHECKPOINTS[0], CHECKPOINTS[-1]
    for step in trained:  # falls from checkpoint to checkpoint
        values = report[step.key]
        assert values == sorted(values, reverse=True) and values[0] - values[-1] > 0.5, report
    trained_drop = min(nll[first][s.key] - nll[last][s.key] for s in trained)
    untrained_change = max(abs(nll[first][s.key] - nll[last][s.key]) for s in untrained)
    assert untrained_change < trained_drop / 2, report

    store = open_store(tmp_path / "lab.duckdb", tmp_path / "results")
    try:
        frame = series_frame(store)
        # the runs' default names tell the engine's kind (tinyrun-checkpoint-10-transformers …): so does the series
        line = frame[frame["series"] == "tinyrun-transformers"].sort_values("x")
        assert list(line["x"]) == list(CHECKPOINTS), frame
        assert list(line["ref_nll"]) == pytest.approx([whole[u] for u in CHECKPOINTS], abs=1e-4)
        figure = series_figure(frame)
        [drawn] = [t for t in figure.data if t.name == "tinyrun-transformers: reference NLL/token"]
        assert drawn.yaxis == "y2" and list(drawn.x) == list(CHECKPOINTS)
        assert list(drawn.y) == pytest.approx([whole[u] for u in CHECKPOINTS], abs=1e-4)
        run_of = dict(zip(line["x"], line["run_id"]))
        moved = disagreement(store, run_of[first], run_of[last], "toward_reference")
        assert set(moved["step_key"].head(2)) == {s.key for s in trained}, moved
        assert (moved["ref_nll_delta"].head(2) < -0.5).all()
    finally:
        store.close()
    print("\nreference NLL per token at checkpoints " + "/".join(map(str, CHECKPOINTS)) + ": "
          + "; ".join(f"{key} {'trained' if key in {s.key for s in trained} else 'untrained'} "
                      + " → ".join(f"{v:.2f}" for v in values) for key, values in report.items()))
