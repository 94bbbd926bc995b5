"""A replay's live figures: tokens so far, tokens a second and the time left, an upper bound until a step ends."""
from __future__ import annotations

import pytest

from lab.engines.progress import LiveProgress
from lab.runs.meter import ReplayMeter, describe, duration, step_tokens


class Clock:
    """Seconds the test sets (the meter reads time through it)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def started(steps: int = 4, max_tokens: int = 1024):
    progress, clock = LiveProgress(), Clock()
    progress.add(50)  # an earlier call's tokens: not this replay's
    meter = ReplayMeter(clock)
    meter.begin(progress, steps, max_tokens)
    return meter, progress, clock


def test_no_figures_before_the_replay_generates():
    assert ReplayMeter().figures() is None and describe(None) == ""


def test_no_estimate_before_the_first_token():
    meter, _, clock = started()
    clock.now += 30  # the prompt is read: no token yet
    figures = meter.figures()
    assert figures.tokens == 0 and figures.left_s is None and figures.tokens_per_s is None
    assert describe(figures) == "no token yet (reading the prompt)"


def test_until_a_step_finishes_every_step_counts_at_max_tokens():
    meter, progress, clock = started(steps=4, max_tokens=1024)
    progress.add(200)
    clock.now += 100  # 2 tokens a second
    figures = meter.figures()
    assert (figures.tokens, figures.tokens_per_s, figures.bound) == (200, 2.0, True)
    # 4 steps x 1024 tokens, less the 200 already generated for them, at 2 tokens a second
    assert figures.left_s == pytest.approx((4 * 1024 - 200) / 2.0)
    text = describe(figures)
    assert text.startswith("200 tokens · 2.0 tok/s · at most about 32 min left")
    assert "estimate" in text and "1,024-token limit" in text
    assert describe(figures, compact=True) == "200 tok, 2.0 tok/s, <=32m left (est., 1,024 tok/step max)"


def test_after_a_step_the_mean_of_the_finished_steps():
    meter, progress, clock = started(steps=4, max_tokens=1024)
    progress.add(300)
    meter.step_done(120)  # one step of 120 tokens; 180 generated for the steps still running
    clock.now += 150
    figures = meter.figures()
    assert not figures.bound and figures.per_step_tokens == 120 and figures.steps_left == 3
    assert figures.left_s == pytest.approx((3 * 120 - 180) / 2.0)
    assert describe(figures) == "300 tokens · 2.0 tok/s · about 90 s left (estimate: 120 tokens a step so far)"
    assert describe(figures, compact=True) == "300 tok, 2.0 tok/s, ~90s left (est.)"


def test_every_step_finished_says_what_it_took():
    meter, progress, clock = started(steps=2, max_tokens=64)
    progress.add(100)
    meter.step_done(60)
    meter.step_done(40)
    clock.now += 10
    assert describe(meter.figures()) == "100 tokens · 10.0 tok/s"


def test_tokens_of_a_step_with_samples_and_durations():
    assert step_tokens({"completion_tokens": 7}) == 7 and step_tokens({"completion_tokens": None}) == 0
    assert step_tokens({"completion_tokens": 7, "samples": [{"completion_tokens": 7}, {"completion_tokens": 5}]}) == 12
    assert [duration(s) for s in (4, 119, 600, 5400, 7500)] == ["4 s", "119 s", "10 min", "1 h 30 min", "2 h 05 min"]
    assert duration(7500, compact=True) == "2h05m"
