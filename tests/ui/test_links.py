"""Links that open a view, without a browser: what a page's address is read as (hostile values included), what
Compare, Results and Triage open from it, and what a link names on a public deployment (only what the visitor
may see; another visitor's column and the owner's run outside the data folders get the same one line as a
name that does not exist)."""
from __future__ import annotations

import json
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import gradio as gr
import pytest
from gradio.context import LocalContext

from lab.settings import Settings
from lab.store.importer import import_path
from lab.ui.compare.link import column_refs, open_link
from lab.ui.results.link import open_link as open_results_link
from lab.ui.results.tab import baseline_options
from lab.ui.shell.links import MAX_VALUE, link_url, notice_html, read_link
from lab.ui.shell.session import serve_requests
from lab.triage import SliceSpec
from lab.ui.triage.filters import inputs_from_spec
from lab.ui.triage.link import linked_pair, triage_link
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
HTML = '<img src=x onerror="window.pwned=1">'
HOSTILE = {
    "long": "x" * 10_000,
    "html": HTML,
    "traversal": "../../../../etc/passwd",
    "spec": "transformers:/etc?trust_remote_code=1",
    "url": "openai:http://169.254.169.254/v1#m",
}


def lab(tmp_path, public: bool, outside: tuple = ()):
    """A lab on the excerpt with four stored runs; `outside`: result files the owner imported from outside the
    data folders (`results import /elsewhere/x.json`) before serving."""
    from lab.serve import create_context
    from lab.store.opening import open_store

    results = make_results_dir(tmp_path)
    for name, offset in (("alpha", 1), ("beta", 2), ("sft-checkpoint-1", 1), ("sft-checkpoint-2", 3)):
        write_stored_run(results / "runs" / f"{name}.json", name, offset)
    with open_store(tmp_path / "lab.duckdb", results) as store:
        assert all(import_path(store, path).ok for path in outside)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT), public=public,
                        allow_engine_loading=False if public else None)
    ctx = create_context(settings)
    serve_requests(ctx)
    return ctx


@contextmanager
def visitor(session: str):
    token = LocalContext.request.set(gr.Request(session_hash=session))
    try:
        yield
    finally:
        LocalContext.request.reset(token)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    ctx = lab(tmp_path_factory.mktemp("links-local"), public=False)
    yield ctx
    ctx.pool.close_all()


def test_a_link_is_read_as_its_known_parameters_only():
    link = read_link({"tab": "Compare", "step": " task-000/1 ", "engines": "a,b", "evil": "1", "baseline": "x" * 10_000,
                      "series": "s\x00\x1b[31m"})
    assert link.tab == "compare" and link.values == {"step": "task-000/1", "engines": "a,b", "series": "s[31m"}
    assert link.notes == [f"the link's 'baseline' (10,000 characters) was ignored: at most {MAX_VALUE}"]


@pytest.mark.parametrize("tab", ["nosuch", HTML, "../../etc", "x" * 200])
def test_an_unknown_tab_is_ignored_in_one_escaped_line(tab):
    link = read_link({"tab": tab})
    assert link.tab is None and len(link.notes) == 1
    html = notice_html(link.notes)
    assert "<img" not in html and "onerror=\"" not in html and html.count("<div") == 1


def test_many_names_make_one_short_line():
    html = notice_html([f"'{i}' is no engine column" for i in range(12)])
    assert html.count("is no engine column") == 3 and html.endswith("; and 9 more</div>")


def test_a_link_round_trips():
    url = link_url("http://lab/", "compare", {"step": "task-000/1", "engines": "a b,c&d", "baseline": ""})
    link = read_link(dict(parse_qsl(urlsplit(url).query)))
    assert link.tab == "compare" and link.values == {"step": "task-000/1", "engines": "a b,c&d"}


def test_compare_opens_at_the_step_with_the_runs_named(local):
    before = [e.name for e in local.engine_entries()]
    key = local.step_keys()[4]
    step, notes = open_link(local, read_link({"tab": "compare", "step": key, "engines": "alpha,beta,nosuch"}))
    assert step == key and len(notes) == 1 and "'nosuch' is no engine column or stored run" in notes[0]
    names = [e.name for e in local.engine_entries()]
    assert names[:len(before)] == before and len(names) == len(before) + 2
    assert {"alpha", "beta"} <= set(column_refs(local))  # the view names its columns as the link did
    again, notes = open_link(local, read_link({"tab": "compare", "engines": "alpha"}))
    assert again is None and notes == [] and [e.name for e in local.engine_entries()] == names  # added once


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_names_load_nothing(local, kind):
    names = list(local.pool.names())
    link = read_link({"tab": "compare", "step": HOSTILE[kind], "engines": HOSTILE[kind]})
    step, notes = open_link(local, link)
    assert step is None and list(local.pool.names()) == names  # no column, no engine, no server reached
    notes = link.notes + notes  # the page's line (values too long) and Compare's
    assert notes and all(len(n) < 200 for n in notes)
    assert "<img" not in notice_html(notes)


def test_results_and_triage_open_what_their_links_name(local):
    runs = [run_id for _, run_id in baseline_options(local)]
    baseline, series, notes = open_results_link(local, read_link({"tab": "results", "baseline": "alpha",
                                                                  "series": "sft"}), baseline_options)
    assert baseline in runs and series == "sft" and notes == []
    baseline, series, notes = open_results_link(local, read_link({"tab": "results", "baseline": HTML,
                                                                  "series": "../../x"}), baseline_options)
    assert baseline is None and series is None and len(notes) == 2
    pair, notes = linked_pair(local, read_link({"tab": "triage", "baseline": "alpha", "candidate": "beta"}), runs)
    assert all(pair) and notes == []
    filters = inputs_from_spec(SliceSpec(f1_max=0.5))
    url = triage_link(local, "http://lab/", True, pair[0], pair[1], *filters)
    assert parse_qsl(urlsplit(url).query) == [("tab", "triage"), ("f1_max", "0.5"), ("baseline", "alpha"),
                                              ("candidate", "beta")]
    assert "baseline" not in triage_link(local, "http://lab/", True, pair[0], pair[0], *filters)  # against itself
    assert "baseline" not in triage_link(local, "http://lab/", False, *pair, *filters)  # the pickers' first choices


def test_a_public_link_names_only_what_the_visitor_sees(tmp_path):
    secret = tmp_path / "elsewhere" / "secret.json"  # the owner's run, its file outside the data folders
    write_stored_run(secret, "secret", 3)
    ctx = lab(tmp_path, public=True, outside=(secret,))
    try:
        with visitor("alice"):
            ctx.add_engine("reference", wait=True)
            step, notes = open_link(ctx, read_link({"tab": "compare", "engines": "alpha"}))
            assert notes == []
            alice = column_refs(ctx)
            assert set(alice) == {"reference", "alpha"}
        with visitor("bob"):
            assert column_refs(ctx) == []  # alice's columns are not bob's
            step, notes = open_link(ctx, read_link({"tab": "compare", "engines": ",".join(alice) + ",secret,nosuch"}))
            assert column_refs(ctx) == ["alpha"] and len(ctx.engine_entries()) == 1  # the run, as bob's own column
            texts = [n.split("'")[2] for n in notes]
            assert len(notes) == 3 and len(set(texts)) == 1  # alice's column, the owner's private run, a typo: one line
            assert not any(str(tmp_path) in n or "outside" in n for n in notes)
    finally:
        ctx.pool.close_all()


def test_the_triage_link_keeps_its_slice_fields():
    spec = SliceSpec.from_query("run_ids=a&f1_max=0.2&tab=triage&baseline=x&candidate=y")
    assert spec.run_ids == ["a"] and spec.f1_max == 0.2
    assert json.loads(json.dumps(spec.to_dict())) == {"run_ids": ["a"], "f1_max": 0.2}
