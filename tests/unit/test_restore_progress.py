"""The restore progress bar's records/s and ETA come from the last few seconds of progress, and
say ``?`` until there is a second of it (``streamstate.cli.progress``), on an injected clock."""

from __future__ import annotations

import io
import re

import pytest

from streamstate import TopicPartition
from streamstate.cli.progress import ProgressBar, RecentRate, format_duration

TP = TopicPartition("changelog", 0)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def last_frame(out: io.StringIO) -> str:
    return out.getvalue().split("\r")[-1]


def shown(frame: str) -> tuple[str, str]:
    """The (rate, ETA) texts of a frame of the bar."""
    match = re.search(r"offsets  (\S+) rec/s  ETA (\S+)", frame)
    assert match is not None, frame
    return match.group(1), match.group(2)


def rate_of(frame: str) -> float:
    return float(shown(frame)[0].replace(",", ""))


def test_the_first_second_shows_no_rate_and_no_eta() -> None:
    # The tour on a fresh clone: the store announces 24,000 offsets, the first fetch takes
    # 4.8 s to arrive with 96 records. A rate since the start read "20 rec/s ETA 19m56s" here.
    clock = Clock()
    out = io.StringIO()
    bar = ProgressBar(out, width=10, clock=clock)
    bar.on_restore_start(TP, "counts", 0, 24_000)
    assert shown(last_frame(out)) == ("?", "?")
    clock.now += 4.8
    bar.on_batch_restored(TP, "counts", 95, 96)
    assert shown(last_frame(out)) == ("?", "?")
    # Then 2,000 records every 0.2 s (10,000 rec/s): still "?" within the first second...
    done = 96
    for _ in range(4):
        clock.now += 0.2
        done += 2_000
        bar.on_batch_restored(TP, "counts", done - 1, 2_000)
        assert shown(last_frame(out)) == ("?", "?")
    # ...and the real speed once a second of it has been seen.
    clock.now += 0.2
    done += 2_000
    bar.on_batch_restored(TP, "counts", done - 1, 2_000)
    rate, eta = shown(last_frame(out))
    assert rate_of(last_frame(out)) == pytest.approx(10_000, rel=0.01)
    assert eta == format_duration((24_000 - done) / 10_000) == "1s"
    assert rate != "?"


def test_a_speed_change_shows_within_the_window() -> None:
    # 10 s at 10,000 rec/s, then 10 s at 1,000 rec/s: the bar shows 1,000 (the average since
    # the start would be 5,500) and an ETA at 1,000 rec/s.
    clock = Clock()
    out = io.StringIO()
    bar = ProgressBar(out, clock=clock)
    total = 1_000_000
    bar.on_restore_start(TP, "s", 0, total)
    done = 0
    for step in range(200):
        clock.now += 0.1
        n = 1_000 if step < 100 else 100
        done += n
        bar.on_batch_restored(TP, "s", done - 1, n)
        if step == 99:
            assert rate_of(last_frame(out)) == pytest.approx(10_000, rel=0.02)
    frame = last_frame(out)
    assert rate_of(frame) == pytest.approx(1_000, rel=0.02)
    assert shown(frame)[1] == format_duration((total - done) / 1_000)


def test_a_speed_up_shows_as_well() -> None:
    # A cold start (1,000 rec/s for 30 s), then the page cache is warm (20,000 rec/s).
    meter_clock = Clock()
    meter = RecentRate(clock=meter_clock)
    done = 0
    meter.update(done)
    for step in range(400):
        meter_clock.now += 0.1
        done += 100 if step < 300 else 2_000
        meter.update(done)
    assert meter.rate() == pytest.approx(20_000, rel=0.02)
    eta = meter.eta(100_000)
    assert eta is not None and eta == pytest.approx(5.0, rel=0.02)


def test_a_stall_brings_the_rate_down_and_hides_the_eta() -> None:
    clock = Clock()
    meter = RecentRate(window_s=5.0, clock=clock)
    meter.update(0)
    done = 0
    for _ in range(30):
        clock.now += 0.1
        done += 1_000
        meter.update(done)
    assert meter.rate() == pytest.approx(10_000, rel=0.02)
    clock.now += 2.5  # nothing for 2.5 s: half the window
    assert meter.rate() == pytest.approx(10_000 * 2.5 / 5.0, rel=0.05)
    clock.now += 10.0
    assert meter.rate() == 0.0
    assert meter.eta(5_000) is None
    assert meter.eta(0) == 0.0
    meter.update(done)  # the same count again is no progress
    assert meter.rate() == 0.0


def test_no_rate_before_any_progress() -> None:
    clock = Clock()
    meter = RecentRate(clock=clock)
    assert meter.rate() is None and meter.eta(10) is None
    meter.update(0)
    clock.now += 30.0
    meter.update(0)
    assert meter.rate() is None and meter.eta(10) is None
    # The first growth only starts the clock: the 500 arrived after an unknown wait.
    meter.update(500)
    clock.now += 0.5
    assert meter.rate() is None
    meter.update(1_000)
    clock.now += 0.5
    meter.update(1_500)
    assert meter.rate() == pytest.approx(1_000)


def test_the_last_frame_gives_the_average_and_the_time_taken() -> None:
    clock = Clock()
    out = io.StringIO()
    bar = ProgressBar(out, width=10, clock=clock)
    bar.on_restore_start(TP, "s", 0, 4_000)
    clock.now += 2.0
    bar.on_batch_restored(TP, "s", 3_999, 4_000)
    bar.on_restore_end(TP, "s", 4_000)
    bar.finish()
    frame = last_frame(out)
    assert frame.startswith("[##########] 100.0% 4,000/4,000 offsets  2,000 rec/s avg  done in 2s")
    assert out.getvalue().endswith("\n")


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="window_s"):
        RecentRate(window_s=0)
    with pytest.raises(ValueError, match="min_signal_s"):
        RecentRate(min_signal_s=-1)
