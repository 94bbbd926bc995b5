"""Published fetch against a hostile server, round four (issue 26 items 4, 11, 13): scores out of
range, aggregate counts that do not match the rows, steps of unbounded size, and a server that
trickles. Real parts: the CLI as a separate process, a real HTTP server on 127.0.0.1, a real
DuckDB store; each refusal is one FAILED line naming the file and the field, exit code 2, nothing kept."""
from __future__ import annotations

import json
import time

import pytest

from lab.published import fetch as pub
from tests.published.test_published_hostile import (SAMPLE, assert_refused, fetch, good_result, hostile_server, send,
                                          unknown_run)

pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/tb2lite/published is missing")


def changed(step_field: str | None = None, value=None, aggregate: dict | None = None, row: int = 0) -> bytes:
    data = good_result()
    if step_field is not None:
        data["per_step"][row][step_field] = value
    data["aggregate"].update(aggregate or {})
    return json.dumps(data).encode()


OUT_OF_RANGE = {  # body, the words its FAILED line must hold
    "step f1 -5": (lambda: changed("command_f1", -5), ["per_step[0]", "command_f1", "-5"]),
    "step recall 1.5": (lambda: changed("command_recall", 1.5, row=3), ["per_step[3]", "command_recall"]),
    "step precision -0.0001": (lambda: changed("command_precision", -0.0001), ["command_precision"]),
    "step first exact 2": (lambda: changed("first_cmd_exact", 2.0, row=9), ["per_step[9]", "first_cmd_exact"]),
    "steps 999": (lambda: changed(aggregate={"steps": 999}), ["aggregate.steps", "999", "holds 10"]),
    "steps 0": (lambda: changed(aggregate={"steps": 0}), ["aggregate.steps"]),
    "tasks 50": (lambda: changed(aggregate={"tasks": 50}), ["aggregate.tasks"]),
    "recall mean -1": (lambda: changed(aggregate={"avg_command_recall": -1}), ["aggregate.avg_command_recall"]),
    "pct 101": (lambda: changed(aggregate={"valid_json_pct": 101}), ["aggregate.valid_json_pct"]),
    "pct -3": (lambda: changed(aggregate={"first_cmd_exact_pct": -3}), ["aggregate.first_cmd_exact_pct"]),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_out_of_range_values_are_refused_by_field(tmp_path, case):
    make, words = OUT_OF_RANGE[case]
    body = make()
    run = unknown_run()
    with hostile_server(lambda h: send(h, body)) as (base, _):
        out, _, results = fetch(tmp_path, base, run)
    assert_refused(out, results, tmp_path, run, *words)
    assert "discarded" in out.stdout + out.stderr


def test_values_at_the_edges_of_their_ranges_are_kept(tmp_path):
    """0 and 1, 0 % and 100 %, and the true counts pass: the checks refuse only what no harness writes."""
    data = good_result()
    data["per_step"][0].update(command_f1=1.0, command_precision=1.0, command_recall=1.0, first_cmd_exact=1.0)
    data["per_step"][1].update(command_f1=0.0, command_precision=0.0, command_recall=0.0, first_cmd_exact=0.0)
    data["aggregate"].update(valid_json_pct=100.0, first_cmd_exact_pct=0.0)
    body = json.dumps(data).encode()
    run = unknown_run()
    with hostile_server(lambda h: send(h, body)) as (base, _):
        out, _, results = fetch(tmp_path, base, run)
    assert out.returncode == 0, out.stdout + out.stderr
    assert pub.run_file(results, run).read_bytes() == body


def huge_step_file(units: int, unit_chars: int = 12) -> bytes:
    """The shape of issue 26's file: steps with thousands of distinct units a side."""
    data = good_result()
    for s, row in enumerate(data["per_step"][:2]):
        row["ref_command_units"] = [f"echo r{s}-{i}-" + "x" * max(unit_chars - 12, 0) for i in range(units)]
        row["pred_command_units"] = [f"printf p{s}-{i}" for i in range(units)]
    return json.dumps(data).encode()


@pytest.mark.slow  # over 5 s: out of the fast loop
def test_steps_beyond_sane_sizes_are_refused(tmp_path):
    run = unknown_run()
    for i, (body, words, limits) in enumerate([
        (huge_step_file(3000), ["per_step[0]", "3,000 units", "max_units_per_step"], {}),
        (huge_step_file(2, unit_chars=30_000), ["max_unit_chars"], {}),
        (huge_step_file(60), ["60 units", "max_units_per_step"], {"max_units_per_step": 50}),
    ]):
        with hostile_server(lambda h, b=body: send(h, b)) as (base, _):
            out, took, results = fetch(tmp_path / str(i), base, run, **limits)
        assert_refused(out, results, tmp_path / str(i), run, *words)
        assert took < 60, took
    body = huge_step_file(180)  # at the limit (the real file's longest step has 166 units): kept
    with hostile_server(lambda h: send(h, body)) as (base, _):
        out, _, results = fetch(tmp_path / "ok", base, run, max_units_per_step=180)
    assert out.returncode == 0, out.stdout + out.stderr


RATE = {"min_rate_bytes_s": 200, "min_rate_window_s": 2, "file_deadline_s": 120, "read_timeout_s": 30}


@pytest.mark.slow  # over 5 s: out of the fast loop
def test_a_trickle_is_cut_by_the_minimum_rate_long_before_the_deadline(tmp_path):
    run = unknown_run()
    body = SAMPLE.read_bytes()

    def trickle(h):  # a byte every 0.3 s: every read succeeds, the deadline is two minutes away
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for byte in body:
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            time.sleep(0.3)

    with hostile_server(trickle) as (base, _):
        out, took, results = fetch(tmp_path / "body", base, run, **RATE)
    assert_refused(out, results, tmp_path / "body", run, "slower than 200 bytes/s for 2 s")
    assert took < 30, took

    def trickle_headers(h):  # a header line every 0.5 s, never a body
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(200):
            h.wfile.write(b"X-Wait: 1\r\n")
            h.wfile.flush()
            time.sleep(0.5)

    with hostile_server(trickle_headers) as (base, _):
        out, took, results = fetch(tmp_path / "headers", base, run, **RATE)
    assert_refused(out, results, tmp_path / "headers", run, "bytes/s")
    assert took < 30, took

    def burst_then_trickle(h):  # a fast start (most of the file), then a byte a second
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body[:-100])
        h.wfile.flush()
        for byte in body[-100:]:
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            time.sleep(1)

    with hostile_server(burst_then_trickle) as (base, _):
        out, took, results = fetch(tmp_path / "burst", base, run, **RATE)
    assert_refused(out, results, tmp_path / "burst", run, "bytes/s")
    assert took < 30, took


@pytest.mark.slow  # over 5 s: out of the fast loop
def test_a_slow_steady_link_still_completes(tmp_path):
    """A file sent at about 4 times the minimum rate, for several windows, arrives whole."""
    run = unknown_run()
    body = SAMPLE.read_bytes()
    chunk = 2000  # bytes every 0.5 s: 4,000 B/s against a 1,000 B/s minimum

    def steady(h):
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for start in range(0, len(body), chunk):
            h.wfile.write(body[start:start + chunk])
            h.wfile.flush()
            time.sleep(0.5)

    limits = {**RATE, "min_rate_bytes_s": 1000}
    assert len(body) / (2 * chunk) > 3 * limits["min_rate_window_s"]  # the sample lasts several windows
    with hostile_server(steady) as (base, _):
        out, took, results = fetch(tmp_path, base, run, **limits)
    assert out.returncode == 0, out.stdout + out.stderr
    assert took > 3 * limits["min_rate_window_s"], took  # it outlived several windows
    assert pub.run_file(results, run).read_bytes() == body
