"""The app's handlers: step switching, stored/reference columns, engines, over a real Gradio server."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lab.data import load_replay
from lab.engines.registry import create_engine
from lab.runs.pipeline import run_steps
from lab.resultfiles.files import write_result_file
from lab.scoring.aggregate import aggregate_scores
from lab.scoring.metrics import score_units
from lab.settings import Settings
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def alter_units(units: list[str], variant: int) -> list[str]:
    """Deterministically damaged copies of the reference units (one of four kinds of damage)."""
    units = list(units)
    if variant == 0 and len(units) > 1:
        return units[:-1]  # a missed last command
    if variant == 1 and units:
        return [units[0] + " --verbose", *units[1:]]  # a changed first command
    if variant == 2:
        return [*units, "echo done"]  # an extra command
    return units[::-1]  # same commands, reversed order


def write_stored_run(path: Path, name: str, offset: int = 0) -> dict:
    """A result file (published schema) built from the excerpt with deliberately altered pred units.

    Metrics are the lab scorer's on the altered units, as a harness run would have stored them.
    """
    replay = load_replay(str(EXCERPT))
    engine = create_engine("reference")
    engine.load()
    rows = []
    for i, result in enumerate(run_steps(engine, replay.steps)):
        row = dict(result.per_step)
        pred = alter_units(row["ref_command_units"], (i + offset) % 4)
        row["pred_command_units"] = pred
        row.update(score_units(pred, row["ref_command_units"]).to_dict())
        row["pred_preview"] = json.dumps({"analysis": "stored", "plan": "", "commands": [
            {"keystrokes": u + "\n", "duration": 0.1} for u in pred]})
        row["raw_output"] = row["pred_preview"]
        rows.append(row)
    result = {"model": name, "model_short": name, "model_path": name, "gpu": "none", "eval_path": str(EXCERPT),
              "timestamp": "2026-01-01T00:00:00", "scoring_version": "corrected_303",
              "aggregate": aggregate_scores(rows), "per_step": rows}
    write_result_file(path, result)
    return result


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A real lab (excerpt replay, reference + one stored run) served on 127.0.0.1."""
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("ui")
    results = root / "results"
    runs = results / "runs"
    stored = write_stored_run(runs / "altered.json", "altered")
    settings = Settings(results_dir=results, runs_dir=runs, db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference", f"stored:{runs / 'altered.json'}"])
    ctx.pool.wait()
    with serve_lab(ctx) as (demo, url):
        yield ctx, demo, url, stored


def test_step_outputs_show_reference_and_stored_metrics(lab):
    from lab.ui.compare.handlers import step_outputs

    ctx, _, _, stored = lab
    key = ctx.replay.steps[2].key
    out = step_outputs(ctx, key)
    row = next(r for r in stored["per_step"] if f"{r['task_id']}/{r['step_idx']}" == key)
    assert out.step_key == key and out.task_id == key.split("/")[0]
    assert 'data-engine="reference"' in out.columns_html
    assert "<b>1.0000</b>" in out.columns_html  # reference F1
    assert f"<b>{row['command_f1']:.4f}</b>" in out.columns_html  # the stored run's F1, rescored identically
    assert out.heat_engine == "altered"  # the heatmap prefers a non-reference engine
    assert out.heat_figure is not None


def test_neighbour_keys_walk_the_dataset_and_clamp(lab):
    from lab.ui.compare.handlers import neighbour_key

    ctx = lab[0]
    keys = ctx.step_keys()
    assert neighbour_key(ctx, keys[0], -1) == keys[0]
    assert neighbour_key(ctx, keys[0], +1) == keys[1]
    assert neighbour_key(ctx, keys[-1], +1) == keys[-1]


def test_bad_spec_is_a_message_not_a_traceback(lab):
    from lab.errors import LabError

    ctx = lab[0]
    with pytest.raises(LabError) as info:
        ctx.add_engine("nosuchkind:whatever")
    assert "nosuchkind" in str(info.value)


def test_missing_stored_file_fails_in_its_column(lab, tmp_path):
    from lab.ui.compare.handlers import step_outputs

    ctx = lab[0]
    name = ctx.add_engine(f"stored:{tmp_path / 'missing.json'}", wait=True)
    try:
        out = step_outputs(ctx, ctx.step_keys()[0])
        assert 'data-state="failed"' in out.columns_html
        assert "missing.json" in out.columns_html
        assert "Traceback" not in out.columns_html
    finally:
        ctx.remove_engine(name)


def test_http_next_step_over_gradio_client(lab):
    from gradio_client import Client

    ctx, _, url, _ = lab
    client = Client(url, verbose=False)
    keys = ctx.step_keys()
    result = client.predict(keys[0], False, None, api_name="/next_step")
    task_update, step_update, context_html, columns_html, f1_html = result[:5]
    assert step_update["value"] == keys[1]
    assert "reference" in columns_html and "1.0000" in f1_html
    assert "largest gap" in f1_html


def test_http_generate_streams_columns(lab):
    from gradio_client import Client

    ctx, _, url, _ = lab
    client = Client(url, verbose=False)
    job = client.submit(ctx.step_keys()[3], False, None, api_name="/generate")
    final = job.result()
    assert 'data-state="ready"' in final[0]


def test_a_generate_paints_nothing_once_its_session_moved_on(lab, tiny_model_dir):
    """The boundary the browser's cancel cannot close: a Generate whose next output is ready just as the
    session moves to another step. Its handler checks the session's step before each output, so it paints
    nothing over the new step; the answer still lands in the cache for when the step is opened again."""
    from types import SimpleNamespace

    ctx, demo, _, _ = lab
    handlers = {f.api_name: f.fn for f in demo.fns.values() if f.api_name}
    generate, next_step = handlers["generate"], handlers["next_step"]
    name = ctx.add_engine(f"transformers:{tiny_model_dir}?max_tokens=64&name=boundary&device=cpu", wait=True)
    try:
        first = ctx.step_keys()[1]
        session = SimpleNamespace(session_hash="boundary-session")
        painted = generate(first, False, None, session)
        running = next(painted)  # the columns with the new engine running
        assert "boundary" in running[0]
        next_step(first, False, None, session)  # the session moves on before the answer comes
        assert list(painted) == []  # the rest of that Generate: nothing painted
        assert (name, first) in ctx.views  # …and its answer kept
        other = ctx.step_keys()[4]
        show_step = handlers["show_step"]
        show_step(other, False, None, session)
        again = generate(other, False, None, session)  # a Generate on the step shown paints as before
        outputs = list(again)
        assert outputs and 'data-state="ready"' in outputs[-1][0]

        # a step opened from another tab (Triage, Results: OpenInCompare) stops a Generate the same way
        third, fourth = ctx.step_keys()[6], ctx.step_keys()[7]
        show_step(third, False, None, session)
        painted = generate(third, False, None, session)
        assert "boundary" in next(painted)[0]
        opened = demo.open_in_compare([], fourth, session)
        assert opened[2]["value"] == fourth  # Compare's step box now holds the step opened there
        assert list(painted) == []
        assert (name, third) in ctx.views
    finally:
        ctx.remove_engine(name)


def test_a_generate_paints_the_engines_of_that_moment(lab, tiny_model_dir, tmp_path):
    """A run picked while a Generate streams (the run picker, an engine loaded) shows in its next paints,
    and an engine removed meanwhile leaves them: the columns are those of each moment, not those the
    Generate began with."""
    from types import SimpleNamespace

    ctx, demo, _, _ = lab
    generate = {f.api_name: f.fn for f in demo.fns.values() if f.api_name}["generate"]
    live = ctx.add_engine(f"transformers:{tiny_model_dir}?max_tokens=64&name=moment&device=cpu", wait=True)
    write_stored_run(tmp_path / "picked.json", "picked", offset=1)
    picked = None
    try:
        key = ctx.step_keys()[2]
        painted = generate(key, False, None, SimpleNamespace(session_hash="moment-session"))
        first = next(painted)[0]
        assert "moment" in first and "picked-run" not in first
        picked = ctx.add_engine(f"stored:{tmp_path / 'picked.json'}?name=picked-run", wait=True)
        later = [out[0] for out in painted]
        assert later and "picked-run" in later[-1] and "moment" in later[-1]

        again = generate(ctx.step_keys()[3], False, None, SimpleNamespace(session_hash="moment-session"))
        assert "moment" in next(again)[0]
        ctx.remove_engine(live)
        live = None
        assert all("moment" not in out[0] for out in again)
    finally:
        for name in (live, picked):
            if name is not None:
                ctx.remove_engine(name)


def test_the_switch_painted_last_decides_where_a_generate_paints(lab, tiny_model_dir, monkeypatch):
    """Two switches at once (a step picked in the step box, and `j` pressed) end in the order they end, not the
    order they began: the step painted last is the one the browser shows, and a Generate there paints. A
    Generate begun while a switch to another step is still on its way stops painting once that switch's
    paint has left."""
    import threading
    from types import SimpleNamespace

    import lab.ui.compare.handlers as compare_handlers

    ctx, demo, _, _ = lab
    handlers = {f.api_name: f.fn for f in demo.fns.values() if f.api_name}
    show_step, next_step, generate = handlers["show_step"], handlers["next_step"], handlers["generate"]
    keys = ctx.step_keys()
    held, release = {"key": None}, threading.Event()
    real = compare_handlers.step_outputs

    def slow_for_held(c, key, *args, **kwargs):
        if key is not None and key == held["key"]:
            release.wait(30)
        return real(c, key, *args, **kwargs)

    monkeypatch.setattr(compare_handlers, "step_outputs", slow_for_held)
    name = ctx.add_engine(f"transformers:{tiny_model_dir}?max_tokens=64&name=last-painted&device=cpu", wait=True)
    session = SimpleNamespace(session_hash="last-painted-session")
    try:
        # the tab's switch to keys[8] began first and ends last; `j` from keys[8] to keys[9] ends in between
        show_step(keys[7], False, None, session)
        held["key"] = keys[8]
        opening = threading.Thread(target=show_step, args=(keys[8], False, None, session))
        opening.start()
        time.sleep(0.3)
        assert next_step(keys[8], False, None, session)[1]["value"] == keys[9]
        release.set()
        opening.join(30)
        painted = list(generate(keys[8], False, None, session))  # the browser shows keys[8]: Generate paints it
        assert painted and 'data-state="ready"' in painted[-1][0]

        # a Generate pressed while `j` is on its way stops once the switch's paint has left
        release.clear()
        held["key"] = keys[10]
        moving = threading.Thread(target=next_step, args=(keys[9], False, None, session))
        moving.start()
        time.sleep(0.3)
        streaming = generate(keys[9], False, None, session)
        assert "last-painted" in next(streaming)[0]  # the step still shown: painted
        release.set()
        moving.join(30)
        assert list(streaming) == []
    finally:
        release.set()
        ctx.remove_engine(name)


def test_the_tab_shown_again_never_paints_over_a_move(lab, monkeypatch):
    """Showing the Compare tab again paints the step the page shows once more; `j` pressed as the tab opens
    moves on. That refresh is not a switch: ended after the move, or sent with the old step once the move
    has painted, it paints nothing, so the step moved to stays (seen in Chromium on a loaded machine: the
    first step's columns back over the second's). On the step shown it paints as before."""
    import threading
    from types import SimpleNamespace

    import lab.ui.compare.handlers as compare_handlers

    ctx, demo, _, _ = lab
    handlers = {f.api_name: f.fn for f in demo.fns.values() if f.api_name}
    show_step, next_step = handlers["show_step"], handlers["next_step"]
    refresh = next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "refresh_step")
    keys = ctx.step_keys()
    release = threading.Event()
    real = compare_handlers.step_outputs

    def slow_refresh(c, key, *args, **kwargs):
        if key == keys[2] and threading.current_thread().name == "refresh":
            release.wait(30)
        return real(c, key, *args, **kwargs)

    monkeypatch.setattr(compare_handlers, "step_outputs", slow_refresh)
    session = SimpleNamespace(session_hash="refresh-session")
    skip = {"__type__": "update"}  # gr.skip(): the component keeps what it shows
    try:
        show_step(keys[2], False, None, session)
        answers = []
        opening = threading.Thread(target=lambda: answers.append(refresh(keys[2], False, None, session)),
                                   name="refresh")
        opening.start()
        time.sleep(0.3)
        assert next_step(keys[2], False, None, session)[1]["value"] == keys[3]  # `j` ends first
        release.set()
        opening.join(30)
        assert answers and all(out == skip for out in answers[0])  # nothing painted over keys[3]
        assert all(out == skip for out in refresh(keys[2], True, None, session))  # sent with the old step
        again = refresh(keys[3], True, None, session)
        assert again[1]["value"] == keys[3] and 'class="lab-col"' in again[3]  # the step shown: painted
    finally:
        release.set()
