"""Kafka Streams 4.4 in a rolling bounce of three instances: what it restores, as the oracle.

Not a benchmark: the Java side of ``tests/chaos/test_rolling_bounce.py``'s streams-protocol
scenario, for ``docs/rebalancing.md`` ("Chaos figures"). Three ``FailoverInstance`` JVMs
(``benches/kstreams/FailoverInstance.java``: a count per key in a persistent logged store,
``group.protocol=streams``, dynamic members, the group's ``streams.num.standby.replicas=1``) share
4 partitions; ``keys`` distinct keys are counted (no load during the bounces, unlike the
streamstate test's 100 records/s). Once every record is committed and every standby has replayed
its changelog, each instance in turn is closed (SIGTERM: its shutdown hook calls
``KafkaStreams.close()``) and restarted on its own state directory; after each bounce the run
waits until the three hold the 4 tasks as active, none restoring, all ``RUNNING``, every standby
caught up again. It prints, per bounce, the changelog records each instance's restore listener
saw (a standby's replay is not a restore, as in streamstate)::

    .venv/bin/python -m benches.oracle_rolling_bounce [keys]     # default 1,000,000
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benches._kstreams import FailoverInstance, failover_instances
from benches.bench_failover import PARTITIONS, _produce

from streamstate.kafka_local import KafkaTestCluster

TIMEOUT = 1800.0
NAMES = ("a", "b", "c")


def _settled(members: dict[str, FailoverInstance], standbys: bool) -> bool:
    statuses = [m.latest() for m in members.values()]
    if not all(s and s["state"] == "RUNNING" and s["restoring"] == 0 for s in statuses):
        return False
    active = [p for s in statuses for p in s["active"]]
    if sorted(active) != list(range(PARTITIONS)):
        return False
    return not standbys or all(s["standby_lag"] == 0 for s in statuses if s["standby"])


def _wait(members: dict[str, FailoverInstance], what: str, standbys: bool = True) -> None:
    deadline = time.monotonic() + TIMEOUT
    # Settled twice 1 s apart: a rebalance that follows the first settled state is not missed.
    while not (_settled(members, standbys) and (time.sleep(1.0) or _settled(members, standbys))):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def run(kafka: KafkaTestCluster, keys: int) -> list[dict[str, Any]]:
    """The rolling bounce (module doc); one report per bounce."""
    source = kafka.create_topic(partitions=PARTITIONS)
    sink = kafka.create_topic(partitions=PARTITIONS)
    app_id = f"oracle-bounce-{uuid.uuid4().hex[:8]}"
    root = Path(tempfile.mkdtemp(prefix="oracle-bounce-"))

    start = failover_instances(kafka.bootstrap_servers, app_id, source, sink, root=root, standbys=1)
    members = {name: start(name, False) for name in NAMES}
    reports: list[dict[str, Any]] = []
    try:
        _wait(members, "the first assignment", standbys=False)
        _produce(kafka, source, keys)
        deadline = time.monotonic() + TIMEOUT
        while sum(m.latest()["committed"] for m in members.values()) != keys:
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for every record committed")
            time.sleep(0.2)
        _wait(members, "every standby caught up")
        changelog = sum(kafka.end_offsets(f"{app_id}-counts-changelog").values())
        for name in NAMES:
            before = {n: m.latest()["restored"] for n, m in members.items() if n != name}
            assignment = {n: sorted(m.latest()["active"]) for n, m in members.items()}
            started = time.monotonic()
            members[name].terminate()
            members[name] = start(name, True)
            _wait(members, f"the bounce of {name} to settle")
            after = {n: m.latest() for n, m in members.items()}
            restored = {n: after[n]["restored"] - before.get(n, 0) for n in NAMES}
            reports.append(
                {
                    "bounced": name,
                    "changelog records": changelog,
                    "active before": assignment,
                    "active after": {n: sorted(s["active"]) for n, s in after.items()},
                    "restored": restored,
                    "largest restore / partition's changelog": round(
                        max(restored.values()) / (changelog / PARTITIONS), 4
                    ),
                    "s to settle": round(time.monotonic() - started, 1),
                }
            )
            print(json.dumps(reports[-1]), flush=True)
    finally:
        for member in members.values():
            member.kill()
    return reports


def main(argv: list[str]) -> None:
    """Runs the bounce against a local broker (or ``STREAMSTATE_BOOTSTRAP_SERVERS``)."""
    keys = int(argv[0]) if argv else 1_000_000
    with tempfile.TemporaryDirectory() as broker_dir:
        kafka = KafkaTestCluster.from_env_or_start(Path(broker_dir))
        try:
            run(kafka, keys)
        finally:
            kafka.close()


if __name__ == "__main__":
    main(sys.argv[1:])
