"""TensorBoard event records decoded in bulk (tfevents.py's fast path, issue 23: a protobuf
and a few Python objects per record made 1,000,000 events take 18 s).

A writer's scalar events differ from one another only in their numbers: the wall time, the
step and each ``simple_value``. The bytes of one record of each length are read once, field
by field (``_layout``), into a template: where those numbers sit, and every other byte (field
keys, lengths, tags, metadata). Every record of that length whose other bytes are the
template's is then read by numpy from the positions, all at once; the protobuf library reads
the template record too, and a template it disagrees with is not used. A record no template
fits (a tensor scalar, the file_version record, a histogram) goes to the protobuf reader
(``slow``), one by one, in its place in the file::

    found = decode(data, starts, lengths, base, problems, slow)
    found.step, found.time, found.tag, found.value  # one entry per scalar, in file order
    found.tags[found.tag[0]]                         # "loss"
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import google_crc32c
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...keys import STEP, TIME
from . import EVAL, TRAIN, Problem, Record
from .tfrecord import HEADER, data_ok, data_problem, masked, stored_crcs

_BULK = 32  # records of one length before a template is worth making
_TEMPLATES = 4  # templates tried per length before the rest go one by one
_LONGEST = 4096  # a longer record holds more than scalars (a histogram, an image, a graph)
_POW10 = 10.0 ** np.arange(23)  # every power of ten a double holds exactly
_BLOCK = 32768  # values worked on at once: a dozen arrays of them fit in the cache
_ROWS = 16384  # records' rows worked on at once: 1 MB of 64-byte rows


@dataclass
class Scalars:
    """One entry per scalar, in the order of the file: its record's offset, and the Event's
    step and wall time, the tag (an index into ``tags``) and the value."""
    offset: np.ndarray
    step: np.ndarray
    time: np.ndarray
    tag: np.ndarray
    value: np.ndarray
    tags: list[str]

    def head(self, count: int) -> Scalars:
        return Scalars(self.offset[:count], self.step[:count], self.time[:count],
                       self.tag[:count], self.value[:count], self.tags)


@dataclass
class _Layout:
    """Where the numbers of one record sit: the template's bytes, the bits of them every
    record must share, the wall time's position, the step's varint (position, length), each
    value's position and tag, and what the data checksum of a record that fits is made of
    (``_Sums``)."""
    body: np.ndarray
    fixed: np.ndarray
    wall: int
    step: tuple[int, int]
    values: list[tuple[int, str]]
    sums: _Sums


@dataclass
class _Sums:
    """CRC-32C is linear: of two records of one length, ``crc(a ^ b) = crc(a) ^ crc(b) ^
    crc(zeros)``. So the checksum of a record that fits a template is that of the template
    with its varying bytes zeroed (``zeroed``), xor each varying byte's own part (the crc of
    that byte alone among zeros, xor crc(zeros)), looked up two bytes at a time: for the
    16 bits at ``2 * pairs[i]`` holding ``v``, ``parts[i][v]``. A million checksums cost ten
    table lookups each, not a call of crc32c each (0.2 s)."""
    pairs: list[int]
    parts: list[np.ndarray]
    zeroed: int

    @classmethod
    def of(cls, body: bytes, varies: np.ndarray) -> _Sums:
        at = np.flatnonzero(varies)
        zeros = google_crc32c.value(bytes(len(body)))
        alone = bytearray(len(body))
        bits = np.zeros((len(at), 8), np.uint32)  # the part of each bit of each varying byte
        for i, pos in enumerate(at.tolist()):
            for bit in range(8):
                alone[pos] = 1 << bit
                bits[i, bit] = google_crc32c.value(bytes(alone)) ^ zeros
            alone[pos] = 0
        held = (np.arange(256)[:, None] >> np.arange(8)) & 1  # (byte, bit): whether it is set
        parts = np.bitwise_xor.reduce(np.where(held[None], bits[:, None, :], 0), axis=2)
        byte = dict(zip(at.tolist(), parts.astype(np.uint32), strict=True))
        none = np.zeros(256, np.uint32)  # a byte that does not vary: its part is in zeroed
        pairs = sorted({pos // 2 for pos in byte})
        tables = [(byte.get(2 * q + 1, none)[:, None] ^ byte.get(2 * q, none)[None, :]).ravel()
                  for q in pairs]  # little-endian: the second byte is the high one
        zeroed = np.frombuffer(body, np.uint8).copy()
        zeroed[at] = 0
        return cls(pairs, tables, google_crc32c.value(zeroed.tobytes()))

    def match(self, rows: np.ndarray, stored: np.ndarray) -> np.ndarray:
        """Whether each row's data checksum is the one ``stored`` after it (``rows``: an
        even number of bytes wide, those past the record's ignored)."""
        halves = rows.view("<u2")
        crc = np.full(len(rows), self.zeroed, np.uint32)
        for pair, table in zip(self.pairs, self.parts, strict=True):
            crc ^= table[halves[:, pair]]
        return masked(crc) == stored


class _NotSimple(Exception):
    """The record holds more than the fields a template reads."""


def decode(data: bytes, starts: np.ndarray, lengths: np.ndarray, base: int,
           problems: list[Problem], slow) -> Scalars:
    """The scalars of the records at ``starts`` (their data ``lengths`` long), whose data
    checksums are checked here (``tfrecord.scan(data_checked=False)``): a record whose
    checksum fails is skipped, its problem among the framing's ``problems`` in file order.
    ``slow(offset, body)`` reads one record the careful way: ``[(step, time, tag, value),
    ...]`` or the Problem that skips it (appended to ``problems``)."""
    buf = np.frombuffer(data, np.uint8)
    bodies = starts + HEADER
    tags: dict[str, int] = {}
    pieces, rest, bad = [], [], []
    for length, members in _by_length(lengths):
        rest += _templated(buf, bodies, length, members, base, slow, tags, pieces, bad)
    rest = np.sort(np.array(rest, np.int64))
    rest = rest[data_ok(data, starts[rest], lengths[rest], base, bad)]
    problems[:] = sorted([*problems, *bad], key=lambda problem: problem.offset)
    one_by_one = _one_by_one(data, bodies, lengths, rest, base, slow, problems)
    return _assemble(len(starts), starts + base, pieces, rest, one_by_one, tags)


def _by_length(lengths: np.ndarray):
    """``(length, record indices)`` for each length common enough for a template; the
    records of the other lengths come last as ``(None, indices)``."""
    short = np.minimum(lengths, _LONGEST)
    counts = np.bincount(short, minlength=_LONGEST + 1) if len(lengths) else np.zeros(1, int)
    common = np.flatnonzero(counts >= _BULK)
    common = common[common < _LONGEST]
    for length in common.tolist():
        yield length, np.flatnonzero(short == length)
    yield None, np.flatnonzero(counts[short] < _BULK) if len(common) else np.arange(
        len(lengths))


def _templated(buf, bodies, length, members, base, slow, tags, pieces, bad) -> list[int]:
    """Reads the records of one length that a template fits into ``pieces``: ``(indices,
    steps, times, tag ids, values)``, and the problems of those whose checksum fails into
    ``bad``; gives back the indices of the others (their checksums not checked yet)."""
    if length is None or not len(members):
        return members.tolist()
    wide = -(-length // 8) * 8  # rows of whole 8-byte words: a word at a time (_fits)
    room = bodies[members] + wide <= len(buf)  # the file's last record may have no room
    left = members[~room].tolist()
    members = members[room]
    for _ in range(_TEMPLATES):
        if not len(members):
            return left
        at = int(bodies[members[0]])
        first = buf[at:at + length].tobytes()
        whole = _sum_ok(first, stored_crcs(buf, bodies[members[:1]] + length)[0])
        layout = _layout(first) if whole else None
        if layout is None or not _agrees(layout, first, at + base, slow):
            left.append(int(members[0]))
            members = members[1:]
            continue
        read, members = _fitting(layout, buf, bodies, members, wide, base, bad)
        ids = [tags.setdefault(tag, len(tags)) for _, tag in layout.values]
        pieces.append((*read, ids))
    return left + members.tolist()


def _fitting(layout: _Layout, buf, bodies, members, wide: int, base: int, bad: list):
    """``((records, steps, times, values), misfits)``: the records the template fits whose
    checksums match, read a block at a time (a block's rows stay in the cache: 2x), and
    those it does not fit; a problem in ``bad`` for each whose checksum fails."""
    length = len(layout.body)
    windows = sliding_window_view(buf, wide)
    read, misfits = [], []
    for at in range(0, len(members), _ROWS):
        block = members[at:at + _ROWS]
        rows = windows[bodies[block]]
        fits = _fits(layout, rows)
        if not fits.all():
            misfits.append(block[~fits])
            block, rows = block[fits], rows[fits]
        ok = layout.sums.match(rows, stored_crcs(buf, bodies[block] + length))
        if not ok.all():
            bad += [data_problem(base + int(bodies[i]) - HEADER, length)
                    for i in block[~ok].tolist()]
            block, rows = block[ok], rows[ok]
        read.append((block, *_numbers(layout, rows)))
    joined = tuple(np.concatenate(column) for column in zip(*read, strict=True))
    return joined, np.concatenate(misfits) if misfits else members[:0]


def _sum_ok(body: bytes, stored: int) -> bool:
    return int(masked(np.array([google_crc32c.value(body)]))[0]) == int(stored)


def _fits(layout: _Layout, rows: np.ndarray) -> np.ndarray:
    """Which rows have the template's bytes wherever it holds no number, and its varint
    shape (the continuation bits) where it holds the step: one pass over the rows, 8 bytes
    at a time (``rows`` are whole words wide; the bytes past the record are not compared)."""
    wide = rows.shape[1]
    body, fixed = (np.zeros(wide, np.uint8) for _ in range(2))
    body[:len(layout.body)], fixed[:len(layout.fixed)] = layout.body, layout.fixed
    words = rows.view("<u8")  # rows gathered by index: contiguous
    return ~((words ^ body.view("<u8")) & fixed.view("<u8")).any(axis=1)


def _numbers(layout: _Layout, rows: np.ndarray):
    """The steps, wall times and (records, values) float32 values of rows that fit."""
    times = np.ascontiguousarray(rows[:, layout.wall:layout.wall + 8]).view("<f8")[:, 0]
    at, size = layout.step
    steps = np.zeros(len(rows), np.uint64)
    for i in range(size):
        steps |= (rows[:, at + i] & 0x7F).astype(np.uint64) << np.uint64(7 * i)
    values = np.stack([np.ascontiguousarray(rows[:, p:p + 4]).view("<f4")[:, 0]
                       for p, _ in layout.values], axis=1)
    return steps.view(np.int64), times, values


def _agrees(layout: _Layout, body: bytes, offset: int, slow) -> bool:
    """Whether the protobuf reader reads the template record as the template does."""
    careful = slow(offset, body)
    if isinstance(careful, Problem):
        return False
    rows = np.frombuffer(body, np.uint8)[None, :]
    steps, times, values = _numbers(layout, rows)
    mine = [(int(steps[0]), float(times[0]), tag, float(v))
            for (_, tag), v in zip(layout.values, singles(values[0]).tolist(), strict=True)]
    return [(s, t, tag, v) for s, t, tag, v in careful] == mine and len(mine) > 0


def _layout(body: bytes) -> _Layout | None:
    """The template of an Event holding a wall time, a step and simple-value scalars and
    nothing else; None for any other record."""
    try:
        top = _fields(body, 0, len(body))
        if [(number, wire) for number, wire, _, _ in sorted(top)] != [(1, 1), (2, 0), (5, 2)]:
            return None
        place = {number: (start, end) for number, _, start, end in top}
        summary = _fields(body, *place[5])
        if any((number, wire) != (1, 2) for number, wire, _, _ in summary):
            return None
        values = [_value(body, start, end) for _, _, start, end in summary]
    except _NotSimple:
        return None
    if not values:
        return None
    varies = np.zeros(len(body), bool)
    step = (place[2][0], place[2][1] - place[2][0])
    for start, size in [(place[1][0], 8), step, *[(p, 4) for p, _ in values]]:
        varies[start:start + size] = True
    fixed = np.where(varies, 0, 0xFF).astype(np.uint8)  # the bits every record must share
    fixed[step[0]:step[0] + step[1]] = 0x80
    return _Layout(np.frombuffer(body, np.uint8).copy(), fixed, place[1][0], step, values,
                   _Sums.of(body, varies))


def _value(body: bytes, start: int, end: int) -> tuple[int, str]:
    """A Summary.Value holding a tag and a simple_value (and perhaps metadata): the value's
    position and the tag."""
    fields = {number: (wire, s, e) for number, wire, s, e in _fields(body, start, end)}
    if len(fields) != len(_fields(body, start, end)) or set(fields) - {1, 2, 9} \
            or fields.get(1, (0,))[0] != 2 or fields.get(2, (0,))[0] != 5:
        raise _NotSimple
    try:
        tag = body[fields[1][1]:fields[1][2]].decode()
    except UnicodeDecodeError:
        raise _NotSimple from None
    return fields[2][1], tag


def _fields(body: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """``(number, wire type, start, end)`` of each field of the message in ``body[start:end]``:
    a varint's own bytes, a fixed field's, a length-delimited field's contents."""
    fields = []
    pos = start
    while pos < end:
        key, pos = _varint(body, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, after = _varint(body, pos, end)
        elif wire in (1, 5):
            after = pos + (8 if wire == 1 else 4)
        elif wire == 2:
            size, pos = _varint(body, pos, end)
            after = pos + size
        else:
            raise _NotSimple
        if after > end or number == 0:
            raise _NotSimple
        fields.append((number, wire, pos, after))
        pos = after
    return fields


def _varint(body: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 70:
        byte = body[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos
    raise _NotSimple


def _one_by_one(data, bodies, lengths, rest, base, slow, problems) -> list:
    """What ``slow`` reads of each record in ``rest`` (the problems it finds kept aside)."""
    read = []
    for i in rest.tolist():
        start = int(bodies[i])
        found = slow(base + start - HEADER, data[start:start + int(lengths[i])])
        if isinstance(found, Problem):
            problems.append(found)
            found = []
        read.append(found)
    return read


def _assemble(records: int, offsets: np.ndarray, pieces, rest, one_by_one, tags) -> Scalars:
    """Every scalar in its place: the records' scalars in file order, each record's in the
    order it holds them."""
    count = np.zeros(records, np.int64)
    for members, _, _, values, _ in pieces:
        count[members] = values.shape[1]
    count[rest] = [len(found) for found in one_by_one]
    slot = np.cumsum(count) - count
    total = int(count.sum())
    out = Scalars(np.repeat(offsets, count), np.zeros(total, np.int64), np.zeros(total),
                  np.zeros(total, np.int64), np.zeros(total), [])
    for members, steps, times, values, ids in pieces:
        _put(out, slot[members], steps, times, values, ids)
    _place(out, slot[rest], one_by_one, tags)
    out.tags = sorted(tags, key=tags.__getitem__)
    return out


def _put(out: Scalars, slots: np.ndarray, steps, times, values, ids) -> None:
    """One template's scalars at their slots: a stretch of the output written as a slice
    where they follow one another (a writer's records of one length mostly do), which
    costs a third of placing each one by its index."""
    width = values.shape[1]
    if len(slots) and int(slots[-1] - slots[0]) == width * (len(slots) - 1) \
            and (np.diff(slots) == width).all():
        at = slice(int(slots[0]), int(slots[0]) + width * len(slots))
        shaped = (len(slots), width)
        out.step[at].reshape(shaped)[:] = steps[:, None]
        out.time[at].reshape(shaped)[:] = times[:, None]
        out.tag[at].reshape(shaped)[:] = np.array(ids)[None, :]
        out.value[at].reshape(shaped)[:] = singles(values)
        return
    at = slots[:, None] + np.arange(width)
    out.step[at], out.time[at] = steps[:, None], times[:, None]
    out.tag[at], out.value[at] = np.array(ids)[None, :], singles(values)


def _place(out: Scalars, slots: np.ndarray, one_by_one: list, tags: dict) -> None:
    at = [int(slot) + j for slot, found in zip(slots.tolist(), one_by_one, strict=True)
          for j in range(len(found))]
    flat = [item for found in one_by_one for item in found]
    if flat:
        steps, times, names, values = zip(*flat, strict=True)
        out.step[at], out.time[at], out.value[at] = steps, times, values
        out.tag[at] = [tags.setdefault(name, len(tags)) for name in names]


def singles(values: np.ndarray) -> np.ndarray:
    """``float(str(np.float32(v)))`` of each float32: the shortest decimal that reads back as
    the same float32 (0.1, not 0.10000000149011612: what the writer was given), in bulk.

    Each value is worked out once per stretch of equal ones (a learning rate that stays put).
    The shortest has 1 to 9 significant digits (``_shortest``). A value where its rule could
    err (a power of two, whose neighbours are not evenly spaced; a decimal halfway between
    two; one too large or small for exact powers of ten) is given to str, once per distinct
    value."""
    values = np.asarray(values, np.float32)
    out = np.empty(values.shape)
    step = max(1, _BLOCK // max(1, values[:1].size))
    with np.errstate(all="ignore"):  # NaN and infinities go to str, below
        for start in range(0, len(values), step):  # a block's arrays stay in the cache: 2x
            out[start:start + step] = _singles(values[start:start + step])
    return out


def _singles(x32: np.ndarray) -> np.ndarray:
    flat = x32.T.ravel()  # a tag's values one after another: its equal neighbours side by side
    bits = flat.view(np.uint32)
    new = np.concatenate([[True], bits[1:] != bits[:-1]])
    firsts = flat[new]
    out = np.empty(len(firsts), np.float64)
    xd = firsts.astype(np.float64)
    size = np.abs(xd)
    bulk = (size >= 1e-12) & (size < 1e12) & ((firsts.view(np.uint32) & 0x7FFFFF) != 0)
    where = np.flatnonzero(bulk)
    got, sure = _shortest(firsts[where], xd[where])
    out[where[sure]] = got[sure]
    doubt = np.concatenate([np.flatnonzero(~bulk), where[~sure]])
    if len(doubt):
        distinct, inverse = np.unique(firsts[doubt], return_inverse=True)
        out[doubt] = np.array([float(str(v)) for v in distinct])[inverse]
    return out[np.cumsum(new) - 1].reshape(x32.T.shape).T


def _shortest(x32: np.ndarray, xd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The shortest decimals (as doubles) of float32 values between 1e-12 and 1e12, and
    whether each is certain. Most need 8 or 9 digits: 8 is tried on all, 9 where 8 does not
    read back, and fewer, one digit at a time, where 8 does (a decimal that reads back with
    k digits does with k + 1)."""
    exponent = np.floor(np.log10(np.abs(xd))).astype(np.int64)
    best, back, sure = _nearest(x32, xd, 7 - exponent)
    nine = np.flatnonzero(~back)
    value, back9, certain = _nearest(x32[nine], xd[nine], 8 - exponent[nine])
    best[nine] = value
    sure[nine] &= back9 & certain
    left = np.flatnonzero(back)
    for digits in range(7, 0, -1):
        if not len(left):
            break
        value, shorter, certain = _nearest(x32[left], xd[left], digits - 1 - exponent[left])
        sure[left] &= certain
        left = left[shorter]
        best[left] = value[shorter]
    return best, sure


def _nearest(x32, xd, places):
    """The decimal nearest ``xd`` with ``places`` digits after the point (negative: tens,
    hundreds...) as a double, whether it reads back as ``x32``, and whether both answers are
    certain (not near a tie, not within a rounding of a float32 halfway point)."""
    scale = _POW10[np.abs(places)]
    up = places >= 0
    if up.all():
        scaled = xd * scale
        whole = np.rint(scaled)
        value = whole / scale
    else:
        scaled = np.where(up, xd * scale, xd / scale)
        whole = np.rint(scaled)
        value = np.where(up, whole / scale, whole * scale)
    back = value.astype(np.float32) == x32
    halfway = (value.view(np.uint64) & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)
    certain = (np.abs(scaled - whole) < 0.5 - 1e-6) & ~halfway
    return value, back, certain


def group_starts(found: Scalars) -> np.ndarray:
    """Where each row begins: consecutive scalars of one step make one row (v1 reads a step
    that does not rise as a resume), and a tag seen twice in a row starts a new one."""
    n = len(found.step)
    if not n:
        return np.zeros(0, np.int64)
    runs = np.flatnonzero(np.concatenate([[True], found.step[1:] != found.step[:-1]]))
    sizes = np.diff(np.append(runs, n))
    if len(found.tags) <= 64:  # one bit a tag: a run's tags differ when its bits count them
        bits = np.left_shift(np.uint64(1), found.tag.astype(np.uint64))
        distinct = np.bitwise_count(np.bitwise_or.reduceat(bits, runs)) == sizes
    else:
        distinct = sizes == 1
    extra = [start for run in np.flatnonzero(~distinct).tolist()
             for start in _split(found.tag, int(runs[run]), int(runs[run] + sizes[run]))]
    return np.sort(np.concatenate([runs, np.array(extra, np.int64)])) if extra else runs


def _split(tag: np.ndarray, start: int, end: int) -> list[int]:
    """The starts after ``start`` of the rows of one step's run where a tag comes back."""
    starts, seen = [], set()
    for i, item in enumerate(tag[start:end].tolist(), start):
        if item in seen:
            starts.append(i)
            seen = set()
        seen.add(item)
    return starts


def records(found: Scalars, groups: np.ndarray, kinds) -> list[Record]:
    """One record per kind and row: training tags, and evaluation tags (kept apart from the
    line), each row ``{step, time (the latest of its scalars), key: value...}``. ``kinds(tags)``
    gives a row's training (positions, keys) and evaluation (positions, keys)."""
    if not len(groups):
        return []
    sizes = np.diff(np.append(groups, len(found.step)))
    shapes, which = row_shapes(found, groups, sizes)
    times = np.maximum.reduceat(found.time, groups)
    plans = [kinds(tuple(found.tags[t] for t in shape)) for shape in shapes]
    emitted = np.array([bool(p[0]) + bool(p[2]) for p in plans])[which]
    first = np.cumsum(emitted) - emitted
    out: list = [None] * int(emitted.sum())
    with _no_gc():
        for number, (train, train_keys, evals, eval_keys) in enumerate(plans):
            rows = np.flatnonzero(which == number) if len(plans) > 1 else np.arange(len(groups))
            at = first[rows]
            for kind, places, keys in ((TRAIN, train, train_keys), (EVAL, evals, eval_keys)):
                if places:
                    _fill(out, at.tolist(), kind, keys, found, groups[rows], places, times[rows])
                    at = at + 1
    return out


def row_shapes(found: Scalars, groups: np.ndarray, sizes: np.ndarray):
    """The distinct tag sequences of the rows, and which one each row has."""
    widest = int(sizes.max())
    columns = [np.where(sizes > j, found.tag[np.minimum(groups + j, len(found.tag) - 1)], -1)
               for j in range(widest)]
    table = np.stack(columns, axis=1)
    if (table == table[0]).all():
        return [tuple(table[0].tolist())], np.zeros(len(groups), np.int64)
    shapes, which = np.unique(table, axis=0, return_inverse=True)
    return [tuple(t for t in row if t >= 0) for row in shapes.tolist()], which.ravel()


def _fill(out, at, kind, keys, found, groups, places, times) -> None:
    columns = [found.value[groups + place].tolist() for place in places]
    made = _builder(len(keys))(Record, kind, STEP, TIME, *keys)(
        found.offset[groups].tolist(), found.step[groups].tolist(), times.tolist(), *columns)
    if len(at) == len(out):
        out[:] = made
        return
    for slot, record in zip(at, made, strict=True):
        out[slot] = record


@lru_cache(maxsize=64)
def _builder(width: int):
    """A function making the records of rows with ``width`` values, whose dict is written
    out as one literal: twice as fast as dict(zip(keys, values)) a row (0.3 s against 0.6 s
    for 1,000,000 rows). Only the number of values is written into the code; the keys are
    its arguments."""
    names = [f"v{i}" for i in range(width)]
    keys = [f"k{i}" for i in range(width)]
    pairs = "".join(f", {k}: {v}" for k, v in zip(keys, names, strict=True))
    source = (f"def outer(record, kind, step_key, time_key{''.join(', ' + k for k in keys)}):\n"
              f"    def build(offsets, steps, times{''.join(', ' + v for v in names)}):\n"
              f"        return [record(o, kind, {{step_key: s, time_key: t{pairs}}})\n"
              f"                for o, s, t{''.join(', ' + v for v in names)}\n"
              f"                in zip(offsets, steps, times{''.join(', ' + v for v in names)})]\n"
              f"    return build\n")
    scope: dict = {}
    exec(source, scope)  # the code names only v0.., k0..: no value is pasted into it
    return scope["outer"]


@contextmanager
def _no_gc():
    """A million new dicts would set off the collector every 700 of them, and its full passes
    walk all those made so far: 1.2 s -> 0.3 s without it (nothing made here is a cycle)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
