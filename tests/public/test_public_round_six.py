"""Hostile round six (issue 55 items 2 and 6, issue 51, issue 56) against one real `python app.py` in public mode
(LAB_PUBLIC=1): exports hand a link with a token and a file name, never a path on the server, and the link
dies with the export; a `nan` (or a string, or an infinity) in a number field is refused in one line naming
the field; Triage's baseline vs candidate shows the settings line and, on the excerpt's runs, what would give
an interval; docs/space.md names the endpoints the app lists."""
from __future__ import annotations

import json
import re
import time

import httpx
import pytest

from lab.runs.demo import build_demo
from tests.helpers_app import app_process, lab_env
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT, REPO
from tests.public.test_public_hostile import private_call
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]
EXPORT_AGE_S = 4


@pytest.fixture(scope="module")
def lab6(tmp_path_factory):
    """(url, root, run ids): a public lab holding the demonstration's synthetic pair and two excerpt runs."""
    root = tmp_path_factory.mktemp("round-six")
    results = make_results_dir(root)
    pair = build_demo(results)
    write_stored_run(results / "runs" / "small-a.json", "small-a")
    write_stored_run(results / "runs" / "small-b.json", "small-b", offset=1)
    (root / "tmp").mkdir()
    env = lab_env(LAB_PUBLIC="1", LAB_RESULTS=str(results), LAB_EXPORT_MAX_AGE_S=str(EXPORT_AGE_S),
                  TMPDIR=str(root / "tmp"), GRADIO_TEMP_DIR=str(root / "tmp" / "gradio"), HF_HUB_OFFLINE="1")
    with app_process(["--results", str(results), "--replay", str(EXCERPT)], root / "app.log", env, timeout=300) as (url, _):
        yield url, root, pair
    log = (root / "app.log").read_text(errors="replace")
    assert log.count("Traceback") == log.count("gradio.exceptions.Error: "), log[-3000:]


def config_of(url: str) -> dict:
    return httpx.get(f"{url}config", timeout=30).json()


def element(config: dict, elem_id: str) -> int:
    return next(c["id"] for c in config["components"] if (c.get("props") or {}).get("elem_id") == elem_id)


def defaults(config: dict, ids: list[int]) -> list:
    by_id = {c["id"]: c for c in config["components"]}
    return [(by_id[i].get("props") or {}).get("value") for i in ids]


def event_of(config: dict, elem_id: str, trigger: str = "click") -> tuple[int, dict, int]:
    button = element(config, elem_id)
    i, dep = next((i, d) for i, d in enumerate(config["dependencies"]) if [button, trigger] in d.get("targets", []))
    return i, dep, button


def api_call(url: str, api: str, data: list) -> str:
    """The raw answer of a named endpoint, as its event stream carries it."""
    event = httpx.post(f"{url}gradio_api/call/{api}", json={"data": data}, timeout=30).json()["event_id"]
    return httpx.get(f"{url}gradio_api/call/{api}/{event}", timeout=120).text


def test_the_whatif_export_is_a_link_with_a_token_and_a_name(lab6):
    url, root, _ = lab6
    raw = api_call(url, "whatif_export", [])
    assert "event: complete" in raw, raw
    assert str(root) not in raw and "/tmp" not in raw and "gradio" not in raw.split("/lab-exports/")[0].lower()
    href = re.search(r'href=\\"(/lab-exports/[^"\\]+)\\"', raw).group(1)
    assert re.fullmatch(r"/lab-exports/[A-Za-z0-9_-]{32}/whatifs\.jsonl", href), href
    got = httpx.get(url.rstrip("/") + href, timeout=30)
    assert got.status_code == 200 and got.headers["x-content-type-options"] == "nosniff"
    assert 'filename="whatifs.jsonl"' in got.headers["content-disposition"]
    token = href.split("/")[2]
    other = token[:-1] + ("y" if token[-1] != "y" else "z")  # one character off
    for bad in (f"/lab-exports/{token}/lab.duckdb", f"/lab-exports/{other}/whatifs.jsonl",
                f"/lab-exports/{token}/..%2F..%2Flab.duckdb", "/lab-exports/x/y"):
        assert httpx.get(url.rstrip("/") + bad, timeout=30).status_code == 404, bad
    time.sleep(EXPORT_AGE_S + 2.5)
    gone = httpx.get(url.rstrip("/") + href, timeout=30)
    assert gone.status_code == 404 and "export it again" in gone.text


def test_a_triage_export_through_the_queue_is_a_link_too(lab6):
    url, root, _ = lab6
    config = config_of(url)
    i, dep, button = event_of(config, "triage-export-csv")
    done = private_call(url, i, defaults(config, dep["inputs"]), button, "hostile-export")[-1]
    shown = json.dumps(done.get("output", {}).get("data"))
    assert done.get("success"), done
    assert "/lab-exports/" in shown and "triage-slice.csv" in shown and str(root) not in shown and "/tmp" not in shown


@pytest.mark.parametrize("position", [float("nan"), "nan", float("inf"), "1e400", True])
def test_a_position_that_is_not_a_number_is_one_line_naming_the_field(lab6, position):
    url, _, pair = lab6
    config = config_of(url)
    i, dep, button = event_of(config, "lab-series-place")
    data = defaults(config, dep["inputs"])
    data[2] = position  # run, series, position, kind, slice
    body = json.dumps({"data": data, "fn_index": i, "trigger_id": button, "session_hash": f"nan-{position!s}",
                       "event_data": None}, allow_nan=True)
    joined = httpx.post(f"{url}gradio_api/queue/join", content=body, headers={"Content-Type": "application/json"},
                        timeout=30)
    assert joined.status_code == 200, joined.text  # Gradio takes it: the field's own check must refuse it
    messages = []
    with httpx.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": f"nan-{position!s}"},
                      timeout=60) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                messages.append(json.loads(line[5:]))
                if messages[-1].get("msg") == "process_completed":
                    break
    done = messages[-1]
    error = str(done.get("output", {}).get("error"))
    assert done.get("success") is False and "at position" in error and "not a finite number" in error, done
    assert "\n" not in error


def test_triage_pair_shows_settings_and_what_would_give_an_interval(lab6):
    url, _, _ = lab6
    config = config_of(url)
    i, dep, button = event_of(config, "triage-pair-compare")
    picker = next(c for c in config["components"] if (c.get("props") or {}).get("elem_id") == "triage-baseline")
    ids = {label: value for label, value in picker["props"]["choices"]}
    small = [v for label, v in ids.items() if label.startswith("small-")]
    synthetic = [v for label, v in ids.items() if label.startswith("synthetic-demo-")]
    data = defaults(config, dep["inputs"])
    for pair, expected in ((small, "to get an interval"), (sorted(synthetic), "settings: no difference recorded")):
        data[0], data[1] = pair[0], pair[1]
        done = private_call(url, i, data, button, f"pair-{expected[:5]}")[-1]
        shown = json.dumps(done.get("output", {}).get("data"), ensure_ascii=False)
        assert done.get("success") and expected in shown, shown[:2000]


def test_space_md_names_the_endpoints_the_app_lists(lab6):
    """docs/space.md's table names every endpoint a default public lab lists, and the ones only LAB_ALLOW_ENGINES=1
    adds say so (it listed `/fetch_published`, which a default public lab does not have)."""
    from gradio_client import Client

    url, _, _ = lab6
    listed = set(Client(url, verbose=False).view_api(return_format="dict", print_info=False)["named_endpoints"])
    rows = [line for line in (REPO / "docs" / "space.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `/")]
    named = {name: row for row in rows for name in re.findall(r"`(/[a-z_]+)`", row.split("|")[1])}
    assert listed <= set(named), listed - set(named)
    for name in set(named) - listed:
        assert "LAB_ALLOW_ENGINES=1" in named[name], named[name]
