"""The DSL's guide and the README's DSL example run as written: ``docs/dsl.md``'s ``python``
blocks and the README block that builds a ``StreamsBuilder`` program (which asserts its own
results through the ``TopologyTestDriver``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


@pytest.mark.parametrize("index", range(len(blocks(ROOT / "docs" / "dsl.md"))))
def test_the_dsl_guide_examples_run(index: int) -> None:
    code = blocks(ROOT / "docs" / "dsl.md")[index]
    namespace: dict[str, object] = {}
    exec(compile(code, f"docs/dsl.md block {index}", "exec"), namespace)
    assert "topology" in namespace


def test_the_readme_word_count_runs_and_checks_its_counts() -> None:
    dsl = [code for code in blocks(ROOT / "README.md") if "StreamsBuilder()" in code]
    assert dsl, "the README shows a DSL program"
    namespace: dict[str, object] = {}
    exec(compile(dsl[0], "README.md", "exec"), namespace)
    assert namespace["counts"] is not None
