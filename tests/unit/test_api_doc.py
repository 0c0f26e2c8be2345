"""``docs/api.md`` stays true: every public name is documented, and its examples run.

Each check here is able to fail:

* every name in the ``__all__`` of a public module has an entry in the reference: a heading,
  a list item or a table row whose first code span is the name (a passing mention in prose
  does not count), so a public name added without documentation fails here; every public
  module has a section, and every link of the table of contents reaches a heading;
* every option of every ``streamstate`` subcommand (as its ``--help`` lists it) is mentioned;
* every fenced block whose info string is exactly ``python`` runs, in a fresh namespace and an
  empty working directory, and a statement ending in a comment ``# -> RESULT`` must evaluate
  to ``RESULT`` (its ``repr``, or a value equal to ``RESULT`` evaluated in the block's
  namespace), and one ending in ``# raises ErrorClass`` must raise that class. Blocks marked
  ``python broker`` or ``python spark`` need a Kafka broker or a Spark session: they are only
  compiled;
* no document, test, comment or source file refers to a file outside the repository.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import io
import logging
import os
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import streamstate.errors

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"

# The modules whose ``__all__`` is the public surface the reference documents.
PUBLIC_MODULES = [
    "streamstate",
    "streamstate.records",
    "streamstate.serde",
    "streamstate.timestamps",
    "streamstate.queue",
    "streamstate.stores",
    "streamstate.checkpoint",
    "streamstate.changelog",
    "streamstate.topic_restore",
    "streamstate.app",
    "streamstate.processor",
    "streamstate.dsl",
    "streamstate.spark",
    "streamstate.testing",
    "streamstate.monitoring",
    "streamstate.tools",
    "streamstate.errors",
]

# Subcommand paths of the command line whose options the reference must mention.
CLI_COMMANDS = [
    ["restore"],
    ["query"],
    ["run"],
    ["reset"],
    ["demo"],
    ["kafka", "start"],
    ["kafka", "stop"],
    ["kafka", "status"],
]

# Info-string words after ``python`` that mark an example as shown but not run.
NOT_RUN = {"broker", "spark"}
# The reference must keep at least this many runnable examples and checked results: renaming
# every block's info string would otherwise pass silently.
MIN_RUNNABLE_BLOCKS = 20
MIN_CHECKED_RESULTS = 100

RESULT = re.compile(r"#\s*->\s*(?P<result>.+?)\s*$")
RAISES = re.compile(r"#\s*raises\s+(?P<error>[A-Za-z_][A-Za-z0-9_.]*)\s*$")
FIRST_CODE_SPAN = re.compile(r"^\s*(?:#{1,6}\s+|[-*]\s+|\|\s*)[^`\n|]*?`(?P<span>[^`]+)`")


@dataclass(frozen=True)
class Block:
    """One fenced code block of the reference."""

    info: str
    line: int  # 1-based line of the first code line
    code: str
    heading: str


def doc_text() -> str:
    return API_DOC.read_text(encoding="utf-8")


def fenced_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    heading = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        fence = re.match(r"^(```+)(.*)$", line)
        if fence is None:
            i += 1
            continue
        marker, info = fence.group(1), fence.group(2).strip()
        first = i + 2  # 1-based number of the block's first code line
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith(marker):
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"docs/api.md: unclosed code block opened at line {first - 1}"
        blocks.append(Block(info, first, "\n".join(body) + "\n", heading))
        i += 1
    return blocks


def python_blocks() -> list[Block]:
    return [b for b in fenced_blocks(doc_text()) if b.info.split()[:1] == ["python"]]


def runnable_blocks() -> list[Block]:
    return [b for b in python_blocks() if b.info == "python"]


def headings(text: str) -> list[str]:
    """The heading lines, outside code blocks."""
    found, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            found.append(line)
    return found


def documented_names(text: str) -> set[str]:
    """Names that have an entry: the first code span of a heading, list item or table row,
    as ``Name``, ``Name(...)``, ``module.Name`` or ``obj.Name`` (its last dotted part)."""
    names: set[str] = set()
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        match = FIRST_CODE_SPAN.match(line)
        if match is None:
            continue
        spans = [match.group("span")]
        if line.lstrip().startswith("|"):
            # A table row names its entries in its first cell: every code span there counts.
            spans = re.findall(r"`([^`]+)`", line.strip().strip("|").split("|", 1)[0])
        for span in spans:
            head = re.match(r"[A-Za-z_][A-Za-z0-9_.]*", span.strip())
            if head is not None:
                names.add(head.group(0).rsplit(".", 1)[-1])
                names.add(head.group(0))
    return names


def public_names() -> list[tuple[str, str]]:
    pairs = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            pairs.append((module_name, name))
    return pairs


# ------------------------------------------------------------------------------------------
# Every public name has an entry
# ------------------------------------------------------------------------------------------


def test_every_public_name_has_an_entry() -> None:
    documented = documented_names(doc_text())
    missing = [f"{m}.{n}" for m, n in public_names() if n not in documented]
    assert not missing, (
        "public names without an entry (a heading, list item or table row starting with the "
        f"name in backticks) in docs/api.md: {missing}"
    )


def test_the_entry_check_sees_a_removed_entry() -> None:
    # The check above must fail when an entry goes: remove RecordQueue's heading and every
    # list item or table row that starts with it.
    text = doc_text()
    assert "RecordQueue" in documented_names(text)

    def is_entry(line: str) -> bool:
        match = FIRST_CODE_SPAN.match(line)
        return match is not None and match.group("span").startswith("RecordQueue")

    stripped = "\n".join(line for line in text.splitlines() if not is_entry(line))
    assert "RecordQueue" not in documented_names(stripped)


def slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_internal_link_has_its_heading() -> None:
    text = doc_text()
    anchors = {slug(line) for line in headings(text)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links, "docs/api.md has no table of contents"
    broken = sorted(set(links) - anchors)
    assert not broken, f"links in docs/api.md to headings that do not exist: {broken}"


def test_every_public_module_has_a_section() -> None:
    text = doc_text()
    missing = [
        m for m in PUBLIC_MODULES[1:] if not any(f"`{m}`" in line for line in headings(text))
    ]
    assert not missing, f"modules without a section heading in docs/api.md: {missing}"


# ------------------------------------------------------------------------------------------
# Every command-line option is mentioned
# ------------------------------------------------------------------------------------------


def cli_options(command: list[str]) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "streamstate", *command, "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", out)) - {"--help"}


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=" ".join)
def test_every_command_line_option_is_mentioned(command: list[str]) -> None:
    text = doc_text()
    heading = f"`streamstate {command[0]}"
    assert any(heading in line for line in headings(text)), (
        f"docs/api.md has no heading for {heading}`"
    )
    options = cli_options(command)
    name = f"streamstate {' '.join(command)}"
    assert options, f"`{name} --help` lists no options"
    missing = sorted(o for o in options if f"`{o}" not in text and f" {o}" not in text)
    assert not missing, f"options of `{name}` not in docs/api.md: {missing}"


# ------------------------------------------------------------------------------------------
# The examples run and show what they claim
# ------------------------------------------------------------------------------------------


def test_every_python_block_is_marked_and_compiles() -> None:
    blocks = python_blocks()
    for block in blocks:
        words = block.info.split()
        assert words == ["python"] or (len(words) == 2 and words[1] in NOT_RUN), (
            f"docs/api.md line {block.line}: info string {block.info!r}; use `python` (runs in "
            f"the tests) or `python broker` / `python spark` (shown only)"
        )
        compile(block.code, f"docs/api.md:{block.line}", "exec")
    assert len(runnable_blocks()) >= MIN_RUNNABLE_BLOCKS


def comments_by_line(code: str) -> dict[int, str]:
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    return comments


def resolve_error(name: str, namespace: dict[str, Any]) -> type[BaseException]:
    head, _, rest = name.partition(".")
    for scope in (namespace, vars(builtins), vars(streamstate.errors)):
        if head in scope:
            obj = scope[head]
            for part in rest.split(".") if rest else []:
                obj = getattr(obj, part)
            assert isinstance(obj, type) and issubclass(obj, BaseException), name
            return obj
    raise AssertionError(f"unknown error class {name!r} in a `# raises` comment")


def run_block(block: Block) -> int:
    """Runs ``block`` statement by statement; returns how many results it checked."""
    where = f"docs/api.md line {block.line} ({block.heading})"
    tree = ast.parse(block.code)
    comments = comments_by_line(block.code)
    namespace: dict[str, Any] = {"__name__": "__api_doc_example__"}
    ends = {statement.end_lineno for statement in tree.body}
    for number, comment in comments.items():
        if (RESULT.search(comment) or RAISES.search(comment)) and number not in ends:
            raise AssertionError(
                f"{where}, line {block.line + number - 1}: a `# ->` or `# raises` comment is "
                "only checked at the end of a top-level statement; move it out of the block"
            )
    checked = 0
    for statement in tree.body:
        assert statement.end_lineno is not None
        line = block.line + statement.lineno - 1
        comment = comments.get(statement.end_lineno, "")
        expected = RESULT.search(comment)
        raises = RAISES.search(comment)
        module = ast.Module(body=[statement], type_ignores=[])
        if raises is not None:
            error = resolve_error(raises.group("error"), namespace)
            with pytest.raises(error):
                exec(compile(module, f"docs/api.md:{line}", "exec"), namespace)
            checked += 1
            continue
        if expected is None:
            exec(compile(module, f"docs/api.md:{line}", "exec"), namespace)
            continue
        assert isinstance(statement, ast.Expr), f"{where}: `# ->` follows a non-expression"
        value = eval(
            compile(ast.Expression(statement.value), f"docs/api.md:{line}", "eval"), namespace
        )
        shown = expected.group("result")
        if repr(value) != shown:
            try:
                equal = bool(eval(shown, namespace) == value)
            except Exception:
                equal = False
            assert equal, f"{where}, line {line}: shows {shown}, but the result is {value!r}"
        checked += 1
    return checked


def _block_id(block: Block) -> str:
    return f"line{block.line}"


@pytest.fixture
def in_empty_directory(tmp_path: Path) -> Iterator[Path]:
    """Runs the examples in an empty directory, and undoes logger levels they may set."""
    previous = Path.cwd()
    levels = {
        name: logger.level
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(previous)
        for name, logger in logging.Logger.manager.loggerDict.items():
            if isinstance(logger, logging.Logger):
                logger.setLevel(levels.get(name, logging.NOTSET))


@pytest.mark.parametrize("block", runnable_blocks(), ids=_block_id)
def test_example_runs(block: Block, in_empty_directory: Path) -> None:
    run_block(block)


def test_examples_check_their_results(in_empty_directory: Path) -> None:
    checked = sum(run_block(block) for block in runnable_blocks())
    assert checked >= MIN_CHECKED_RESULTS


def test_a_wrong_result_fails() -> None:
    # The checker itself must be able to fail: a wrong result, a missing exception.
    with pytest.raises(AssertionError):
        run_block(Block("python", 1, "1 + 1  # -> 3\n", "self-test"))
    with pytest.raises(pytest.fail.Exception):
        run_block(Block("python", 1, "int('1')  # raises ValueError\n", "self-test"))
    assert run_block(Block("python", 1, "int('x')  # raises ValueError\n[1]  # -> [1]\n", "")) == 2
    with pytest.raises(AssertionError, match="top-level"):
        run_block(Block("python", 1, "if True:\n    1  # -> 2\n    pass\n", "self-test"))


# ------------------------------------------------------------------------------------------
# The repository stands alone
# ------------------------------------------------------------------------------------------

REPO = API_DOC.parents[1]
# References to files that are not in the repository (an absolute path, a sibling directory,
# design notes kept elsewhere). ``docs/api.md`` is the reference that is in the repository.
OUTSIDE = re.compile(r"/work/|\.\./shared|(?<![\w/.-])(?:API|DESIGN)\.md|\bseeds? `?\d{3}\b")
SCANNED = ("README.md", "Makefile", "pyproject.toml", "Cargo.toml")
SCANNED_TREES = {
    "docs": ("*.md",),
    "python": ("*.py", "*.pyi"),
    "tests": ("*.py",),
    "benches": ("*.py",),
    "rust": ("*.rs",),
}


def scanned_files() -> Iterator[Path]:
    for name in SCANNED:
        yield REPO / name
    for tree, patterns in SCANNED_TREES.items():
        for pattern in patterns:
            yield from (REPO / tree).rglob(pattern)


def test_no_file_refers_outside_the_repository() -> None:
    offending = []
    for path in scanned_files():
        relative = path.relative_to(REPO).as_posix()
        # This module names the patterns it looks for.
        if path == Path(__file__).resolve() or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                offending.append(f"{relative}:{number}: {line.strip()}")
    assert not offending, "references to files outside the repository:\n" + "\n".join(offending)


def test_the_outside_reference_check_can_fail() -> None:
    for line in (
        "see /work/shared/API.md",
        "as API.md states",
        "`../shared/DESIGN.md`",
        "(seed 003, Kafka's AbstractCoordinator)",
        "protocol (seed `000`; Kafka 2.x)",
    ):
        assert OUTSIDE.search(line), line
    for line in ("see docs/api.md", "the API documentation", "deterministic per seed 7"):
        assert not OUTSIDE.search(line), line
