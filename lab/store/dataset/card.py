"""The dataset card (README.md): the YAML header the Hub reads (`configs:`, one per run), then the runs'
scores with their intervals, their settings and the replay they were made on, and how to load it."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

import numpy as np
import yaml

from lab.scoring.paired import PairedMetric, compare
from lab.store.dataset.layout import FORMAT, SPLIT, data_path
from lab.store.dataset.rows import ExportedRun

# the top-level fields of a result file shown under each run's settings, in order (others stay in the file)
SETTINGS_FIELDS = ("model", "model_path", "lora_path", "engine_spec", "contract", "sampling", "gpu", "timestamp",
                   "lab_version")
REPLAY_FIELDS = ("eval_path", "replay_sha256", "replay_steps", "total_input_steps", "scoring_version")


def steps_fingerprint(run: ExportedRun) -> str:
    """sha256 of the run's steps and their reference units, in step order: two runs made on the same replay
    steps (and scored against the same reference) have the same one."""
    keys = run.table.column("task_id").to_pylist(), run.table.column("step_idx").to_pylist()
    refs = run.table.column("ref_command_units").to_pylist()
    rows = sorted(zip(*keys, refs), key=lambda r: (str(r[0]), int(r[1])))
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()


def score_interval(run: ExportedRun, seed: int | None = None) -> str:
    """The run's score (100 × mean command F1 over its steps) with its 95 % interval from the lab's bootstrap
    over tasks (a run against a zero baseline: the candidate side is the run); why not, when too few steps."""
    f1 = np.array([np.nan if v is None else v for v in run.table.column("command_f1").to_pylist()], dtype=float)
    tasks = np.array(run.table.column("task_id").to_pylist(), dtype=object)
    keep = ~np.isnan(f1)
    if not keep.any():
        return "no scored step"
    _, task = np.unique(tasks[keep], return_inverse=True)
    diff = compare(PairedMetric(task, np.zeros(int(keep.sum())), f1[keep]), seed=seed)
    if diff.low is None or diff.high is None:
        return f"{diff.delta:.2f} ({diff.note.replace('common ', '')})"
    return f"{diff.delta:.2f} [{diff.low:.2f}, {diff.high:.2f}]"


def header(runs: Sequence[ExportedRun], configs: Sequence[str]) -> dict[str, Any]:
    """The card's YAML header: the configs the Hub (and `datasets.load_dataset(DIR, CONFIG)`) reads."""
    return {
        "pretty_name": "TB2-lite runs: " + ", ".join(str(r.info["display_name"]) for r in runs)[:200],
        "tags": ["tb2-lite", "terminal-agents", "evaluation"],
        "configs": [{"config_name": c, "data_files": [{"split": SPLIT, "path": data_path(c)}],
                     **({"default": True} if i == 0 else {})} for i, c in enumerate(configs)],
        "tb2lite_lab": {"format": FORMAT, "runs": [
            {"config": c, "run_id": str(r.info["run_id"]), "display_name": str(r.info["display_name"])}
            for c, r in zip(configs, runs)]},
    }


def _md(value: Any) -> str:
    """A value as table-cell text: one line, pipes escaped."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")[:300]


def _scores(runs: Sequence[ExportedRun], configs: Sequence[str], deltas: Sequence[str]) -> list[str]:
    lines = ["| config | run | score [95 % interval] | Δ vs the first [95 %] | steps | tasks | scorer |",
             "|---|---|---|---|---|---|---|"]
    for c, r, d in zip(configs, runs, deltas):
        i = r.info
        lines.append(f"| `{c}` | {_md(i['display_name'])} | {score_interval(r)} | {d} | {i['steps']} | {i['tasks']} "
                     f"| {_md(i['scoring_version'])} |")
    return lines


def _settings(runs: Sequence[ExportedRun], configs: Sequence[str]) -> list[str]:
    lines = ["## Settings", ""]
    for c, r in zip(configs, runs):
        lines += [f"### `{c}`", "", "| field | value |", "|---|---|"]
        lines += [f"| {f} | {_md(r.meta[f])} |" for f in SETTINGS_FIELDS if r.meta.get(f) not in (None, "", {})]
        lines += [f"| template status | {_md(r.info.get('template_status'))} |", ""]
    return lines


def _replay(runs: Sequence[ExportedRun], configs: Sequence[str]) -> list[str]:
    lines = ["## The replay", "",
             "`steps sha256` is the sha256 of each run's (task, step, reference units), in step order: runs with "
             "the same one were scored on the same steps against the same reference.", "",
             "| config | steps sha256 | " + " | ".join(REPLAY_FIELDS) + " |",
             "|---|---|" + "---|" * len(REPLAY_FIELDS)]
    for c, r in zip(configs, runs):
        cells = " | ".join(_md(r.meta.get(f, "")) for f in REPLAY_FIELDS)
        lines.append(f"| `{c}` | `{steps_fingerprint(r)[:16]}` | {cells} |")
    return lines + [""]


def card_text(runs: Sequence[ExportedRun], configs: Sequence[str], deltas: Sequence[str]) -> str:
    """The whole README.md. `deltas`: each run's score difference from the first run, with its interval
    (the `compare` figures; "" for the first)."""
    head = yaml.safe_dump(header(runs, configs), sort_keys=False, allow_unicode=True, width=1000)
    body = [
        "# TB2-lite runs", "",
        "Per-step results of TB2-lite replays (soft command-level F1 against recorded terminal sessions), exported by "
        "the TB2-lite comparison lab. One config per run; each row is one scored step: the published harness's "
        "per-step fields, the lab's columns (`step_key`, unit counts, `equiv_f1`: not the published score), the "
        "answer's log-probabilities summarised (`lp_mean`, `lp_min`, `lp_low_tokens`), the reference's likelihood "
        "under the run's model where recorded (`ref_*`), and sampled answers in `samples`.", "",
        "Intervals are 95 % bootstrap intervals over tasks (a task's steps move together).", "",
        *_scores(runs, configs, deltas), "",
        *_settings(runs, configs), *_replay(runs, configs),
        "## Load it", "", "```python", "from datasets import load_dataset", "",
        f'steps = load_dataset("OWNER/NAME", "{configs[0]}", split="{SPLIT}")', "```", "",
        "Into the lab (the same figures, `python -m lab compare` included):", "", "```",
        "python -m lab results import hf://datasets/OWNER/NAME", "```", "",
    ]
    return f"---\n{head}---\n\n" + "\n".join(body)
