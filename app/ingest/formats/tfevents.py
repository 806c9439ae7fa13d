"""TensorBoard event files (``events.out.tfevents.*``): their scalars as v1 rows. The events
``loss=2.5``, ``lr=3e-4`` and ``eval/loss=2.9`` written at step 100 become::

    Record(offset=<first event's>, kind="train",
           data={"step": 100, "time": 1714564800.2, "loss": 2.5, "lr": 0.0003})
    Record(offset=<first event's>, kind="eval", data={"step": 100, "time": ..., "eval/loss": 2.9})

A scalar is a ``simple_value`` (tensorboardX, ``torch.utils.tensorboard``'s default) or a
one-element numeric tensor (``new_style=True`` in torch, TF2's ``tf.summary.scalar``); the
wall time is ``time``, the tag the key (``eval/*``-style tags are kind "eval", keys.py's
rule). Histograms, images, text and graphs are not read.

The writer emits one event per scalar; consecutive events of one step make one row (v1 reads
a step that does not rise as a resume). So the events of the last step in ``data`` wait for
the next step's first event (or for ``final=True``, when the file has stopped growing): the
rest of that step may still be coming. A tag seen twice in one group starts a new row.

The ``Event`` protobuf is decoded with the protobuf library (already there for Streamlit)
from the few fields declared below, with TensorFlow's field numbers. tensorboardX ships these
messages too, but importing them runs its package ``__init__``, which imports torch where
torch is installed: 1.8 s and 200 MB in the monitor (docs/formats.md).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from ...keys import EPOCH, FORMAT_KEYS
from . import Problem, Record, ahead, tfbulk, tfrecord
from .keys import is_eval_key

_F = descriptor_pb2.FieldDescriptorProto
# message -> (field, number, type, repeated, message type); tensorflow/core/util/event.proto,
# framework/summary.proto, tensor.proto, tensor_shape.proto
_SCHEMA = {
    "Event": [("wall_time", 1, _F.TYPE_DOUBLE, False, None), ("step", 2, _F.TYPE_INT64, False,
              None), ("summary", 5, _F.TYPE_MESSAGE, False, "Summary")],
    "Summary": [("value", 1, _F.TYPE_MESSAGE, True, "Value")],
    "Value": [("tag", 1, _F.TYPE_STRING, False, None), ("simple_value", 2, _F.TYPE_FLOAT, False,
              None), ("tensor", 8, _F.TYPE_MESSAGE, False, "Tensor"),
              ("metadata", 9, _F.TYPE_MESSAGE, False, "Metadata")],
    "Metadata": [("plugin_data", 1, _F.TYPE_MESSAGE, False, "PluginData")],
    "PluginData": [("plugin_name", 1, _F.TYPE_STRING, False, None)],
    "Tensor": [("dtype", 1, _F.TYPE_INT32, False, None), ("shape", 2, _F.TYPE_MESSAGE, False,
               "Shape"), ("content", 4, _F.TYPE_BYTES, False, None),
               ("float_val", 5, _F.TYPE_FLOAT, True, None),
               ("double_val", 6, _F.TYPE_DOUBLE, True, None),
               ("int_val", 7, _F.TYPE_INT32, True, None),
               ("int64_val", 10, _F.TYPE_INT64, True, None),
               ("half_val", 13, _F.TYPE_INT32, True, None)],
    "Shape": [("dim", 2, _F.TYPE_MESSAGE, True, "Dim")],
    "Dim": [("size", 1, _F.TYPE_INT64, False, None)],
}
_ONEOF = {"Value": ("value", {"simple_value", "tensor"})}  # which one a Value holds
_PACKAGE = "cliffwatch.tfevents"
# TensorFlow's DataType numbers -> how one element is stored in tensor_content
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BFLOAT16, DT_HALF = 1, 2, 3, 9, 14, 19
_CONTENT = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_INT32: "<i", DT_INT64: "<q", DT_HALF: "<e",
            DT_BFLOAT16: "<H"}
SCALAR_PLUGINS = ("", "scalars")


def _event_class():
    """The Event message class, built in a pool of its own (no clash with tensorboard's or
    tensorboardX's registrations of the same names in the default pool)."""
    file = descriptor_pb2.FileDescriptorProto(name="cliffwatch_tfevents.proto",
                                              package=_PACKAGE, syntax="proto3")
    for name, fields in _SCHEMA.items():
        message = file.message_type.add(name=name)
        oneof = _ONEOF.get(name)
        if oneof:
            message.oneof_decl.add(name=oneof[0])
        for field, number, kind, repeated, type_name in fields:
            proto = message.field.add(name=field, number=number, type=kind,
                                      label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if type_name:
                proto.type_name = f".{_PACKAGE}.{type_name}"
            if oneof and field in oneof[1]:
                proto.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Event"))


Event = _event_class()


@dataclass
class Read:
    """The scalars of the whole records of ``data`` (tfbulk.Scalars), where each row begins
    (``groups``), the problems, and the bytes ``consumed``: what both hand-offs make rows
    of, records here (``parse``) and columns in ingest/columnar.py."""
    found: tfbulk.Scalars
    groups: np.ndarray
    problems: list[Problem]
    consumed: int


def parse(data: bytes, base: int, *, final: bool = False
          ) -> tuple[list[Record], list[Problem], int]:
    """``(records, problems, consumed)`` for the whole records in ``data`` (``base``: its file
    offset). The next call starts at ``base + consumed``."""
    got = read(data, base, final=final)
    return records(got), got.problems, got.consumed


def records(got: Read) -> list[Record]:
    return tfbulk.records(got.found, got.groups, kinds)


def read(data: bytes, base: int, *, final: bool = False) -> Read:
    """``parse``'s answer before any record is made (see Read)."""
    if final and (again := _LAST.take(data, base)) is not None:
        return again
    got = ahead.take(data, base) or decoded(data, base)
    if len(got.groups) and not final:  # the last step may not be whole yet: read it again next time
        held = int(got.found.offset[got.groups[-1]])
        got = Read(got.found.head(int(got.groups[-1])), got.groups[:-1],
                   [p for p in got.problems if p.offset < held], held - base)
    _LAST.keep(data, base, got)
    return got


def decoded(data: bytes, base: int) -> Read:
    """Every whole record of ``data``, its last step included (``read`` with final=True)."""
    starts, lengths, problems, consumed = tfrecord.scan(data, base, data_checked=False)
    found = tfbulk.decode(data, starts, lengths, base, problems, _slow)
    return Read(found, tfbulk.group_starts(found), problems, consumed)


class _Last:
    """The last answer, for the one question that follows it: the tailer asks how much of
    ``data`` is complete (tail.py ``_complete``), then has the careful path read exactly that
    much (careful.py, ``final=True``). Those scalars are the ones already read: read again,
    a million events cost twice. Held for that one question, and only for large reads."""

    def __init__(self) -> None:
        self.held: tuple | None = None

    def keep(self, data: bytes, base: int, got: Read) -> None:
        self.held = (data, base, got) if len(got.groups) >= 1000 else None

    def take(self, data: bytes, base: int) -> Read | None:
        held, self.held = self.held, None
        if held is None or (held[1], held[2].consumed) != (base, len(data)):
            return None
        if held[0] is not data and not bytes(held[0]).startswith(data):
            return None  # memcmp: 6 ms for 64 MB (comparing memoryviews took 0.11 s)
        return held[2]


_LAST = _Last()


def _slow(offset: int, body: bytes) -> list[tuple[int, float, str, float]] | Problem:
    """``(step, time, tag, value)`` of each scalar of one Event, by the protobuf library (the
    records tfbulk.py's templates do not fit: tensors, the file_version record, the rare),
    or the problem that skips it."""
    try:
        event = Event.FromString(body)
        return [(event.step, event.wall_time, value.tag, number)
                for value in event.summary.value if (number := scalar(value)) is not None]
    except DecodeError as exc:
        return Problem(offset, "error", f"not a TensorBoard Event ({exc}); record skipped")
    except (ArithmeticError, ValueError, TypeError, struct.error) as exc:  # its content
        return Problem(offset, "error", f"a TensorBoard Event that cannot be read "
                       f"({type(exc).__name__}: {exc}); record skipped")


def kinds(tags: tuple[str, ...]) -> tuple[list[int], list[str], list[int], list[str]]:
    """Of a step's tags: the positions and v1 keys of its training ones, then of its
    evaluation ones (kept apart from the line)."""
    train = [(i, key(tag)) for i, tag in enumerate(tags) if not is_eval_key(tag)]
    evals = [(i, key(tag)) for i, tag in enumerate(tags) if is_eval_key(tag)]
    return ([i for i, _ in train], [k for _, k in train], [i for i, _ in evals],
            [k for _, k in evals])


def scalar(value) -> float | None:
    """The number a Summary.Value holds, or None when it is no scalar."""
    which = value.WhichOneof("value")
    if which == "simple_value":
        return _single(value.simple_value)
    if which != "tensor" or value.metadata.plugin_data.plugin_name not in SCALAR_PLUGINS:
        return None
    tensor = value.tensor
    if tensor.dtype not in _CONTENT or any(d.size != 1 for d in tensor.shape.dim):
        return None
    if tensor.content:
        return _from_content(tensor.dtype, tensor.content)
    if len(tensor.float_val) == 1:
        return _single(tensor.float_val[0])
    for values in (tensor.double_val, tensor.int_val, tensor.int64_val):
        if len(values) == 1:
            return float(values[0])
    if len(tensor.half_val) == 1:  # the 16 bits of a half or bfloat16, in an int32
        return _from_content(tensor.dtype, struct.pack("<H", tensor.half_val[0] & 0xFFFF))
    return None


def _from_content(dtype: int, content: bytes) -> float | None:
    form = _CONTENT[dtype]
    if len(content) != struct.calcsize(form):
        return None
    (number,) = struct.unpack(form, content)
    if dtype == DT_BFLOAT16:  # the top half of a float32
        (number,) = struct.unpack("<f", struct.pack("<I", number << 16))
    if dtype == DT_HALF:
        return _single(number, np.float16)
    return _single(number) if dtype in (DT_FLOAT, DT_BFLOAT16) else float(number)


def _single(number: float, width=np.float32) -> float:
    """A float32 (or half) as the shortest decimal that is the same float32: 0.1, not
    0.10000000149011612 (what TensorBoard shows, and what the writer was given)."""
    return float(str(width(number)))


def key(tag: str) -> str:
    """A tag as a v1 key: itself, but v1's own names (``step``, ``time``...) get ``log_``
    as the monitor's names do (ingest/columns.py), so a tag cannot take their place; ``epoch``
    is v1's epoch."""
    return f"log_{tag}" if tag in FORMAT_KEYS and tag != EPOCH else tag
