"""``OffsetCheckpoint``: Kafka Streams' ``.checkpoint`` file format, atomic writes, corruption.

The central property: a damaged checkpoint never yields a wrong mapping. Reading either returns
exactly what was written or raises ``CorruptCheckpointError`` (the store is then restored from
scratch). ``_oracle`` below is an independent, regex-based statement of the accepted format that
the hypothesis tests compare the reader against.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamstate
from streamstate import CorruptCheckpointError, OffsetCheckpoint, TopicPartition

TP = TopicPartition
KAFKA_EXAMPLE = b"0\n2\ntopic 0 41\ntopic 1 7\n"
INT_MAX = 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def _read_bytes(tmp_path: Path, data: bytes) -> dict[TopicPartition, int]:
    path = tmp_path / ".checkpoint"
    path.write_bytes(data)
    return OffsetCheckpoint(path).read()


def _as_plain(offsets: dict[TopicPartition, int]) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): offset for tp, offset in offsets.items()}


# --- the format ---------------------------------------------------------------------------------


def test_writes_kafka_format_bytes(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    cp.write({TP("topic", 1): 7, TP("topic", 0): 41})
    assert (tmp_path / ".checkpoint").read_bytes() == KAFKA_EXAMPLE


def test_lines_sorted_by_topic_then_partition(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    cp.write({TP("b", 0): 1, TP("a", 10): 2, TP("a", 2): 3})
    assert cp.path.read_bytes() == b"0\n3\na 2 3\na 10 2\nb 0 1\n"


def test_reads_kafka_format(tmp_path: Path) -> None:
    assert _read_bytes(tmp_path, KAFKA_EXAMPLE) == {TP("topic", 0): 41, TP("topic", 1): 7}


def test_round_trip(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    offsets = {TP("topic", 0): 0, TP("topic", 1): 1, TP("other-topic", 2): LONG_MAX}
    cp.write(offsets)
    assert cp.read() == offsets
    cp.delete()
    assert not cp.path.exists()
    offsets[TP("topic", 3)] = 3
    cp.write(offsets)
    assert cp.read() == offsets


def test_write_replaces_previous_content(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    cp.write({TP("t", 0): 1, TP("t", 1): 2})
    cp.write({TP("t", 1): 5})
    assert cp.read() == {TP("t", 1): 5}


def test_empty_mapping_writes_valid_empty_file(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    cp.write({TP("t", 0): 1})
    cp.write({})
    assert cp.path.read_bytes() == b"0\n0\n"
    assert cp.read() == {}


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert OffsetCheckpoint(tmp_path / "nope" / ".checkpoint").read() == {}


def test_delete_missing_file_is_fine(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    cp.delete()
    cp.write({TP("t", 0): 1})
    cp.delete()
    cp.delete()
    assert not cp.path.exists()


def test_path_repr_and_export(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(str(tmp_path / ".checkpoint"))
    assert cp.path == tmp_path / ".checkpoint"
    assert repr(cp) == f"OffsetCheckpoint({str(tmp_path / '.checkpoint')!r})"
    assert streamstate.OffsetCheckpoint is OffsetCheckpoint
    assert "OffsetCheckpoint" in streamstate.__all__


def test_missing_parent_directory_is_not_created(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / "gone" / ".checkpoint")
    with pytest.raises(FileNotFoundError):
        cp.write({TP("t", 0): 1})
    assert not (tmp_path / "gone").exists()


def test_other_os_errors_propagate(tmp_path: Path) -> None:
    (tmp_path / ".checkpoint").mkdir()
    with pytest.raises(OSError) as info:
        OffsetCheckpoint(tmp_path / ".checkpoint").read()
    assert not isinstance(info.value, CorruptCheckpointError)


# --- lenient reading, as Kafka's reader -----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # Kafka 2.6+ skips negative offsets and decrements the announced count.
        (b"0\n1\nt 0 -1\n", {}),
        (b"0\n2\nt 0 -1\nt 1 5\n", {("t", 1): 5}),
        # Kafka 3.x's "offset unknown" sentinel: no checkpoint for that partition.
        (b"0\n2\nt 0 -4\nt 1 5\n", {("t", 1): 5}),
        # Fields split on runs of whitespace; trailing whitespace ignored (Java's split).
        (b"0\n1\nt\t0  5 \t\n", {("t", 0): 5}),
        # Java's readLine accepts \r\n and \r line ends.
        (b"0\r\n2\r\nt 0 5\r\nt 1 6\r\n", {("t", 0): 5, ("t", 1): 6}),
        (b"0\r1\rt 0 5\r", {("t", 0): 5}),
        # Integer.parseInt / Long.parseLong accept a sign and leading zeros.
        (b"+0\n01\nt +007 0042\n", {("t", 7): 42}),
        # Empty checkpoint: count 0.
        (b"0\n0\n", {}),
        # Any non-whitespace topic; UTF-8.
        ("0\n1\nt\u00f6pic.x_y-1 3 9\n".encode(), {("t\u00f6pic.x_y-1", 3): 9}),
        (f"0\n1\nt {INT_MAX} {LONG_MAX}\n".encode(), {("t", INT_MAX): LONG_MAX}),
    ],
)
def test_lenient_reading(tmp_path: Path, data: bytes, expected: dict[tuple[str, int], int]) -> None:
    assert _as_plain(_read_bytes(tmp_path, data)) == expected


# --- corrupt files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "line", "fragment"),
    [
        (b"", 1, "empty"),
        (b"\n", 1, "version"),
        (b"0", 1, "terminator"),
        (b"0\n", 2, "count"),
        (b"1\n0\n", 1, "unknown checkpoint version 1"),
        (b"-1\n", 1, "unknown checkpoint version -1"),
        (b"x\n0\n", 1, "version 'x' is not an integer"),
        (b"0 \n0\n", 1, "not an integer"),
        (b"\xef\xbb\xbf0\n0\n", 1, "not an integer"),  # a byte-order mark; Java keeps it too
        (b"2147483648\n", 1, "out of range"),
        (b"0\nx\n", 2, "entry count 'x' is not an integer"),
        (b"0\n-1\n", 2, "negative entry count"),
        (b"0\n1\n", 2, "expected 1 valid entries but found 0"),  # fewer lines than announced
        (b"0\n1\nt 0 1\nt 1 2\n", 2, "expected 1 valid entries but found 2"),  # more lines
        (b"0\n2\nt 0 1\n", 2, "expected 2 valid entries but found 1"),
        (b"0\n1\nt 0\n", 3, "found 2 field(s)"),
        (b"0\n1\nt 0 1 2\n", 3, "found 4 field(s)"),
        (b"0\n1\n t 0 1\n", 3, "found 4 field(s)"),  # leading whitespace: empty first field
        (b"0\n1\n t 0\n", 3, "leading whitespace"),
        (b"0\n1\n\n", 3, "found 0 field(s)"),  # an empty line
        (b"0\n1\nt 0 5\n\n", 4, "found 0 field(s)"),
        (b"0\n1\nt x 5\n", 3, "partition 'x' is not an integer"),
        (b"0\n1\nt 0 5.0\n", 3, "offset '5.0' is not an integer"),
        (b"0\n1\nt 0 1_0\n", 3, "offset '1_0' is not an integer"),
        ("0\n1\nt 0 \u0665\n".encode(), 3, "not an integer"),  # a non-ASCII digit
        (b"0\n1\nt -1 5\n", 3, "negative partition -1"),
        (b"0\n1\nt 2147483648 5\n", 3, "partition 2147483648 is out of range"),
        (b"0\n1\nt 0 9223372036854775808\n", 3, "out of range"),
        (b"0\n1\nt 0 -9223372036854775809\n", 3, "out of range"),
        (b"0\n2\nt 0 5\nt 0 6\n", 4, "duplicate entry for t-0"),
        (b"0\n1\nt 0 5\nt 0 6\n", 4, "duplicate entry for t-0"),  # Kafka would keep 6
        (b"0\n1\nt 0 41", 3, "no line terminator"),  # cut short: must not read as offset 41
        (b"0\n1\nt 0 \xff\n", 3, "UTF-8"),
    ],
)
def test_corrupt_file_raises_naming_path_and_line(
    tmp_path: Path, data: bytes, line: int, fragment: str
) -> None:
    path = tmp_path / ".checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpoint(path).read()
    message = str(info.value)
    assert str(path) in message
    assert f"line {line}:" in message
    assert fragment in message


# --- invalid writes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "offsets",
    [
        {TP("t", 0): 0, TP("t", 1): -1, TP("t", 2): 2},  # Kafka: IllegalStateException
        {TP("t", 0): -4},
        {TP("t", 0): LONG_MAX + 1},
        {TP("t"): 5},  # confluent-kafka's default partition is -1 (unassigned)
        {TP("t", -5): 5},
        {TP("", 0): 5},
        {TP("a b", 0): 5},
        {TP("a\nb", 0): 5},
        {TP("a\x0bb", 0): 5},
    ],
)
def test_invalid_write_raises_and_keeps_previous_file(
    tmp_path: Path, offsets: dict[TopicPartition, int]
) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    cp.write({TP("topic", 0): 41, TP("topic", 1): 7})
    with pytest.raises(ValueError):
        cp.write(offsets)
    assert cp.path.read_bytes() == KAFKA_EXAMPLE
    assert sorted(os.listdir(tmp_path)) == [".checkpoint"]


def test_non_int_offset_raises_type_error(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    with pytest.raises(TypeError):
        cp.write({TP("t", 0): True})
    with pytest.raises(TypeError):
        cp.write({TP("t", 0): 1.0})  # type: ignore[dict-item]
    assert not cp.path.exists()


# --- atomicity ----------------------------------------------------------------------------------


def test_write_fsyncs_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kinds: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        kinds.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    OffsetCheckpoint(tmp_path / ".checkpoint").write({TP("t", 0): 1})
    assert kinds == ["file", "dir"]


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_leaves_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    cp = OffsetCheckpoint(tmp_path / ".checkpoint")
    cp.write({TP("topic", 0): 41, TP("topic", 1): 7})

    def crash(*args: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError, match="simulated crash"):
        cp.write({TP("topic", 0): 99})
    monkeypatch.undo()
    assert cp.path.read_bytes() == KAFKA_EXAMPLE
    assert cp.read() == {TP("topic", 0): 41, TP("topic", 1): 7}
    assert not (tmp_path / ".checkpoint.tmp").exists()


def test_process_killed_before_rename_leaves_previous_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    OffsetCheckpoint(path).write({TP("topic", 0): 41, TP("topic", 1): 7})
    # The child dies the moment it would rename: no exception handler or cleanup runs.
    script = textwrap.dedent(
        """
        import os, sys
        from streamstate import OffsetCheckpoint, TopicPartition
        os.replace = lambda *args: os._exit(17)
        OffsetCheckpoint(sys.argv[1]).write({TopicPartition("topic", 0): 99})
        """
    )
    result = subprocess.run([sys.executable, "-c", script, str(path)], check=False)
    assert result.returncode == 17
    assert (tmp_path / ".checkpoint.tmp").read_bytes() == b"0\n1\ntopic 0 99\n"
    cp = OffsetCheckpoint(path)
    assert cp.read() == {TP("topic", 0): 41, TP("topic", 1): 7}
    # The next write overwrites the stale temp file.
    cp.write({TP("topic", 0): 100})
    assert cp.read() == {TP("topic", 0): 100}
    assert sorted(os.listdir(tmp_path)) == [".checkpoint"]


# --- a damaged checkpoint never yields a wrong mapping ------------------------------------------


@contextmanager
def _no_fsync() -> Iterator[None]:
    """Durability is tested above; the property tests skip the (slow) fsyncs."""
    with mock.patch.object(os, "fsync", lambda fd: None):
        yield


def _assert_every_prefix_safe(path: Path, full: bytes, expected: dict[TopicPartition, int]) -> None:
    cp = OffsetCheckpoint(path)
    for cut in range(len(full) + 1):
        path.write_bytes(full[:cut])
        try:
            got = cp.read()
        except CorruptCheckpointError:
            assert cut < len(full)
            continue
        assert got == expected, f"prefix of {cut} bytes read as {got}"


def test_truncation_at_every_byte_is_full_content_or_corrupt(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    expected = {TP("topic", 0): 41, TP("topic", 1): 7, TP("topic", 12): 123456}
    OffsetCheckpoint(path).write(expected)
    _assert_every_prefix_safe(path, path.read_bytes(), expected)
    # Kafka on Windows ends lines with \r\n: cutting between \r and \n loses nothing.
    crlf = b"0\r\n2\r\ntopic 0 41\r\ntopic 1 7\r\n"
    _assert_every_prefix_safe(path, crlf, {TP("topic", 0): 41, TP("topic", 1): 7})


_topics = st.text(alphabet="abcxyz._-09\u00e9", min_size=1, max_size=6)
_mappings = st.dictionaries(
    st.tuples(_topics, st.integers(0, INT_MAX)), st.integers(0, LONG_MAX), max_size=4
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mapping=_mappings)
def test_truncated_random_checkpoints_never_read_wrong(
    tmp_path: Path, mapping: dict[tuple[str, int], int]
) -> None:
    path = tmp_path / ".checkpoint"
    expected = {TP(topic, partition): offset for (topic, partition), offset in mapping.items()}
    with _no_fsync():
        OffsetCheckpoint(path).write(expected)
    full = path.read_bytes()
    assert OffsetCheckpoint(path).read() == expected
    _assert_every_prefix_safe(path, full, expected)


_NUMBER = re.compile(r"[+-]?[0-9]+")
_ENTRY = re.compile(r"([^ \t\x0b\x0c]+)[ \t\x0b\x0c]+(\S+)[ \t\x0b\x0c]+(\S+)[ \t\x0b\x0c]*")


def _oracle(data: bytes) -> dict[tuple[str, int], int] | None:
    """The accepted format, stated independently of the reader; ``None`` means corrupt."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if re.fullmatch(r"(?:[^\r\n]*(?:\r\n|\r|\n))+", text) is None:
        return None
    lines = re.findall(r"([^\r\n]*)(?:\r\n|\r|\n)", text)
    header_ok = len(lines) >= 2 and all(_NUMBER.fullmatch(n) for n in lines[:2])
    if not header_ok or int(lines[0]) != 0 or not 0 <= int(lines[1]) <= INT_MAX:
        return None
    count = int(lines[1])
    result: dict[tuple[str, int], int] = {}
    seen: set[tuple[str, int]] = set()
    for line in lines[2:]:
        m = _ENTRY.fullmatch(line)
        if m is None or not (_NUMBER.fullmatch(m[2]) and _NUMBER.fullmatch(m[3])):
            return None
        key, offset = (m[1], int(m[2])), int(m[3])
        if not 0 <= key[1] <= INT_MAX or not LONG_MIN <= offset <= LONG_MAX or key in seen:
            return None
        seen.add(key)
        if offset < 0:
            count -= 1
        else:
            result[key] = offset
    return result if len(result) == count else None


_FRAGMENTS = [
    "0", "1", "2", "7", "41", "-1", "-4", "+3", "00", "2147483648", "9223372036854775808",
    "topic", "t", "\u00e9", "\u0665", " ", "  ", "\t", "\x0b", "\n", "\n", "\r\n", "\r", "x",
]  # fmt: skip


def _near_checkpoints() -> st.SearchStrategy[bytes]:
    """Bytes that often look like checkpoints: valid ones, mutated ones, and fragment soup."""
    soup = st.lists(st.sampled_from(_FRAGMENTS), max_size=24).map(lambda f: "".join(f).encode())
    entry = st.tuples(
        st.sampled_from(["t", "topic", "\u00e9"]),
        st.sampled_from(["0", "1", "2", "3", "+1", "01", "-1"]),
        st.sampled_from(["0", "5", "41", "-1", "-4", "007", "9223372036854775807"]),
        st.sampled_from([" ", "\t", "  "]),
        st.sampled_from(["\n", "\r\n", "\r", " \n"]),
    ).map(lambda e: f"{e[0]}{e[3]}{e[1]}{e[3]}{e[2]}{e[4]}")
    # The announced count is usually right: entry lines, negative offsets included.
    structured = st.tuples(
        st.sampled_from(["0\n", "0\n", "0\n", "0\r\n", "1\n", "+0\n"]),
        st.sampled_from([0, 0, 0, 0, -1, 1]),
        st.lists(entry, max_size=4),
    ).map(lambda p: (p[0] + f"{len(p[2]) + p[1]}\n" + "".join(p[2])).encode())

    @st.composite
    def mutated(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(structured))
        for _ in range(draw(st.integers(0, 2))):
            pos = draw(st.integers(0, len(data)))
            kind = draw(st.sampled_from(["cut", "delete", "insert"]))
            if kind == "cut":
                del data[pos:]
            elif kind == "delete":
                del data[pos : pos + 1]
            else:
                data[pos:pos] = draw(st.sampled_from(_FRAGMENTS)).encode()
        return bytes(data)

    return st.one_of(soup, structured, mutated(), st.binary(max_size=40))


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_near_checkpoints())
def test_any_bytes_read_as_oracle_or_corrupt(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / ".checkpoint"
    path.write_bytes(data)
    cp = OffsetCheckpoint(path)
    expected = _oracle(data)
    try:
        got = cp.read()
    except CorruptCheckpointError as e:
        assert expected is None, f"rejected a valid file: {e}"
        assert str(path) in str(e)
        assert re.search(r"line \d+:", str(e))
        return
    assert _as_plain(got) == expected
    # The input normalized: rewriting what was read gives the canonical file, which reads back.
    with _no_fsync():
        cp.write(got)
    entries = sorted(_as_plain(got).items())
    canonical = f"0\n{len(entries)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in entries)
    assert path.read_bytes() == canonical.encode()
    assert cp.read() == got
