"""How much statistics a visitor may start (lab.visitors.StatsLimits, public_limits.yaml): computations wait for
their turn, one client may have only so many in flight and start only so many a minute, the owner is never
limited, and a computation entered again in its own thread (the store's matrix inside a comparison) is one."""
from __future__ import annotations

import threading
import time

import pytest

from lab.errors import LabError
from lab.visitors import StatsLimits, public_limit


def test_the_limits_come_from_the_file_and_the_environment(monkeypatch):
    assert StatsLimits().at_once == int(public_limit("stats_at_once"))
    monkeypatch.setenv("LAB_CLIENT_STATS_PER_MIN", "5")
    assert StatsLimits().per_minute == 5
    monkeypatch.setenv("LAB_CLIENT_STATS_PER_MIN", "nan")
    assert StatsLimits().per_minute == int(public_limit("client_stats_per_min"))


def test_one_at_a_time_and_a_clients_share_in_flight():
    limits = StatsLimits(at_once=1, per_client=2, per_minute=100, wait_s=5)
    inside, release, started = [], threading.Event(), threading.Event()

    def compute(client):
        with limits.admit(client):
            inside.append(client)
            started.set()
            release.wait(5)

    first = threading.Thread(target=compute, args=("a",))
    first.start()
    started.wait(5)
    second = threading.Thread(target=compute, args=("a",))  # waits for the turn, counted in flight
    second.start()
    time.sleep(0.2)
    assert inside == ["a"]
    with pytest.raises(LabError, match="at most 2 computations running or waiting"):
        with limits.admit("a"):
            pass
    with limits.admit(None):  # the owner: never limited, never waits
        pass
    release.set()
    first.join(5)
    second.join(5)
    assert inside == ["a", "a"]


def test_a_minutes_share_and_a_turn_that_never_comes():
    limits = StatsLimits(at_once=1, per_client=5, per_minute=3, wait_s=0.2)
    for _ in range(3):
        with limits.admit("b"):
            pass
    with pytest.raises(LabError, match="at most 3 new computations a minute per visitor; try again in"):
        with limits.admit("b"):
            pass
    with limits.admit("c"):  # another client has its own share
        with limits.admit("c"):  # entered again in its thread: admitted once, no deadlock
            pass
    hold, held = threading.Event(), threading.Event()

    def keep_the_turn():
        with limits.admit("d"):
            held.set()
            hold.wait(5)

    holder = threading.Thread(target=keep_the_turn)
    holder.start()
    held.wait(5)
    with pytest.raises(LabError, match="busy computing for other visitors"):
        with limits.admit("e"):
            pass
    hold.set()
    holder.join(5)
