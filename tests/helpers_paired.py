"""Result files for the paired-comparison tests: variants of one synthetic 303-step run (bench/synthetic.py)
whose per-step F1 is moved by a known amount, with sampled answers or a reference-likelihood file when asked.
The importer takes stored per-step metrics as they are (and computes the aggregate), so this is quick."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from bench.synthetic import make_results


@lru_cache(maxsize=1)
def _base() -> str:
    return json.dumps(make_results(n_runs=1, n_steps=303)[0])


def variant(name: str, shift: float = 0.0, noise: float = 0.15, seed: int = 0, samples: int = 0,
            model_path: str | None = None, steps: int | None = None) -> dict:
    """The synthetic run with each step's F1 moved by `shift` plus Gaussian `noise` (clipped to 0–1), named
    `name`; `samples` > 0 adds that many sampled answers per step (the first is the step's own)."""
    result = json.loads(_base())
    rng = np.random.default_rng(seed)
    result["model"] = result["model_short"] = name
    result["model_path"] = model_path or f"/models/{name}"
    result.pop("aggregate", None)
    rows = result["per_step"][:steps] if steps else result["per_step"]
    for row in rows:
        row["command_f1"] = round(float(np.clip(row["command_f1"] + shift + rng.normal(0, noise), 0, 1)), 4)
        if samples:
            answers = [row["command_f1"]] + [round(float(np.clip(row["command_f1"] + rng.normal(0, 0.3), 0, 1)), 4)
                                             for _ in range(samples - 1)]
            row["samples"] = [{"sample": k, "seed": k, "raw_output": "", "pred_command_units": [],
                               "valid_json": row["valid_json"], "first_cmd_exact": row["first_cmd_exact"],
                               "command_f1": f, "command_precision": f, "command_recall": f} for k, f in enumerate(answers)]
    result["per_step"] = rows
    return result


def reference_file(result: dict, nll_per_token: float, seed: int = 0) -> dict:
    """A reference-likelihood file (`score-reference`) for `result`'s model: every step's reference scored
    at about `nll_per_token` per token."""
    rng = np.random.default_rng(seed)
    rows = []
    for row in result["per_step"]:
        tokens = int(rng.integers(20, 400))
        nll = float(nll_per_token * rng.uniform(0.5, 1.5))
        rows.append({"task_id": row["task_id"], "step_idx": row["step_idx"], "ref_tokens": tokens,
                     "ref_logprob": -nll * tokens, "ref_logprob_mean": -nll, "ref_nll_per_token": nll,
                     "prompt_tokens": 1000, "error": None})
    return {"kind": "tb2lite-reference-likelihood", "model_path": result["model_path"], "lora_path": None,
            "model_short": result["model_short"], "engine_spec": f"transformers:{result['model_path']}",
            "per_step": rows, "aggregate": {}}


def write(folder: Path, name: str, data: dict) -> Path:
    path = folder / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
