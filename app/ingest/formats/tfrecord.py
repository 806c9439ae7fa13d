"""TFRecord framing, as TensorBoard event files use it. Each record is (little-endian)::

    uint64 length | uint32 masked crc32c(length) | length bytes of data | uint32 masked crc32c(data)

``read(data, base)`` gives ``([(offset, data bytes), ...], problems, consumed)``: ``consumed``
counts the bytes of whole records (a record still being written waits, like a line without
its ``\\n``). A record whose data checksum fails is skipped with an ``error`` problem (its
length was checked, so the next record is found). A length whose checksum fails cannot be
trusted: the reader **resyncs** to the next position whose 12-byte header checks, rather than
stopping, so a file that goes on growing after one bad byte is still read.
"""

from __future__ import annotations

import struct

import google_crc32c

from ..parse import Problem

HEADER = 12  # length and its checksum
FOOTER = 4  # the data's checksum
_MASK_DELTA = 0xA282EAD8  # TensorFlow's mask: a CRC of data holding CRCs is still varied


def masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def header_ok(data: bytes, pos: int = 0) -> bool:
    """Whether the 12 bytes at ``pos`` are a record header whose checksum matches."""
    (crc,) = struct.unpack_from("<I", data, pos + 8)
    return masked_crc(data[pos:pos + 8]) == crc


def read(data: bytes, base: int) -> tuple[list[tuple[int, bytes]], list[Problem], int]:
    records: list[tuple[int, bytes]] = []
    problems: list[Problem] = []
    pos = 0
    while len(data) - pos >= HEADER:
        if not header_ok(data, pos):
            problems.append(Problem(base + pos, "error", "TFRecord length checksum does not "
                                    "match (a corrupt file); skipped to the next record whose "
                                    "checksum matches"))
            pos = _resync(data, pos + 1)
            continue
        (length,) = struct.unpack_from("<Q", data, pos)
        end = pos + HEADER + length + FOOTER
        if end > len(data):
            break  # still being written
        body = data[pos + HEADER:end - FOOTER]
        if masked_crc(body) == struct.unpack_from("<I", data, end - FOOTER)[0]:
            records.append((base + pos, body))
        else:
            problems.append(Problem(base + pos, "error", f"TFRecord data checksum does not "
                                    f"match ({length} bytes); record skipped"))
        pos = end
    return records, problems, pos


def _resync(data: bytes, start: int) -> int:
    """The first position from ``start`` holding a header that checks; where none does, the
    first position whose 12 bytes are not all there yet."""
    last = len(data) - HEADER
    for pos in range(start, last + 1):
        if header_ok(data, pos):
            return pos
    return max(start, last + 1)
