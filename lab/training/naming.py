"""Names of a training run's result files: `SERIES-checkpoint-STEP.json` (+ `.reference.json`), never an existing one.

SERIES is the callback's `name`, else the trainer's `run_name`, else the output folder's name, made
path-safe as any run name. A fresh training run (global step 0 at its start) whose SERIES already names
checkpoint files in the results folder (an earlier run with the same output folder) takes `SERIES-2`,
`SERIES-3` … so two runs never mix into one series; a run resumed from a checkpoint keeps its SERIES and
continues it. Whether a checkpoint's own name is free is lab.runs.claims' answer (a result or reference
file, an interrupted run, a run in the store whose file is gone, another process writing it now); a taken
one gets the next free `-N`, and the replay then claims exactly that name: nothing stored is ever replaced.
With `subset_tasks`, a checkpoint's subset run is `SERIES-checkpoint-STEP-subset` and its whole replay (when
the series judgement keeps it) `SERIES-checkpoint-STEP`: both names are free before the first is taken.
"""
from __future__ import annotations

from pathlib import Path

from lab.runs.claims import RunNameTaken, TakenFn, check_run_name
from lab.runs.reference_run import SUFFIX as REFERENCE_SUFFIX
from lab.runs.replay import check_run_name_length, run_name_max, run_stem
from lab.training.options import training_defaults

STEP_ROOM = 24  # characters kept free for `-checkpoint-STEP` and a `-N` after it


def infix() -> str:
    return str(training_defaults()["checkpoint_infix"])


def clean_series(wanted: str) -> str:
    """`wanted` made path-safe as a run name; a LabError when it leaves no room for `-checkpoint-STEP`."""
    from lab.errors import LabError

    check_run_name_length(wanted)
    stem = run_stem(wanted, "training")
    if len(stem) > run_name_max() - STEP_ROOM:
        raise LabError(f"name '{wanted[:40]}…' has {len(stem)} characters; give at most {run_name_max() - STEP_ROOM} "
                       "(the result files are NAME-checkpoint-STEP.json)")
    return stem


def default_series(output_dir: str, run_name: str | None) -> str:
    """The trainer's run name when it was given one, else its output folder's name."""
    if run_name and Path(str(run_name)).resolve() != Path(str(output_dir)).resolve():
        return str(run_name)
    return Path(str(output_dir)).resolve().name or "training"


def series_taken(out_dir: Path, series: str) -> bool:
    """Whether checkpoint files (finished or partial) of `series` exist in `out_dir`."""
    prefix = f"{series}{infix()}"
    return any(p.name[len(prefix):][:1].isdigit() for p in Path(out_dir).glob(f"{prefix}*"))


def fresh_series(out_dir: Path, series: str) -> str:
    """`series`, or `series-2`, `series-3` … : the first without checkpoint files in `out_dir`."""
    if not series_taken(out_dir, series):
        return series
    k = 2
    while series_taken(out_dir, f"{series}-{k}"):
        k += 1
    return f"{series}-{k}"


def subset_suffix() -> str:
    return str(training_defaults()["subset_suffix"])


def _name_free(out_dir: Path, name: str, taken: TakenFn | None, tails: tuple[str, ...]) -> bool:
    """Neither the run `name` + each tail nor its reference run is taken (lab.runs.claims decides)."""
    try:
        for tail in tails:
            for suffix in ("", REFERENCE_SUFFIX):
                check_run_name(out_dir, name + tail, suffix=suffix, explicit=True, taken=taken)
    except RunNameTaken:
        return False
    return True


def checkpoint_stem(out_dir: Path, series: str, step: int, taken: TakenFn | None = None,
                    tails: tuple[str, ...] = ("",)) -> str:
    """`SERIES-checkpoint-STEP`, or its first free `-N` (module docstring); `taken`: the store's check; `tails`:
    the run names the checkpoint will have (its subset run `STEM-subset` beside its whole replay `STEM`)."""
    stem = f"{series}{infix()}{int(step)}"
    k, name = 2, stem
    while not _name_free(Path(out_dir), name, taken, tails):
        name, k = f"{stem}-{k}", k + 1
    return name
