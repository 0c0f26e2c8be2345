"""Kafka Streams' ``.checkpoint`` files: the changelog offsets a persistent store has applied.

The format is Kafka Streams' own (``OffsetCheckpoint``, version 0), UTF-8 text::

    0                   <- format version
    2                   <- number of entries
    topic 0 41          <- topic, partition, offset: one line per changelog partition
    topic 1 7

As in Kafka Streams 2.6+, an offset is that of the *last record applied* to the store;
restoration resumes at that offset + 1.

Reading follows Kafka's reader (``OffsetCheckpoint.read``) wherever it can, and is stricter where
Kafka's leniency could hand back a wrong mapping; each rule is documented on :meth:`read`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path

from streamstate.errors import CorruptCheckpointError
from streamstate.records import TopicPartition

__all__ = ["OffsetCheckpoint"]

# Named as before the module moved into streamstate.state: logging is configured by this name.
_log = logging.getLogger("streamstate.checkpoint")

_VERSION = 0
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

# Java's ``BufferedReader.readLine`` ends a line at "\n", "\r" or "\r\n".
_LINE_END = re.compile(r"\r\n|\r|\n")
# Kafka splits an entry on ``\s+``; Java's ``\s`` is [ \t\n\x0B\f\r] (line ends are gone already).
_FIELD_SEP = re.compile(r"[ \t\x0b\x0c]+")
# What Java's ``Integer.parseInt`` / ``Long.parseLong`` accept, restricted to ASCII digits.
_NUMBER = re.compile(r"[+-]?[0-9]+")
# Characters a topic name cannot hold without breaking the line format.
_TOPIC_FORBIDDEN = frozenset(" \t\n\x0b\x0c\r")


class OffsetCheckpoint:
    """A ``.checkpoint`` file mapping changelog partitions to the offset last applied from each.

    ``read()`` parses the file, ``write(offsets)`` replaces it atomically, ``delete()`` removes it.
    One instance serializes its own reads and writes; do not point two instances (or processes)
    at the same path while either writes, as Kafka Streams' state-directory lock ensures.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Refers to the checkpoint file at ``path``; nothing is read or created yet."""
        self._path = Path(path)
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The checkpoint file's path."""
        return self._path

    def __repr__(self) -> str:
        """``OffsetCheckpoint('<path>')``."""
        return f"OffsetCheckpoint({str(self._path)!r})"

    def read(self) -> dict[TopicPartition, int]:
        """Returns the offsets in the file: ``{TopicPartition(topic, partition): offset}``.

        A missing file returns ``{}`` (Kafka: ``NoSuchFileException`` -> empty map). Any other
        ``OSError`` (a directory in its place, no permission) propagates unchanged.

        Raises :class:`CorruptCheckpointError`, whose message names the path and the line, when:

        * the file is empty or ends before the count line (Kafka: ``EOFException``);
        * the bytes are not UTF-8 (Kafka's reader fails to decode them too);
        * the version is not ``0`` ("unknown checkpoint version");
        * a number is not an integer in Java's range (``int`` for version, count and partition,
          ``long`` for offsets); ``+`` signs and leading zeros are accepted, as Java parses them;
        * an entry does not have exactly three fields (fields are separated by runs of spaces or
          tabs and trailing whitespace is ignored, as Kafka's ``split("\\s+")``; leading
          whitespace or an empty line gives an empty first field, so it is malformed, as in Kafka);
        * the number of valid entries differs from the announced count (fewer or more lines);
        * *stricter than Kafka*: a partition is negative, the same partition appears twice
          (Kafka keeps the last one when the count happens to match), or the last line lacks its
          line terminator. Every line Kafka writes ends with one, so a missing terminator means
          the file was cut short: ``topic 0 41`` cut to ``topic 0 4`` must not read as offset 4.

        An entry with a negative offset is skipped and not counted, as Kafka 2.6+ does (its
        ``isValid`` check; the announced count is decremented). Kafka 3.x keeps the sentinel
        ``-4`` ("offset unknown") in the map, where its state manager then treats the partition
        as having no checkpoint; here that sentinel is skipped like any other negative offset,
        so the partition is absent from the result, which restores it in the same way.
        """
        with self._lock:
            try:
                data = self._path.read_bytes()
            except FileNotFoundError:
                return {}
        return self._parse(data)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replaces the file, atomically, with ``offsets`` (the last applied offset of each).

        The text goes to ``<path>.tmp`` in the same directory, is flushed and ``fsync``-ed, then
        renamed over the path with ``os.replace``, and the directory is ``fsync``-ed so that the
        rename survives a crash. A crash at any point leaves either the old file or the new one.
        Lines are sorted by topic, then partition, so equal mappings give identical files.

        An empty mapping writes a valid file with count ``0`` (``read()`` returns ``{}``). Kafka
        3.x deletes the file instead (2.x skipped the write, leaving a stale file behind); both
        read back as no offsets, and the atomic replacement also removes stale offsets.

        The parent directory is not created: as in Kafka, a missing directory raises
        ``FileNotFoundError`` (the store's directory is gone, and recreating it here would hide
        that). ``ValueError`` for a negative offset (Kafka: ``IllegalStateException`` "Attempted
        to write a negative offset to the checkpoint file"; offsets meaning "unknown" are left
        out instead), an offset beyond a Java ``long``, a partition outside ``0..2**31-1``, or a
        topic that is empty or holds whitespace, and ``TypeError`` for an offset that is not an
        ``int``; the existing file is then left untouched.
        """
        text = self._render(offsets)
        tmp = self._path.with_name(self._path.name + ".tmp")
        with self._lock:
            try:
                with open(tmp, "wb") as f:
                    f.write(text.encode("utf-8"))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self._path)
            except BaseException:
                try:
                    tmp.unlink(missing_ok=True)
                except OSError:
                    pass
                raise
            _fsync_directory(self._path.parent)

    def delete(self) -> None:
        """Removes the file if it exists; a missing file is not an error."""
        with self._lock:
            self._path.unlink(missing_ok=True)

    def _render(self, offsets: Mapping[TopicPartition, int]) -> str:
        entries: list[tuple[str, int, int]] = []
        for tp, offset in offsets.items():
            topic, partition = tp.topic, tp.partition
            if not topic or any(c in _TOPIC_FORBIDDEN for c in topic):
                raise ValueError(f"cannot checkpoint topic {topic!r}: empty or contains whitespace")
            if not 0 <= partition <= _INT_MAX:
                raise ValueError(f"cannot checkpoint partition {partition} of topic {topic!r}")
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise TypeError(f"offset of {topic}-{partition} must be an int, not {offset!r}")
            if offset < 0:
                raise ValueError(
                    f"attempted to write a negative offset {offset} for {topic}-{partition} "
                    f"to the checkpoint file {self._path}"
                )
            if offset > _LONG_MAX:
                raise ValueError(f"offset {offset} of {topic}-{partition} exceeds a Java long")
            entries.append((topic, partition, offset))
        entries.sort()
        lines = [str(_VERSION), str(len(entries))]
        lines.extend(f"{topic} {partition} {offset}" for topic, partition, offset in entries)
        return "".join(line + "\n" for line in lines)

    def _corrupt(self, line_no: int, problem: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(
            f"corrupt checkpoint file {str(self._path)!r}, line {line_no}: {problem}"
        )

    def _parse(self, data: bytes) -> dict[TopicPartition, int]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line_no = data.count(b"\n", 0, e.start) + 1
            raise self._corrupt(line_no, "not valid UTF-8") from e
        if not text:
            raise self._corrupt(1, "file is empty")
        lines = _LINE_END.split(text)
        # A complete file ends with a line terminator, leaving an empty string after it.
        if lines[-1] != "":
            raise self._corrupt(len(lines), "last line has no line terminator: file cut short?")
        lines.pop()

        version = self._int(lines[0], 1, "version", _INT_MIN, _INT_MAX)
        if version != _VERSION:
            raise self._corrupt(1, f"unknown checkpoint version {version}")
        if len(lines) < 2:
            raise self._corrupt(2, "file ended before the entry count")
        expected = self._int(lines[1], 2, "entry count", _INT_MIN, _INT_MAX)
        if expected < 0:
            raise self._corrupt(2, f"negative entry count {expected}")

        offsets: dict[TopicPartition, int] = {}
        seen: set[tuple[str, int]] = set()
        for line_no, line in enumerate(lines[2:], start=3):
            pieces = _FIELD_SEP.split(line)
            if pieces and pieces[-1] == "":
                pieces.pop()  # Java's split drops trailing empty strings
            if len(pieces) != 3:
                raise self._corrupt(
                    line_no,
                    f"malformed entry {line!r}: expected 'topic partition offset', "
                    f"found {len(pieces)} field(s)",
                )
            topic = pieces[0]
            if not topic:
                raise self._corrupt(line_no, f"malformed entry {line!r}: leading whitespace")
            partition = self._int(pieces[1], line_no, "partition", _INT_MIN, _INT_MAX)
            if partition < 0:
                raise self._corrupt(line_no, f"negative partition {partition} of topic {topic!r}")
            offset = self._int(pieces[2], line_no, "offset", _LONG_MIN, _LONG_MAX)
            if (topic, partition) in seen:
                raise self._corrupt(line_no, f"duplicate entry for {topic}-{partition}")
            seen.add((topic, partition))
            if offset < 0:
                _log.warning(
                    "Skipping offset=%d for %s-%d read from checkpoint file %s, line %d",
                    offset,
                    topic,
                    partition,
                    self._path,
                    line_no,
                )
                expected -= 1
                continue
            offsets[TopicPartition(topic, partition)] = offset

        if len(offsets) != expected:
            raise self._corrupt(
                2,
                f"expected {expected} valid entries but found {len(offsets)} "
                f"in {len(lines) - 2} entry line(s)",
            )
        return offsets

    def _int(self, field: str, line_no: int, what: str, lo: int, hi: int) -> int:
        if _NUMBER.fullmatch(field) is None:
            raise self._corrupt(line_no, f"{what} {field!r} is not an integer")
        value = int(field)
        if not lo <= value <= hi:
            raise self._corrupt(line_no, f"{what} {field} is out of range")
        return value


def _fsync_directory(directory: Path) -> None:
    """Makes a rename inside ``directory`` durable; a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows, where directories cannot be opened this way
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
