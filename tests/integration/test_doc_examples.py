"""The README's and ``docs/topologies.md``'s examples run as written against a broker.

Every ``python`` and ``python broker`` block of each document runs, in order, in one namespace
per document (a later block may use what an earlier one defined, as a reader running them in
one session would), with ``STREAMSTATE_BOOTSTRAP_SERVERS`` naming the test broker (what
``export STREAMSTATE_BOOTSTRAP_SERVERS=$(streamstate kafka start)`` sets), in an empty working
directory and with the temporary directory (the default ``state.dir``) of the test's own.
``python spark`` blocks are only compiled (a Spark session takes a minute to start).
``docs/api.md``'s blocks run in ``tests/unit/test_api_doc.py``; its ``python broker`` blocks
are only compiled there.
"""

from __future__ import annotations

import ast
import contextlib
import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tests.unit.test_api_doc import Block, fenced_blocks

from streamstate.kafka_local import KafkaTestCluster

ROOT = Path(__file__).resolve().parents[2]
RUN = ("python", "python broker")


def run_document(
    name: str, kafka: KafkaTestCluster, tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], list[tuple[Block, Any]], str]:
    """Runs ``name``'s blocks; returns the namespace, each top-level expression's value with
    its block, and what the blocks printed."""
    every = [b for b in fenced_blocks((ROOT / name).read_text()) if b.info.startswith("python")]
    for block in every:  # the Spark ones too, which run in no test here: they compile
        compile(block.code, f"{name}:{block.line}", "exec")
    blocks = [b for b in every if b.info in RUN]
    assert any(b.info == "python broker" for b in blocks), f"{name} shows no broker example"
    monkeypatch.setenv("STREAMSTATE_BOOTSTRAP_SERVERS", kafka.bootstrap_servers)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.chdir(tmp)
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    values: list[tuple[Block, Any]] = []
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            for statement in ast.parse(block.code).body:
                where = f"{name}:{block.line + statement.lineno - 1}"
                if isinstance(statement, ast.Expr):
                    code = compile(ast.Expression(statement.value), where, "eval")
                    values.append((block, eval(code, namespace)))
                else:
                    module = ast.Module(body=[statement], type_ignores=[])
                    exec(compile(module, where, "exec"), namespace)
    return namespace, values, printed.getvalue()


def _close_apps(namespace: dict[str, Any]) -> None:
    app = namespace.get("app")
    if app is not None:
        app.close(30)


def test_the_readme_examples_run(
    kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace: dict[str, Any] = {}
    try:
        namespace, values, printed = run_document("README.md", kafka, tmp_path, monkeypatch)
    finally:
        _close_apps(namespace)
    # The consumer example printed the two orders it produced (it stopped at the first empty
    # poll before it read anything, and read from the end: nothing).
    lines = printed.splitlines()
    assert any(line.endswith("{'id': 1, 'meta': {'ts': 1700000000000}}") for line in lines)
    assert any(line.endswith("{'id': 2, 'meta': {'ts': 1700000000500}}") for line in lines)
    # The stateful app's query, after wait_for_state(RUNNING), found the click counted.
    (count,) = [v for b, v in values if "count_clicks" in b.code and isinstance(v, bytes)]
    assert int(count) >= 1


def test_the_topologies_word_count_runs(
    kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace: dict[str, Any] = {}
    try:
        namespace, values, _ = run_document("docs/topologies.md", kafka, tmp_path, monkeypatch)
    finally:
        _close_apps(namespace)
    (count,) = [v for _, v in values if isinstance(v, bytes)]
    assert int(count) >= 1
