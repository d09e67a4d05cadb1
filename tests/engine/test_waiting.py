"""fmcluster.engine.waiting: every wait of a command ends when the command stops (Ctrl-C, its deadline), instead of
sleeping out its own interval; a wait's own limit is a clear error naming what was awaited."""

from __future__ import annotations

import threading
import time

import pytest

from fmcluster.engine.waiting import Stop, Stopped, WaitTimedOut, growing, pause, wait_until


def test_a_pause_ends_at_once_when_the_command_stops():
    """That it wakes at once (not after its minute) is a timing: bench/suite_timings.py (pause_stop)."""
    stop = Stop()
    threading.Timer(0.2, stop.set).start()
    with pytest.raises(Stopped):
        pause(60, stop)
    assert stop.is_set()


def test_the_deadline_ends_a_pause_and_stops_every_other_wait():
    stop = Stop(deadline=time.monotonic() + 0.2)
    with pytest.raises(Stopped):
        pause(60, stop)
    assert stop.is_set()  # so the command's other waits end too
    with pytest.raises(Stopped):
        wait_until(lambda: False, what="anything", stop=stop)


def test_a_pause_without_a_stop_sleeps_its_time():
    started = time.monotonic()
    pause(0.1, None)
    assert time.monotonic() - started >= 0.1


def test_wait_until_returns_what_the_check_found():
    answers = iter([None, "", "ready"])
    assert wait_until(lambda: next(answers), what="the thing", interval=0.01, stop=Stop()) == "ready"


def test_wait_until_gives_up_after_its_own_timeout_naming_what_it_awaited():
    calls = []
    with pytest.raises(WaitTimedOut, match="gave up waiting for the fleet to stop after 0 s") as caught:
        wait_until(lambda: calls.append(1), what="the fleet to stop", timeout=0.2, interval=0.05, stop=Stop())
    assert caught.value.exit_code == 1
    assert len(calls) >= 2  # checked again at the timeout, not only at the start


def test_growing_polls_often_while_young_and_less_as_it_ages():
    interval = growing(minimum=0.5, maximum=10.0, growth=0.15)
    assert [interval(w) for w in (0, 10, 40, 1000)] == [0.5, 1.5, 6.0, 10.0]
