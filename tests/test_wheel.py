"""The wheel `make wheel` builds, installed where no Rust toolchain is, as an executor would.

The wheel (``STREAMSTATE_WHEEL``, set by ``make test-python`` after ``make wheel``) goes into a
fresh venv with nothing but its declared dependencies; a plain ``PATH`` without cargo proves no
source build happened. Then (a) that venv's Python imports ``streamstate._core`` and decodes a
batch, and (b) a Spark job whose driver is this venv (the dev tree) runs its Python workers with
the fresh venv's interpreter — a cluster whose executors got the wheel — and ``stamp`` there
imports and runs the wheel's extension.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.wheel, pytest.mark.spark]

_REPO = Path(__file__).parents[1]
_WHEEL = os.environ.get("STREAMSTATE_WHEEL")
# A PATH with the system's tools only: no ~/.cargo/bin, no venv.
_PLAIN_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture(scope="module")
def wheel() -> Path:
    if not _WHEEL:
        if os.environ.get("CI"):
            pytest.fail("CI must test the wheel: run the tests with `make test-python`")
        pytest.skip("no STREAMSTATE_WHEEL: `make test-python` builds the wheel and sets it")
    path = Path(_WHEEL)
    assert path.is_file(), f"STREAMSTATE_WHEEL={_WHEEL} does not exist: run `make wheel`"
    return path


@pytest.fixture(scope="module")
def wheel_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert shutil.which("cargo", path=_PLAIN_PATH) is None
    assert shutil.which("rustc", path=_PLAIN_PATH) is None
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    # The base interpreter, not this venv's: the fresh venv must not see the dev install.
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True)
    env = {
        "PATH": _PLAIN_PATH,
        "HOME": os.environ["HOME"],
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "CARGO_HOME": "/nonexistent",
        "RUSTUP_HOME": "/nonexistent",
    }
    # --only-binary: a dependency without a wheel must not be built from source either. The
    # constraints pin the dependencies to the versions CI tests (a pip cache hit). pandas, as the
    # `spark` extra brings it; not pyspark: Spark ships its own Python code to its workers.
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            *("-m", "pip", "install", "-q", "--only-binary", ":all:"),
            *("-c", str(_REPO / "constraints.txt"), str(wheel), "pandas"),
        ],
        check=True,
        env=env,
    )
    return venv


def _run(python: Path, code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(python), "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd="/",  # not the repo: `python/streamstate` must not shadow the installed package
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_the_wheel_is_manylinux_2_28_abi3_and_self_contained(wheel: Path) -> None:
    assert wheel.name.endswith("-cp310-abi3-manylinux_2_28_x86_64.whl"), wheel.name
    auditwheel = Path(sys.executable).parent / "auditwheel"
    shown = subprocess.run(
        [str(auditwheel), "show", str(wheel)], capture_output=True, text=True, check=True
    ).stdout
    flat = " ".join(shown.split())
    assert 'consistent with the following platform tag: "manylinux_2_28_x86_64"' in flat, shown
    # OpenSSL and zlib are inside the extension (vendored), not libraries it loads.
    for library in ("libssl", "libcrypto", "libz.so"):
        assert library not in shown, shown


def test_the_wheel_imports_and_decodes_without_rust(wheel_venv: Path) -> None:
    out = _run(
        wheel_venv / "bin" / "python",
        """
        import streamstate, streamstate._core
        from streamstate import ConsumerRecord, RecordQueue
        from streamstate.serde import LongDeserializer
        q = RecordQueue("t", 0, value_deserializer=LongDeserializer())
        value = lambda i: (40 + i).to_bytes(8, "big")
        q.add_raw_records([ConsumerRecord("t", 0, i, 1000 + i, None, value(i)) for i in (0, 1, 2)])
        print(streamstate._core.__file__)
        print([q.poll().value for _ in range(3)], q.partition_time)
        """,
    )
    core_file, result = out.splitlines()
    assert core_file.startswith(str(wheel_venv)), core_file
    assert result == "[40, 41, 42] 1002"


def test_spark_workers_run_the_wheel(wheel_venv: Path) -> None:
    worker_python = wheel_venv / "bin" / "python"
    env = {**os.environ, "PYSPARK_PYTHON": str(worker_python)}
    env.pop("PYTHONPATH", None)
    out = _run(
        Path(sys.executable),
        """
        import sys
        from datetime import datetime, timezone
        from streamstate.serde import LongDeserializer
        from streamstate.spark import kafka_source_schema, local_session, stamp

        spark = local_session("local[1]", app_name="streamstate-wheel", shuffle_partitions=1)
        ts = datetime(2024, 1, 1, tzinfo=timezone.utc)
        rows = [(None, (40 + i).to_bytes(8, "big"), "t", 0, i, ts) for i in range(3)]
        df = spark.createDataFrame(rows, kafka_source_schema())
        print(sorted(r.value for r in stamp(df, value_deserializer=LongDeserializer()).collect()))

        def where(_):
            import streamstate._core
            yield sys.executable + " " + streamstate._core.__file__

        print(spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()[0])
        spark.stop()
        """,
        env=env,
    )
    values, origin = out.strip().splitlines()[-2:]
    assert values == "[40, 41, 42]"
    executable, core_file = origin.split(" ")
    assert executable == str(worker_python)
    assert core_file.startswith(str(wheel_venv)), core_file
