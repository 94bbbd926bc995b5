"""Realistic synthetic TB2-lite result files, for benchmarks (rescoring, the DuckDB store).

`make_results(n_runs, n_steps, seed)` builds result dicts in the published schema (SPEC §8):
one shared set of reference steps (shell commands plus heredoc-heavy file writes, ~38 units
per step on average, some with 100+), and per run predictions derived from the references by
perturbation (dropped, altered, repeated and extra units, other flags, invalid-JSON steps with
no units). Runs fall into clusters of "similar models" that often produce the very same units,
as real checkpoints of one family do. Everything is deterministic from `seed`.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

from lab.scoring import aggregate_scores, score_batch, task_complete_fields

SOURCE_GROUPS = (
    "code", "data_processing", "data_querying", "data_science", "debugging",
    "dependency_management", "file_operations", "math", "model_training",
    "scientific_computing", "security", "software_engineering", "swe", "system_administration",
)
DIRS = ("/app", "/app/output", "/app/src", "/app/data", "/app/myproject", "/tmp/work", "/var/log", "/etc/nginx",
        "build", "src/lib", "tests", "/opt/service", "/srv/data/raw", "/home/user/project")
FILES = ("main.py", "config.yaml", "CMakeLists.txt", "requirements.txt", "analysis.txt", "validation.json",
         "build.sh", "server.log", "data.csv", "Makefile", "report.md", "app.js", "schema.sql", "notes.txt",
         "train.py", "utils.c", "parser.h", "docker-compose.yml", "setup.cfg", "results.json")
PACKAGES = ("numpy", "pandas", "pyyaml", "requests", "flask", "scikit-learn", "torch", "jq", "cmake",
            "gcc", "sqlite3", "nginx", "pytest", "matplotlib", "openssl")
WORDS = ("value", "count", "total", "result", "items", "config", "path", "data", "row", "key", "name",
         "score", "index", "buffer", "line", "entry", "status", "error", "output", "input")
COMMANDS = (
    "ls -la", "ls -la {dir}", "cd {dir}", "pwd", "cat {dir}/{file}", "head -{n} {dir}/{file}",
    "tail -{n} {dir}/{file}", "wc -l {dir}/{file}", "mkdir -p {dir}", "rm -rf {dir}/build",
    "python3 {file}", "python3 -m pytest {dir} -q", "pip3 install {pkg}", "pip3 list | grep -i {pkg}",
    "apt-get install -y {pkg}", "which {pkg}", "{pkg} --version", "chmod +x {dir}/{file}",
    "grep -rn '{word}' {dir}", "grep -c {word} {dir}/{file}", "find {dir} -name '*.{ext}' | head -{n}",
    "find . -type f -name '*.{ext}' -o -name '*.h' | head -20", "cp {dir}/{file} {dir}/{file}.bak",
    "mv {file} {file}.old", "sed -i 's/{word}/{word2}/g' {dir}/{file}", "awk -F, '{{print ${n}}}' {dir}/{file}",
    "sort {dir}/{file} | uniq -c | sort -rn | head", "jq '.{word}' {dir}/{file}", "cmake -S . -B build",
    "cmake --build build --parallel 2 2>&1 | tail -20", "make -j2 2>&1 | tail -{n}", "echo $?",
    "./build.sh --clean --test", "git status", "git diff --stat", "git log --oneline | head -{n}",
    "curl -s http://localhost:8080/{word}", "systemctl status {pkg}", "ps aux | grep {pkg}",
    "export {upper}={word}", "sqlite3 {dir}/db.sqlite '.tables'", "du -sh {dir}", "df -h",
    "tar -czf {word}.tar.gz {dir}", "diff {dir}/{file} {dir}/{file}.bak", "stat {dir}/{file}",
    "# Check that the {word} file exists", "# Verify the {word} output", "C-c", "",
    "python3 -c \"import {pkg}; print({pkg}.__version__)\"", "timeout 5 {dir}/build.sh 2>&1 | head -30",
    "test -f {dir}/{file} && echo ok || echo missing",
)
CODE_LINES = (
    "import {pkg}", "from pathlib import Path", "def load_{word}(path):", "    with open(path) as fh:",
    "        return json.load(fh)", "    {word} = {word2}.get('{word}', {n})", "    for {word} in {word2}s:",
    "        if {word} is None:", "            continue", "        {word2}.append({word})",
    "    return {word2}", "if __name__ == '__main__':", "    main()", "class {upper_word}:",
    "    def __init__(self, {word}):", "        self.{word} = {word}", "    raise ValueError(f'bad {word}: {{{word}}}')",
    "    print(f'{word}: {{{word2}}}')", "# {word} handling", "{word} = []", "    total += {word}[{n}]",
    "cmake_minimum_required(VERSION 3.{n})", "project({word} VERSION 1.0.0 LANGUAGES C CXX)",
    "add_library({word} STATIC src/{word}.c)", "target_link_libraries({word} PRIVATE {word2})",
    "if(NOT CMAKE_BUILD_TYPE)", "endif()", "{word}: {n}", "  - name: {word}", "    enabled: true",
    "[{word}]", "{word}_{word2} = {n}", "#!/bin/bash", "set -euo pipefail", "echo \"{word} done\"",
)
PROSE_LINES = (
    "The {word} step reads the {word2} file and writes a summary.",
    "## {upper_word} analysis", "- The {word} is computed from the {word2} column.",
    "We'll keep the {word} as it is because it doesn't change the {word2}.",
    "Note: the {word} must be valid before the {word2} runs.",
    "1. Fixed the {word} path in the build.", "2. Added the missing {word2} dependency.",
    "This file lists every {word} and its {word2}.", "Total {word}s: {n}",
    "The script's {word} check is correct.", "It's 'fast' and 'safe' for the {word} case.",
)
EXTENSIONS = ("py", "c", "cpp", "h", "json", "yaml", "log", "csv", "md")
MODELS = (
    ("LLM-OS-Models/Qwen3.5-2B-Terminal-SFT", "qwen35-2b-sft"),
    ("LLM-OS-Models/Qwen3.5-0.8B-Terminal-GRPO", "qwen35-08b-grpo"),
    ("LLM-OS-Models/LFM2.5-8B-A1B-Terminal-SFT", "lfm25-8b-a1b-sft"),
    ("LLM-OS-Models/gemma-4-E4B-it-Terminal-SFT", "gemma4-e4b-sft"),
    ("LLM-OS-Models/Qwen3.5-9B-Terminal-DPPO", "qwen35-9b-dppo"),
    ("LLM-OS-Models/LFM2-24B-A2B-Terminal-SFT", "lfm2-24b-a2b-sft"),
    ("Qwen/Qwen3.5-4B", "qwen35-4b-base"),
    ("LLM-OS-Models/Nemotron-Terminal-8B-SFT", "nemotron-8b-sft"),
)
N_TASKS = 50
PREVIEW_CHARS = 1200


@dataclass(frozen=True)
class RefStep:
    """One shared reference step."""

    task_id: str
    sample_idx: int
    step_idx: int
    source_group: str
    units: tuple[str, ...]
    task_complete: bool


def _fill(template: str, rng: random.Random) -> str:
    word, word2 = rng.choice(WORDS), rng.choice(WORDS)
    return template.format(
        dir=rng.choice(DIRS), file=rng.choice(FILES), pkg=rng.choice(PACKAGES), word=word, word2=word2,
        n=rng.randint(1, 40), ext=rng.choice(EXTENSIONS), upper=word.upper(), upper_word=word.title(),
    )


def _heredoc(rng: random.Random, n_lines: int) -> list[str]:
    target = f"{rng.choice(DIRS)}/{rng.choice(FILES)}"
    body_pool = PROSE_LINES if rng.random() < 0.35 else CODE_LINES
    body = [_fill(rng.choice(body_pool), rng) for _ in range(n_lines)]
    return [f"cat > {target} << 'EOF'", *body, "EOF"]


def _ref_units(rng: random.Random) -> list[str]:
    units: list[str] = []
    if rng.random() < 0.39:
        size = rng.choice((rng.randint(20, 70), rng.randint(20, 90), rng.randint(100, 180)))
        units.extend(_fill(rng.choice(COMMANDS), rng) or "C-c" for _ in range(rng.randint(0, 3)))
        units.extend(_heredoc(rng, size))
    for _ in range(rng.randint(1, 12)):
        unit = _fill(rng.choice(COMMANDS), rng)
        units.append(unit or "<WAIT>")
    return units


def make_references(n_steps: int = 303, seed: int = 0) -> list[RefStep]:
    """`n_steps` reference steps over 50 tasks, step indices with gaps, 14 source groups."""
    rng = random.Random(f"tb2lite-refs:{seed}")
    per_task = [n_steps // N_TASKS + (1 if i < n_steps % N_TASKS else 0) for i in range(N_TASKS)]
    refs: list[RefStep] = []
    for task, count in enumerate(per_task):
        group = SOURCE_GROUPS[rng.randrange(len(SOURCE_GROUPS))]
        step_idx = -1
        for k in range(count):
            step_idx += 1 if rng.random() < 0.8 else 2  # skipped turns leave gaps (SPEC §1)
            refs.append(RefStep(f"task-{task:03d}", task, step_idx, group, tuple(_ref_units(rng)),
                                task_complete=k == count - 1 and rng.random() < 0.5))
    return refs


def _alter(unit: str, variant: int) -> str:
    """A deterministic near-miss of a unit (other path, flag, word or quoting)."""
    rng = random.Random(f"{unit}:{variant}")
    kind = rng.randrange(5)
    if kind == 0:
        return f"{unit} {rng.choice(('2>&1 | tail -20', '| head -20', '-v', '2>/dev/null', '|| true'))}"
    if kind == 1:
        return unit.replace(rng.choice(DIRS), rng.choice(DIRS), 1) if "/" in unit else f"{unit} {rng.choice(DIRS)}"
    if kind == 2:
        words = unit.split()
        words[rng.randrange(len(words))] = rng.choice(WORDS)
        return " ".join(words)
    if kind == 3:
        return unit.replace("'", '"') if "'" in unit else unit.upper()
    return f"cd {rng.choice(DIRS)}  &&  {unit}"


def _predict(ref: RefStep, rng: random.Random, quality: float) -> list[str]:
    units: list[str] = []
    for unit in ref.units:
        roll = rng.random()
        if roll < quality:
            units.append(unit)
        elif roll < quality + (1 - quality) * 0.8:
            units.append(_alter(unit, rng.randrange(3)))
        if rng.random() < 0.03:
            units.append(unit)  # repetition (max-based matching rewards it, SPEC §10.2)
    for _ in range(rng.choice((0, 0, 1, 2, 4))):
        units.insert(rng.randint(0, len(units)), _fill(rng.choice(COMMANDS), rng) or "<WAIT>")
    return units


def _preview(units: list[str], valid: bool, task_complete: bool, rng: random.Random) -> str:
    if not valid:
        return ("<think>Let me look at the {files} first.</think>\nI will run `ls -la` and then inspect "
                "the output. The build failed because the sources are missing.").replace("{files}", rng.choice(FILES))
    action = {
        "analysis": f"We need to inspect the {rng.choice(WORDS)} before changing anything.",
        "plan": "1. Look at the files. 2. Fix the problem. 3. Verify.",
        "commands": [{"keystrokes": u + "\n", "duration": 0.1} for u in units],
        "task_complete": task_complete,
    }
    return json.dumps(action, indent=2)[:PREVIEW_CHARS]


def _run_identity(run_index: int) -> tuple[str, str, float, float, int]:
    family = MODELS[run_index % len(MODELS)]
    checkpoint = 100 * (run_index // len(MODELS) + 1)
    rng = random.Random(f"tb2lite-run:{run_index}")
    quality = 0.3 + 0.55 * rng.random()
    valid_rate = 0.7 + 0.28 * rng.random()
    return family[0], f"{family[1]}-checkpoint-{checkpoint}", quality, valid_rate, checkpoint


def _per_step_rows(run_index: int, refs: list[RefStep], seed: int) -> list[dict]:
    model_id, _, quality, valid_rate, _ = _run_identity(run_index)
    cluster = run_index % len(MODELS)
    rows = []
    for ref in refs:
        key = f"{seed}:{ref.task_id}/{ref.step_idx}"
        own = random.Random(f"{key}:run{run_index}")
        # Similar models (one family) usually give the same answer: share the cluster's draw.
        shared = own.random() < 0.6
        rng = random.Random(f"{key}:cluster{cluster}") if shared else own
        valid = rng.random() < valid_rate
        pred = _predict(ref, rng, quality) if valid else []
        pred_tc = (rng.random() < 0.5 if ref.task_complete else rng.random() < 0.05) if valid else None
        rows.append({
            "task_id": ref.task_id, "sample_idx": ref.sample_idx, "step_idx": ref.step_idx,
            "source_group": ref.source_group,
            "bucket": "early" if ref.step_idx <= 1 else "mid" if ref.step_idx <= 4 else "late",
            "valid_json": valid, "has_analysis": valid, "has_plan": valid,
            **task_complete_fields(pred_tc, ref.task_complete, "corrected"),
            "ref_command_units": list(ref.units), "pred_command_units": pred,
            "pred_preview": _preview(pred, valid, bool(pred_tc), rng),
            "finish_reason": "stop" if valid or rng.random() < 0.7 else "length",
            "stop_reason": None, "token_ids_preview": [rng.randrange(150000) for _ in range(8)],
        })
    return rows


def _result(run_index: int, rows: list[dict]) -> dict:
    model_id, short, _, _, checkpoint = _run_identity(run_index)
    gen = round(len(rows) * (0.05 + 0.001 * (run_index % 40)), 1)
    return {
        "model": short, "model_path": model_id, "lora_path": None, "lora_name": None,
        "model_short": short, "gpu": "synthetic", "eval_path": "synthetic",
        "timestamp": f"2026-06-{1 + run_index % 28:02d}T{run_index % 24:02d}:00:00.000000",
        "load_time_sec": round(40 + run_index % 60 + 0.5, 1), "gen_time_sec": gen,
        "avg_sec_per_step": round(gen / max(len(rows), 1), 3),
        "sampling": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024, "checkpoint": checkpoint},
        "prompt_template": {"template_status": "chat_template", "rank_eligible": True,
                            "template_status_counts": {"chat_template": len(rows)}},
        "aggregate": aggregate_scores(rows, "corrected"), "per_step": rows,
    }


def _score_rows(rows: list[dict]) -> None:
    pairs = [(r["pred_command_units"], r["ref_command_units"]) for r in rows]
    for row, metrics in zip(rows, score_batch(pairs, "corrected")):
        row.update(metrics.to_dict())


def make_result(run_index: int, n_steps: int = 303, seed: int = 0) -> dict:
    """One synthetic run (scored with the corrected scorer, aggregate included)."""
    rows = _per_step_rows(run_index, make_references(n_steps, seed), seed)
    _score_rows(rows)
    return _result(run_index, rows)


def make_results(n_runs: int = 100, n_steps: int = 303, seed: int = 0) -> list[dict]:
    """`n_runs` synthetic runs over the same `n_steps` references, scored in one batch."""
    refs = make_references(n_steps, seed)
    all_rows = [_per_step_rows(i, refs, seed) for i in range(n_runs)]
    _score_rows([row for rows in all_rows for row in rows])
    return [_result(i, rows) for i, rows in enumerate(all_rows)]
