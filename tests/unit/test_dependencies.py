"""Every third-party module streamstate imports is a declared dependency of the package."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import streamstate

_PACKAGE = Path(streamstate.__file__).parent
# What the `spark` extra brings; everything else must be a core dependency, because
# `streamstate.spark` also runs with a pyspark the user installed without the extra.
_SPARK_EXTRA = {"pyspark", "pandas"}
# What the `prometheus` extra brings (only `streamstate.monitoring.prometheus` imports it).
_PROMETHEUS_EXTRA = {"prometheus_client"}


def _imported_top_level_modules() -> set[str]:
    modules: set[str] = set()
    for path in _PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {"streamstate", "__future__"}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], set[str], set[str]]:
    core: set[str] = set()
    spark: set[str] = set()
    prometheus: set[str] = set()
    for requirement in importlib.metadata.requires("streamstate") or []:
        name = _normalized(re.split(r"[<>=!~; \[]", requirement, maxsplit=1)[0])
        if "extra == 'spark'" in requirement:
            spark.add(name)
        elif "extra == 'prometheus'" in requirement:
            prometheus.add(name)
        elif ";" not in requirement:
            core.add(name)
    return core, spark, prometheus


def test_every_imported_third_party_module_is_declared() -> None:
    # numpy was imported by streamstate.spark and not declared: in a venv with pyspark and
    # streamstate, `import streamstate.spark` failed with ModuleNotFoundError.
    distributions = importlib.metadata.packages_distributions()
    core, spark, prometheus = _declared()
    for module in sorted(_imported_top_level_modules()):
        names = {_normalized(d) for d in distributions.get(module, [module])}
        if module in _SPARK_EXTRA:
            assert names & spark, f"{module} is imported but not in the spark extra"
        elif module in _PROMETHEUS_EXTRA:
            assert names & prometheus, f"{module} is imported but not in the prometheus extra"
        else:
            assert names & core, f"{module} is imported but not a dependency of streamstate"
