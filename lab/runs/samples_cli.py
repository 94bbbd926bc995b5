"""The `--samples/--seed/--pass-threshold` side of `python -m lab replay`: checks, warnings, summary."""
from __future__ import annotations

import sys

from lab.errors import LabError
from lab.resultfiles.schema import max_samples_per_step
from lab.runs.options import RunOptions

MAX_SAMPLES = max_samples_per_step()  # the cap a result file is read with (lab/resultfiles/limits.yaml)


def check_sample_args(options: RunOptions) -> None:
    """One-line errors for values the replay cannot use."""
    if not 1 <= options.samples <= MAX_SAMPLES:
        raise LabError(f"--samples {options.samples}: give a number of answers per step from 1 to {MAX_SAMPLES}")
    threshold = options.pass_threshold
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise LabError(f"--pass-threshold {threshold}: give an F1 between 0 and 1")


def warn_if_greedy(spec: str, config) -> None:
    """Several samples at temperature 0 are the same answer: say so (the run still goes on)."""
    if config.samples > 1 and config.sampling is not None and config.sampling.temperature <= 0:
        print(f"warning: {spec}: --samples {config.samples} at temperature 0 gives {config.samples} identical "
              "greedy answers; pass --temperature (e.g. 0.7 --top-p 0.95) to sample", file=sys.stderr)


def samples_line(agg: dict) -> str:
    """The console summary of a sampled run's aggregate."""
    ks = agg["pass_at_k"]
    shown = ", ".join(f"pass@{k} {v:.3f}" for k, v in ks.items() if k in ("1", str(len(ks))) or len(ks) <= 4)
    return (f"  {agg['samples']} samples/step: mean F1 over samples {agg['mean_f1_over_samples']:.4f}, "
            f"F1 std (mean over steps) {agg['f1_std_mean']:.4f}, {shown} (pass = F1 >= {agg['pass_threshold']})")
