"""Public mode (SPACE_ID / LAB_PUBLIC=1): visitors are isolated (issue 9, defects 1, 2 and 4).

The lab runs as a real `python app.py` process; visitors are anonymous gradio_client sessions
talking HTTP to it on 127.0.0.1, exactly like a browser's API calls.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx
import pytest

from lab.settings import Settings
from tests.helpers_app import app_process, lab_env
from tests.paths import EXCERPT, REPO
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
N_COPIES = 8


@pytest.fixture(scope="module")
def public_lab(tmp_path_factory):
    """A public lab: the owner's `reference` engine, one stored run and 8 copies under results/runs/."""
    root = tmp_path_factory.mktemp("public-lab")
    results = make_results_dir(root)
    write_stored_run(results / "runs" / "altered.json", "altered")
    for i in range(N_COPIES):
        data = json.loads((results / "runs" / "altered.json").read_text())
        data["model"] = data["model_short"] = f"copy{i}"
        (results / "runs" / f"copy{i}.json").write_text(json.dumps(data))
    env = lab_env(LAB_PUBLIC="1", LAB_RESULTS=str(results))
    args = ["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"]
    with app_process(args, root / "app.log", env) as (url, proc):
        yield url, results, root
    log = (root / "app.log").read_text(errors="replace")
    # Gradio itself logs the input validation it refuses (gr.Error); nothing else may raise
    assert log.count("Traceback") == log.count("gradio.exceptions.Error: "), log[-3000:]


def visitor(url: str):
    from gradio_client import Client

    return Client(url, verbose=False)


def engine_names(table_html: str) -> list[str]:
    """Engine names in the Engines tab's status table."""
    import re

    return re.findall(r"<tr[^>]*><td><b>([^<]+)</b>", table_html)


def columns_of(step_out) -> str:
    """The Compare columns HTML from a /show_step answer."""
    return step_out[3]


def test_visitor_cannot_overwrite_or_add_runs_through_run_batch(public_lab):
    url, results, _ = public_lab
    runs = results / "runs"
    before = {p.name: p.read_bytes() for p in runs.iterdir()}
    html = visitor(url).predict(["reference"], [], [], [], True, "altered", api_name="/run_batch")
    assert "saved" not in (html or "")
    html = visitor(url).predict(["reference"], [], [], [], False, "brand-new", api_name="/run_batch")
    assert {p.name: p.read_bytes() for p in runs.iterdir()} == before  # nothing replaced, nothing added


def test_visitor_cannot_unload_the_owners_engine(public_lab):
    url, _, _ = public_lab
    table = visitor(url).predict("reference", api_name="/unload_engine")[0]
    assert engine_names(table) == ["reference"]
    other = visitor(url)
    assert 'data-engine="reference"' in columns_of(other.predict(None, False, None, api_name="/show_step"))


def test_visitor_engines_are_per_session_and_capped(public_lab):
    url, results, _ = public_lab
    bystander = visitor(url)
    key = bystander.predict(None, False, None, api_name="/show_step")[1]["value"]
    before = json.dumps(bystander.predict(key, False, None, api_name="/show_step"))

    greedy = visitor(url)
    table = ""
    for _ in range(60 // N_COPIES + 1):
        for i in range(N_COPIES):
            table = greedy.predict(f"stored:{results / 'runs' / f'copy{i}.json'}", api_name="/add_engine")[0]
    names = engine_names(table)
    assert names[0] == "reference" and 1 < len(names) <= 1 + 6  # the owner's + at most 6 of the visitor's
    assert str(results) not in table  # specs show as results/runs/copyN.json, never the server path
    mine = columns_of(greedy.predict(key, False, None, api_name="/show_step"))
    assert "copy0" in mine

    after = json.dumps(bystander.predict(key, False, None, api_name="/show_step"))
    assert after == before  # the bystander's columns and payload are untouched
    assert "copy0" not in after

    # the bystander cannot unload the greedy visitor's engine either
    from gradio_client.exceptions import AppError

    try:
        table = bystander.predict("copy0", api_name="/unload_engine")[0]
        assert engine_names(table) == ["reference"]
    except AppError as exc:  # Gradio refuses a name that is not among this session's choices
        assert "copy0" in str(exc)
    assert "copy0" in columns_of(greedy.predict(key, False, None, api_name="/show_step"))
    # the visitor can unload its own
    assert "copy0" not in engine_names(greedy.predict("copy0", api_name="/unload_engine")[0])


def test_upload_route_has_a_size_cap(public_lab):
    url, _, _ = public_lab
    big = httpx.post(f"{url}gradio_api/upload", files={"files": ("big.bin", b"x" * (2 * 1024 * 1024))}, timeout=60)
    assert big.status_code == 413
    small = httpx.post(f"{url}gradio_api/upload", files={"files": ("small.txt", b"hello")}, timeout=60)
    assert small.status_code == 413  # a public deployment takes no uploads at all


def test_local_upload_cap(monkeypatch):
    from lab.ui.shell.public import launch_limits

    monkeypatch.delenv("LAB_MAX_UPLOAD", raising=False)
    assert launch_limits(Settings(public=False)) == {"max_file_size": "1mb"}
    assert launch_limits(Settings(public=True))["max_file_size"] == -1
    monkeypatch.setenv("LAB_MAX_UPLOAD", "10mb")
    assert launch_limits(Settings(public=True)) == {"max_file_size": "10mb"}


def test_no_absolute_server_path_in_the_page(public_lab):
    url, results, root = public_lab
    config = httpx.get(f"{url}config", timeout=60).text
    assert str(root) not in config and str(results) not in config
    assert "does not let visitors write" not in config  # Triage builds (its derived step flags may be written)
    assert "triage-run" in config or "Triage" in config
    assert str(REPO) not in config  # not the lab's install folder either
    visitor(url).predict(None, False, None, api_name="/show_step")  # page use does not leak them later
    table = visitor(url).predict("stored:/etc/passwd", api_name="/add_engine")[0]
    assert "passwd" not in table


def test_stop_is_per_session():
    """Two sessions' Stop events are separate: pressing Stop in one never stops the other."""
    from lab.visitors import SessionEvents

    stops = SessionEvents()
    a, b = stops.get("a"), stops.get("b")
    b.set()
    assert not a.is_set() and stops.get("a") is a
    stops.end("a")
    assert a.is_set() and not stops.get("a").is_set()


def test_exports_are_swept_and_removed(tmp_path):
    """Exports live in one per-process folder; old ones are deleted when new ones are made."""
    from lab.ui.shell.exports import ExportArea
    from lab.ui.triage.handlers import _export_dir
    from lab.ui.shell.exports import EXPORTS

    area = ExportArea(max_age=60, prefix="lab-test-exports-")
    first = area.new_dir()
    (first / "slice.csv").write_text("a,b\n")
    assert area.sweep(now=time.time() + 61) == 1 and not first.exists()
    area.remove()
    assert not area._root
    leftovers = set(Path("/tmp").glob("triage-export-*"))
    made = _export_dir()
    assert made.parent == EXPORTS.root and set(Path("/tmp").glob("triage-export-*")) == leftovers
    shutil.rmtree(made)


def test_stop_from_another_session_does_not_stop_my_batch(tmp_path):
    """Owner's local lab, two browser sessions: B's Stop press during A's batch leaves A running."""
    from gradio_client import Client

    results = make_results_dir(tmp_path)
    names = ["reference"]
    args = ["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"]
    for i in range(12):  # a batch long enough for B's press to arrive while it runs (with 4 runs it ended 0.47 s
        # after the press on an idle machine, and once before the press's answer in a full parallel suite)
        write_stored_run(results / "runs" / f"altered{i}.json", f"altered{i}", offset=i)
        args += ["--engine", f"stored:{results / 'runs' / f'altered{i}.json'}"]
        names.append(f"altered{i}")
    with app_process(args, tmp_path / "app.log", lab_env()) as (url, _):
        a, b = Client(url, verbose=False), Client(url, verbose=False)
        job = a.submit(names, [], [], [], False, "", api_name="/run_batch")
        deadline = time.monotonic() + 120
        while not job.outputs() and time.monotonic() < deadline:  # A's batch has started
            time.sleep(0.05)
        b.predict(api_name="/stop_batch")
        pressed_while_running = not job.done()
        final = job.result(timeout=300)
    assert pressed_while_running, "A's batch finished before B's Stop arrived; the test proves nothing"
    assert "stopped" not in final and final.count("done · saved") == len(names), final
