"""Issue 40's smaller items, each where the lab makes it: numbers shown (a 309-digit NLL, "-0.000"), the
replay's path in a stored column's tooltip, a SPEC's options kept apart from its path in a message, an
unreadable forwarded address as the proxy's one client. The page and the public app are checked in
tests/browser/test_browser_round_five.py and tests/public/test_public_round_five.py."""
from __future__ import annotations

import math

import pytest

from lab.engines.reference_likelihood import ReferenceScore
from lab.security.paths import redact_paths
from lab.settings import Settings
from lab.ui.compare.reference_nll import ReferenceNll, render_reference_nll
from lab.ui.shell.html_text import fmt
from lab.ui.shell.proxies import UNREADABLE, client_key
from tests.paths import EXCERPT


@pytest.mark.parametrize("value,digits,shown", [(1e308, 3, "1.000e+308"), (-0.0, 3, "0.000"), (0.4999, 3, "0.500"),
                                                (123456.7, 1, "123456.7"), (-2e6, 2, "-2.00e+06"), (None, 4, "–")])
def test_numbers_are_shown_short_and_never_as_minus_zero(value, digits, shown):
    assert fmt(value, digits) == shown


def test_a_clamped_reference_is_an_nll_of_plus_zero():
    score = ReferenceScore([0.0, 0.0])  # every log-probability clamped to 0 (a server's positive ones)
    assert score.nll_per_token == 0.0 and math.copysign(1.0, score.nll_per_token) == 1.0
    assert score.to_row()["ref_nll_per_token"] == 0.0
    assert "<b>0.000</b>" in render_reference_nll(ReferenceNll(-0.0, 4, "score-reference run"))
    assert "<b>1.000e+308</b>" in render_reference_nll(ReferenceNll(1e308, 1, "score-reference run"))


def test_a_specs_options_stay_apart_from_its_path_in_a_message():
    settings = Settings(results_dir="/srv/lab/results")
    line = "engine spec 'vllm:/srv/models/m?preset=../../x#y': unknown preset '../../x'"
    assert redact_paths(line, settings) == "engine spec 'vllm:…/m?preset=../../x#y': unknown preset '../../x'"
    assert redact_paths("stored:/srv/lab/results/runs/a.json?name=b", settings) == "stored:results/runs/a.json?name=b"


def test_unreadable_forwarded_addresses_are_one_client():
    assert client_key("garbage-1") == client_key("not an address") == client_key("[::1") == UNREADABLE
    assert client_key("203.0.113.9") == "203.0.113.9" and client_key("::ffff:192.0.2.1") == "192.0.2.1"
    assert client_key("2001:db8::1") == client_key("2001:db8::2") == "2001:db8::/64"


@pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
def test_a_stored_columns_tooltip_names_the_replay_as_the_header_does(tmp_path):
    from lab.security.paths import display_path
    from lab.serve import create_context
    from lab.ui.compare.legacy_column import scorer_badge_html
    from tests.ui.test_ui_handlers import write_stored_run

    runs = tmp_path / "results" / "runs"
    write_stored_run(runs / "a.json", "a")
    settings = Settings(results_dir=tmp_path / "results", runs_dir=runs, db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"stored:{runs / 'a.json'}"], open_db=False)
    try:
        ctx.pool.wait()
        badge = scorer_badge_html(ctx, ctx.engine_entries()[0])
    finally:
        ctx.pool.close_all()
    assert str(EXCERPT) not in badge and f"on the loaded replay ({display_path(EXCERPT, settings)})" in badge, badge


@pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
def test_adding_a_legacy_run_names_the_legacy_replay_as_the_header_does(tmp_path, monkeypatch):
    from lab.security.paths import display_path
    from lab.serve import create_context
    from lab.ui.compare.run_picker import scorer_note
    from tests.helpers_store import make_results_dir
    from tests.ui.test_legacy_column import write_legacy_run

    results = make_results_dir(tmp_path)
    write_legacy_run(results / "runs" / "old.json")
    monkeypatch.setenv("LAB_LEGACY_REPLAY", str(EXCERPT))
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [])
    try:
        run_id = ctx.query("SELECT run_id FROM runs WHERE path = 'runs/old.json'")["run_id"].iloc[0]
        note = scorer_note(ctx, run_id)
    finally:
        ctx.pool.close_all()
        ctx.store.close()
    assert f"({display_path(EXCERPT, settings)})" in note and str(EXCERPT) not in note, note
