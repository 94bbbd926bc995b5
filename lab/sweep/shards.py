"""Split one engine's steps into shards and merge the shard results into the unsharded run (as the harness does)."""
from __future__ import annotations

from collections import Counter

from lab.prompts.guard import context_stats
from lab.scoring.aggregate import aggregate_scores
from lab.scoring.stability import stability_aggregate

SHARD_FIELDS = ("num_shards", "shard_index", "total_input_steps")


def split(n_steps: int, shards: int) -> list[range]:
    """Contiguous index ranges, sizes differing by at most one (empty shards dropped)."""
    size, extra = divmod(n_steps, shards)
    out, start = [], 0
    for i in range(min(shards, n_steps)):  # past n_steps every shard is empty
        stop = start + size + (1 if i < extra else 0)
        if stop > start:
            out.append(range(start, stop))
        start = stop
    return out


def shard_fields(index: int, count: int, total: int) -> dict:
    return {"num_shards": count, "shard_index": index, "total_input_steps": total}


def shard_stem(stem: str, index: int) -> str:
    return f"{stem}-shard{index:02d}"


def merge(parts: list[dict], scorer: str, samples: int, pass_threshold: float,
          lengths: list[list[int | None]] | None = None) -> dict:
    """One result from its shards (in shard order): steps concatenated, aggregate, timings and context
    statistics recomputed (`lengths`: each shard's prompt token counts, in the same order as `parts`)."""
    order = sorted(range(len(parts)), key=lambda i: parts[i]["shard_index"])
    parts = [parts[i] for i in order]
    merged = {k: v for k, v in parts[0].items() if k not in SHARD_FIELDS}
    per_step = [row for p in parts for row in p["per_step"]]
    gen = round(sum(float(p.get("gen_time_sec") or 0.0) for p in parts), 1)
    counts: Counter = Counter()
    for p in parts:
        counts.update((p.get("prompt_template") or {}).get("template_status_counts") or {})
    template = dict(parts[0].get("prompt_template") or {})
    if counts:
        template["template_status_counts"] = dict(counts)
    stats = template.get("context_stats")
    every = [n for i in order for n in (lengths or [[]] * len(parts))[i]]
    if stats and every and all(n is not None for n in every):
        rows = sum(int(p["prompt_template"]["context_stats"].get("messages_rows", 0)) for p in parts)
        template["context_stats"] = context_stats(every, stats["max_model_len"], stats["max_tokens"], rows)
    selections = [p.get("selection") for p in parts]
    if all(isinstance(s, dict) and isinstance(s.get("steps"), int) for s in selections):
        # each shard's selection counts the steps it was given; the run's, all of them
        merged["selection"] = {**selections[0], "steps": sum(s["steps"] for s in selections)}
    merged.update(
        per_step=per_step, gen_time_sec=gen, avg_sec_per_step=round(gen / max(len(per_step), 1), 3),
        prompt_template=template,
        aggregate={**aggregate_scores(per_step, scorer),
                   **(stability_aggregate(per_step, pass_threshold) if samples > 1 else {})},
    )
    return merged


def merge_reference(parts: list[dict]) -> dict:
    """One reference-likelihood run from its shards' runs (in shard order): steps concatenated, the
    aggregate recomputed as `score-reference` computes it over all of them."""
    from lab.runs.reference_run import aggregate

    per_step = [row for p in parts for row in p["per_step"]]
    merged = {k: v for k, v in parts[0].items() if k not in SHARD_FIELDS}
    return {**merged, "per_step": per_step, "aggregate": aggregate(per_step)}
