"""Compare's "Samples" panel: sample N answers on all engines for the step shown, and show them."""
from __future__ import annotations

import queue
import threading
from typing import Iterator

import gradio as gr

from lab.errors import LabError
from lab.runs.samples import load_stability_defaults
from lab.workspace import EngineEntry, LabContext, LRUCache
from lab.ui.compare.samples_view import NONE, RUNNING, SampleSet, plan_sampling, render_samples, sample_engine, stored_set

MAX_UI_SAMPLES = 50


def samples_cache(ctx: LabContext) -> LRUCache:
    """(engine name, spec, step key) -> the last SampleSet sampled there (kept on the context)."""
    cache = getattr(ctx, "sample_sets", None)
    if cache is None:
        cache = LRUCache(512)
        ctx.sample_sets = cache
    return cache


def _cache_key(ctx: LabContext, entry: EngineEntry, key: str) -> tuple:
    """In public mode the visitor's session is part of the key: one visitor never sees another's samples."""
    from lab.ui.shell.session import current_session

    return (current_session() if ctx.sessions is not None else None, entry.name, entry.spec, key)


def current_sets(ctx: LabContext, key: str | None) -> list[SampleSet]:
    """What the panel shows for step `key`: each engine's last sampled set, or a stored run's samples."""
    if ctx.replay is None or not isinstance(key, str) or key not in ctx.replay.by_key:
        return []
    step, cache, threshold = ctx.replay.by_key[key], samples_cache(ctx), load_stability_defaults().pass_threshold
    sets = []
    for entry in ctx.engine_entries():
        cached = cache.get(_cache_key(ctx, entry, key))
        if cached is not None:
            sets.append(cached)
        elif entry.stored_path is not None:
            stored = stored_set(entry.name, entry.engine, step, threshold)
            if stored.state != NONE:  # its samples, or why they cannot be shown
                sets.append(stored)
    return sets


def sample_all(ctx: LabContext, key: str, n: int, temperature: float | None, top_p: float | None,
               seed: int) -> Iterator[list[SampleSet]]:
    """Sample `n` answers on every ready engine at once; yield the blocks as each engine finishes.
    Stored runs show their stored samples (a stored answer cannot be re-sampled)."""
    step, cache, threshold = ctx.replay.by_key[key], samples_cache(ctx), load_stability_defaults().pass_threshold
    entries = [e for e in ctx.engine_entries() if e.state == "ready" and e.engine is not None]
    sets: dict[str, SampleSet] = {}
    todo = []
    for entry in entries:
        if entry.engine.stored_run:  # a stored answer cannot be re-sampled
            sets[entry.name] = stored_set(entry.name, entry.engine, step, threshold)
        else:
            sets[entry.name] = SampleSet(entry.name, RUNNING)
            todo.append(entry)
    yield [sets[e.name] for e in entries]
    done: queue.Queue = queue.Queue()
    for entry in todo:
        sampling = plan_sampling(entry.engine, temperature, top_p)

        def work(entry=entry, sampling=sampling) -> None:
            done.put((entry, sample_engine(entry.name, entry.engine, step, n, sampling, seed, threshold)))

        threading.Thread(target=work, name=f"lab-sample-{entry.name}", daemon=True).start()
    for _ in todo:
        entry, result = done.get()
        sets[entry.name] = result
        if result.state != "error":
            cache.put(_cache_key(ctx, entry, key), result)
        yield [sets[e.name] for e in entries]


def _optional_number(name: str, value: object) -> float | None:
    """A text box's number; empty means None (the engine's preset)."""
    if value is None or isinstance(value, str) and not value.strip():
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise LabError(f"{name}: '{value}' is not a number; give one or leave it empty for each engine's preset") from None


def check_inputs(n: float | None, temperature: object, top_p: object, seed: float | None) -> tuple:
    """(n, temperature, top_p, seed) from the page, or LabError naming the bad field."""
    temperature, top_p = _optional_number("temperature", temperature), _optional_number("top_p", top_p)
    if n is None or not 1 <= int(n) <= MAX_UI_SAMPLES:
        raise LabError(f"samples N: give a number from 1 to {MAX_UI_SAMPLES}")
    if temperature is not None and not 0 <= float(temperature) <= 5:
        raise LabError("temperature: give a value from 0 to 5, or leave it empty for each engine's preset")
    if top_p is not None and not 0 < float(top_p) <= 1:
        raise LabError("top_p: give a value in (0, 1], or leave it empty for each engine's preset")
    return int(n), None if temperature is None else float(temperature), None if top_p is None else float(top_p), \
        int(seed or 0)


def build_samples_panel(ctx: LabContext, step: gr.Dropdown) -> None:
    """Lay out the panel (inside Compare's tab) and wire it to the step picker."""
    defaults = load_stability_defaults()
    with gr.Accordion("Samples: is this step's answer stable?", open=True, elem_id="lab-samples-panel"):
        with gr.Row(equal_height=True):
            n = gr.Number(defaults.samples, label="samples N", precision=0, minimum=1, maximum=MAX_UI_SAMPLES,
                          elem_id="lab-samples-n", scale=1)
            # text boxes, not numbers: empty must mean "the preset's" (an empty gr.Number sends 0)
            temperature = gr.Textbox("", label=f"temperature (empty: the preset's; greedy presets "
                                     f"{defaults.fallback_temperature:g})", placeholder="preset",
                                     elem_id="lab-samples-temperature", scale=2)
            top_p = gr.Textbox("", label=f"top_p (empty: the preset's; greedy presets {defaults.fallback_top_p:g})",
                               placeholder="preset", elem_id="lab-samples-top-p", scale=2)
            seed = gr.Number(defaults.seed, label="seed of sample 0", precision=0, elem_id="lab-samples-seed", scale=1)
            go = gr.Button("Sample N on all engines", elem_id="lab-sample", scale=1)
        first = ctx.replay.steps[0].key if ctx.replay and ctx.replay.steps else None
        panel = gr.HTML(render_samples([]), elem_id="lab-samples")
    from gradio.context import Context

    if Context.root_block is not None:  # filled at page load, for this session (no API name)
        Context.root_block.load(lambda: render_samples(current_sets(ctx, first)), None, panel,
                                api_visibility="private", show_progress="hidden")

    def on_step(key: str | None) -> str:
        return render_samples(current_sets(ctx, key))

    def on_sample(key: str | None, n_value, temp_value, top_p_value, seed_value):
        if ctx.replay is None or not isinstance(key, str) or key not in ctx.replay.by_key:
            gr.Warning("Pick a step first (no replay data loaded).")
            yield gr.update()
            return
        try:
            count, temp, p, first = check_inputs(n_value, temp_value, top_p_value, seed_value)
        except (LabError, TypeError, ValueError) as exc:
            gr.Warning(str(exc))
            yield gr.update()
            return
        ctx.visitor_used()  # sampling is a generation: a visitor's engines are in use
        if not any(e.state == "ready" for e in ctx.engine_entries()):
            gr.Info("No ready engine: add one in the Engines tab.")
        for sets in sample_all(ctx, key, count, temp, p, first):
            yield render_samples(sets)

    step.change(on_step, step, panel, show_progress="hidden", api_visibility="private")
    go.click(on_sample, [step, n, temperature, top_p, seed], panel, show_progress="minimal", api_name="sample_step")
