"""What `python -m lab training status` shows: per checkpoint, which evaluations it has and of what coverage
(the subset of tasks, the whole selection), their scores side by side and never ranked together, the series
judgement on the subset (P(best), ruled out or kept), and the worker's state."""
from __future__ import annotations

import time

from lab.training.jobs import FINISHED, JobBook, finish_command
from lab.training.worker_process import pid_alive


def _score(job) -> float | None:
    return next((v for k, v in (job.metrics or {}).items() if k.endswith("/score")), None)


def status_rows(book: JobBook) -> list[dict]:
    """One row per job: checkpoint, coverage, status, score, seconds, files, why."""
    plan = book.plan()
    subset = plan.get("subset") or {}
    coverage = {"save": "all selected steps", "full": "all selected steps",
                "subset": f"subset: {subset.get('k')} of {subset.get('of_tasks')} tasks ({subset.get('steps')} of "
                          f"{subset.get('of_steps')} steps)"}
    return [{"checkpoint": j.step, "coverage": coverage.get(j.kind, j.kind),
             "status": j.status, "score": _score(j), "seconds": j.seconds, "attempts": j.attempts,
             "result": j.result_path, "reference": j.reference_path, "why": j.reason} for j in book.jobs()]


def _judged(book: JobBook) -> dict[int, str]:
    judgement = book.judgement() or {}
    out = {}
    for step, best, p in zip(judgement.get("steps", []), judgement.get("rank_best", []), judgement.get("p_best", [])):
        chance = f"P(best) {p:.2f}" if isinstance(p, (int, float)) else "P(best) —"
        out[step] = f"{'kept' if step in judgement.get('finalists', []) else 'ruled out'}, {chance}"
    return out


def status_text(book: JobBook) -> str:
    """The table (module docstring) and a line on the worker and what is left."""
    plan = book.plan()
    jobs = book.jobs()
    judged = _judged(book)
    by_step: dict[int, dict[str, object]] = {}
    for job in jobs:
        by_step.setdefault(job.step, {})[job.kind] = job
    subset = plan.get("subset")
    head = f"series {plan.get('series')}: {len(by_step)} checkpoint(s)"
    if subset:
        head += (f"; subset {subset['k']} of {subset['of_tasks']} tasks ({subset['steps']} of {subset['of_steps']} "
                 "steps), the whole selection for the checkpoints the judgement keeps; a subset score is never ranked "
                 "against a whole one")
    lines = [head, f"{'checkpoint':>12}  {'subset score':>12}  {'whole score':>11}  judgement on the subset"]
    for step, kinds in sorted(by_step.items()):
        part = kinds.get("subset")
        whole = kinds.get("full") or kinds.get("save")
        lines.append(f"{step:>12}  {_cell(part):>12}  {_cell(whole):>11}  {judged.get(step, '')}")
    problems = [j for j in jobs if j.status in ("failed", "skipped")]
    lines += [f"  {j.label}: {j.status}: {j.reason}" for j in problems]
    beat = book.worker() or {}
    if not beat.get("exited") and pid_alive(beat.get("pid")) and beat.get("at") and time.time() - float(beat["at"]) < 60:
        on = beat.get("job") or "nothing"
        lines.append(f"worker pid {beat['pid']} is running (on job {on}); log: {book.log_path}")
    left = [j for j in jobs if j.status not in FINISHED]
    if left:
        lines.append(f"{len(left)} evaluation(s) left: {finish_command(book.folder)}")
    return "\n".join(lines)


def _cell(job) -> str:
    if job is None:
        return "—"
    score = _score(job)
    if job.status == "done" and isinstance(score, (int, float)):
        return f"{score:.2f}"
    return job.status
