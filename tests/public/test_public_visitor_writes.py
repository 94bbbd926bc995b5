"""Every write a visitor of a real public lab can reach over HTTP, under each of the owner's switches (issue: with
LAB_PUBLIC_ANNOTATIONS=1 a visitor could Place and Take out runs in the owner's series, lasting beyond the app).
The app's writing events are found in its /config by the controls that start them (Triage's Add tag, Save
slice, Place and Take out; the what-if API), called as a browser calls them, and the store is read once the
app has stopped: only what the switch in force opens is written."""
from __future__ import annotations

import duckdb
import httpx
import pytest

from lab.security.visitor_writes import write_kinds
from tests.helpers_app import app_process, lab_env
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.public.test_public_hostile import private_call
from tests.public.test_public_mode import visitor
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]
KEY = "task-000/2"
# the control (elem_id) that starts each writing event, and the kind of write it makes
CONTROLS = {"triage-add-tag": "annotations", "triage-save-slice": "slices", "lab-series-place": "series",
            "lab-series-leave": "series"}
CONFIGS = {"none": {}, "annotations": {"LAB_PUBLIC_ANNOTATIONS": "1"}, "series": {"LAB_PUBLIC_SERIES": "1"},
           "whatif": {"LAB_WHATIF_SHARED": "1"}}
OPENS = {"none": set(), "annotations": {"annotations", "slices"}, "series": {"series"}, "whatif": {"whatif"}}


class Page:
    """One visitor's browser session: the app's config, and its events called by the controls that start them."""

    def __init__(self, url: str, session: str) -> None:
        self.url, self.session = url, session
        self.config = httpx.get(f"{url}config", timeout=30).json()
        self.ids = {(c.get("props") or {}).get("elem_id"): c["id"] for c in self.config["components"]}
        self.props = {c["id"]: c.get("props") or {} for c in self.config["components"]}

    def event(self, elem_id: str, trigger: str = "click") -> tuple[int, dict]:
        target = self.ids[elem_id]
        return next((i, d) for i, d in enumerate(self.config["dependencies"]) if [target, trigger] in d["targets"])

    def call(self, elem_id: str, values: dict[str, object], trigger: str = "click",
             event_data: dict | None = None) -> tuple[dict, list[str]]:
        """Call the event: each input its value in `values` (by elem_id), else the component's own value."""
        index, dep = self.event(elem_id, trigger)
        by_id = {self.ids[k]: v for k, v in values.items()}
        data = [by_id.get(i, self.props[i].get("value")) for i in dep["inputs"]]
        messages = private_call(self.url, index, data, self.ids[elem_id], self.session, event_data)
        logs = [m.get("log", "") for m in messages if m.get("msg") == "log"]
        return messages[-1], logs


def owner_store(root):
    """A results folder whose owner placed a run in a series, tagged a step and saved a slice."""
    from lab.store.opening import open_store
    from lab.store.series_members import join_series
    from lab.triage import add_annotation, save_slice
    from lab.triage.slices import SliceSpec

    results = make_results_dir(root)
    for name in ("owner-a", "owner-b"):
        write_stored_run(results / "runs" / f"{name}.json", name)
    store = open_store(results / "lab.duckdb", results)
    run_id = store.scalar("SELECT run_id FROM runs WHERE display_name = 'owner-a'")
    join_series(store, run_id, "owner series", 3)
    add_annotation(store, run_id, KEY, "owner-tag")
    save_slice(store, "owner slice", SliceSpec())
    store.close()
    return results, run_id


def contents(results) -> dict[str, object]:
    con = duckdb.connect(str(results / "lab.duckdb"), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return {
            "series": con.execute("SELECT run_id, series, x FROM series_members ORDER BY run_id").fetchall(),
            "annotations": con.execute("SELECT tag FROM annotations ORDER BY tag").fetchall(),
            "slices": con.execute("SELECT name FROM saved_slices ORDER BY name").fetchall(),
            "whatif": con.execute("SELECT count(*) FROM whatif_edits").fetchone()[0] if "whatif_edits" in tables else 0,
        }
    finally:
        con.close()


@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_visitor_write_needs_its_own_switch(tmp_path, config):
    assert set(CONTROLS.values()) | {"whatif"} == set(write_kinds())  # every kind of visitor write is tried
    results, run_id = owner_store(tmp_path)
    before = contents(results)
    env = lab_env(LAB_PUBLIC="1", LAB_RESULTS=str(results), **CONFIGS[config])
    refusals: dict[str, list[str]] = {}
    with app_process(["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"],
                     tmp_path / "app.log", env, timeout=300) as (url, _):
        page = Page(url, f"hostile-{config}")
        done, _ = page.call("triage-apply", {"triage-runs": [run_id]})  # fills the page's table
        assert done.get("success"), done
        page.call("triage-table", {}, trigger="select", event_data={"index": [0, 0], "value": run_id,
                                                                      "row_value": [], "col_value": []})
        attempts = {
            "triage-add-tag": {"triage-tag": "visitor-tag", "triage-note": "visitor note"},
            "triage-save-slice": {"triage-slice-name": "visitor slice"},
            "lab-series-place": {"lab-series-run": run_id, "lab-series-name": "visitor series", "lab-series-at": 1},
            "lab-series-leave": {"lab-series-run": run_id},
        }
        for control, values in attempts.items():
            done, logs = page.call(control, values)
            assert done.get("success"), (control, done)
            refusals[control] = [line for line in logs if "does not let visitors" in line]
        guest = visitor(url)
        job = guest.submit(KEY, "screen", "visitor edit", "", False, api_name="/whatif_run")
        job.result(timeout=120)
    after = contents(results)
    opened = OPENS[config]
    for control, kind in CONTROLS.items():
        if kind in opened:
            assert not refusals[control], (control, refusals[control])
        else:
            switch = write_kinds()[kind].switch
            assert any(f"{switch}=1" in line for line in refusals[control]), (control, refusals[control])
            assert after[kind] == before[kind], (control, after[kind])
    assert (after["whatif"] > 0) == ("whatif" in opened)  # a what-if reaches the shared store only when opened
    if "annotations" in opened:
        assert ("visitor-tag",) in after["annotations"] and ("visitor slice",) in after["slices"]
    if "series" in opened:
        assert after["series"] == []  # placed, then taken out: the owner's switch let visitors do both
    else:
        assert after["series"] == [(run_id, "owner series", 3)]  # the owner's placement outlives every visitor
    log = (tmp_path / "app.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
