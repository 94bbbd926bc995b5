"""A results folder of many stored runs of 303 steps from 50 tasks, for the statistics at scale
(bench/bench_stats_scale.py, tests/public/test_public_stats_load.py): `series` of them form one checkpoint
series (`ser-checkpoint-1` … `ser-checkpoint-N`, each a little better than the one before), the rest are other
runs. Each is a variant of one synthetic run (tests/helpers_paired.py) whose per-step F1 moves by noise. The
importer keeps stored per-step metrics as they are, so each step keeps only its first two command units (small
files, a quick import and equiv fill; the statistics read the metrics, never the units)."""
from __future__ import annotations

from pathlib import Path

from tests.helpers_paired import variant, write

UNITS_KEPT = 2


def small_variant(name: str, shift: float, seed: int, model_path: str) -> dict:
    result = variant(name, shift=shift, seed=seed, model_path=model_path)
    for row in result["per_step"]:
        row["ref_command_units"] = row["ref_command_units"][:UNITS_KEPT]
        row["pred_command_units"] = row["pred_command_units"][:UNITS_KEPT]
        row.pop("token_ids_preview", None)
    return result


def write_runs(folder: Path, runs: int, series: int) -> list[Path]:
    """`runs` result files in `folder`, the first `series` of them one checkpoint series."""
    paths = []
    for i in range(runs):
        if i < series:
            name, model_path, shift = f"ser-checkpoint-{i + 1}", f"/train/ser/checkpoint-{i + 1}", 0.0002 * i
        else:
            name, model_path, shift = f"other-{i:04d}", f"/models/other-{i:04d}", 0.0
        paths.append(write(folder, name, small_variant(name, shift, i, model_path)))
    return paths
