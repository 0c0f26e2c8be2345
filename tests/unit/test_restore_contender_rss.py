"""The restore contenders' peak RSS is their own, not the bench process's that started them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The parent makes 400 MB resident, then starts a child that reports the contender's figure.
# Linux carries a parent's peak into the child's getrusage ru_maxrss across (v)fork and exec,
# which made every contender started by a bench process that had produced a large changelog
# report at least that process's peak.
PARENT = """
import subprocess, sys
big = bytearray(400 * 1024 * 1024)
for i in range(0, len(big), 4096):
    big[i] = 1
child = "from benches._restore_contender import _peak_rss_mb; print(_peak_rss_mb())"
out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
print(out.stdout.strip())
"""


def test_a_contender_started_by_a_large_process_reports_its_own_peak_rss() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARENT], capture_output=True, text=True, check=True, cwd=ROOT
    )
    peak_mb = float(done.stdout.strip().splitlines()[-1])
    assert 5 < peak_mb < 200, peak_mb
