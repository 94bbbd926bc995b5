"""Hostile round five (issue 40 item 8) against one real `python app.py` in public mode, visitors as
anonymous gradio_client sessions; a proxy the owner trusts (LAB_TRUSTED_PROXIES=127.0.0.2) is a TCP relay
whose connections come from 127.0.0.2 (tests/public/helpers_relay.py)."""
from __future__ import annotations

import pytest

from tests.helpers_app import app_process, lab_env
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.public.helpers_relay import relay_from
from tests.public.test_public_hostile import call
from tests.public.test_public_round_four import guest, held
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]
CLIENT_SHARE, PROXY = 2, "127.0.0.2"


@pytest.fixture(scope="module")
def lab5(tmp_path_factory):
    """(url, relay url, results): a public lab with model engines allowed and a client share of 2."""
    root = tmp_path_factory.mktemp("round-five")
    results = make_results_dir(root)
    for i in range(4):
        write_stored_run(results / "runs" / f"held{i}.json", f"held{i}")
    (results / "models" / "m").mkdir(parents=True)
    env = lab_env(LAB_PUBLIC="1", LAB_ALLOW_ENGINES="1", LAB_RESULTS=str(results), LAB_CLIENT_MAX_ENGINES=str(CLIENT_SHARE),
                  LAB_TRUSTED_PROXIES=PROXY, LAB_LOG_DIR=str(root / "logs"), HF_HUB_OFFLINE="1")
    with app_process(["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"], root / "app.log",
                     env, timeout=300) as (url, proc):
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with relay_from(PROXY, port) as relay:
            yield url, relay, results
    log = (root / "app.log").read_text(errors="replace")
    assert log.count("Traceback") == log.count("gradio.exceptions.Error: "), log[-3000:]  # only refusals Gradio logs


def test_unreadable_forwarded_addresses_behind_the_trusted_proxy_are_one_client(lab5):
    """Each unparseable X-Forwarded-For entry counted as a new client: a script behind the owner's proxy
    could hold a client's share per made-up value. They are all the proxy's own client now."""
    _, relay, results = lab5
    added, refused = 0, []
    for i in range(4):
        session = guest(relay, {"X-Forwarded-For": f"not-an-address-{i}"})
        _, lines = call(session, held(results, i), api_name="/add_engine")
        if any(line.startswith("Adding engine") for line in lines):
            added += 1
        else:
            refused += lines
    assert added == CLIENT_SHARE and any("one client can hold at most" in line for line in refused), refused
    real = guest(relay, {"X-Forwarded-For": "203.0.113.9"})  # a readable address is its own client still
    _, lines = call(real, held(results, 0), api_name="/add_engine")
    assert any(line.startswith("Adding engine") for line in lines), lines


def test_a_value_that_is_no_choice_is_refused_without_echoing_it(lab5):
    """Gradio's choice check answered a 10,000-character run id with the whole value and every choice."""
    from gradio_client.exceptions import AppError

    url, _, _ = lab5
    visitor = guest(url)
    key = visitor.predict(None, False, None, api_name="/show_step")[1]["value"]
    with pytest.raises(AppError) as refused:
        visitor.predict(["x" * 10_000], key, api_name="/add_runs")
    message = str(refused.value)
    assert "is not one of the" in message and len(message) < 300, message[:500]


def test_a_refused_preset_keeps_the_spec_apart_from_its_path(lab5):
    """`vllm:MODEL?preset=../../x` was refused naming `vllm:…/x`: the SPEC's options folded into its path."""
    url, _, results = lab5
    _, lines = call(guest(url), f"vllm:{results / 'models' / 'm'}?preset=../../x", api_name="/add_engine")
    assert any("engine spec 'vllm:results/models/m?preset=../../x': unknown preset '../../x'" in line
               for line in lines), lines
    assert not any(str(results) in line for line in lines), lines
