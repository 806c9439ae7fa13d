"""The Arrow arrays the bulk writes make by their buffers (app/ingest/arrays.py) are the arrays
pyarrow's own calls make (pa.array, pa.repeat, to_numpy): the same values, types and NULLs,
on slices that start mid-buffer and on chunked columns; a value the buffers cannot take goes
to pyarrow, its error included."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from app.ingest.arrays import from_numpy, from_values, repeat, to_numpy


def same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("kind", [pa.int64(), pa.int32(), pa.float64(), pa.float32(),
                                  pa.uint8()])
def test_to_numpy_is_pyarrows_with_nulls_and_offsets(kind):
    values = [None if i % 5 == 3 else i for i in range(70)]
    array = pa.array(values, kind)
    for part in (array, array.slice(13), array.slice(9, 30), array.slice(15, 5)):
        assert same(to_numpy(part), part.to_numpy(zero_copy_only=False)), part
    chunked = pa.chunked_array([array.slice(0, 11), array.slice(40)])
    assert same(to_numpy(chunked), chunked.to_numpy())
    assert to_numpy(chunked)[3] != to_numpy(chunked)[3]  # NaN where the value is NULL


def test_to_numpy_without_nulls_keeps_the_type():
    got = to_numpy(pa.array(range(10), pa.int64()).slice(4))
    assert got.dtype == np.int64 and got.tolist() == [4, 5, 6, 7, 8, 9]


def test_to_numpy_of_a_type_numpy_has_not_is_pyarrows():
    array = pa.array(["a", None, "c"])
    assert to_numpy(array).tolist() == ["a", None, "c"]


def test_from_numpy_marks_nulls_where_not_held():
    values = np.array([1.5, 2.5, 3.5, 4.5])
    held = np.array([True, False, True, False])
    assert from_numpy(values, held).equals(pa.array(values, mask=~held))
    assert from_numpy(values[::2]).to_pylist() == [1.5, 3.5]  # strided: copied contiguous


@pytest.mark.parametrize("values,kind", [
    (["loss", None, "", "ünïcode", "x" * 300], pa.string()),
    ([None, None], pa.string()),
    ([], pa.string()),
    ([1, None, -(2**63), 2**63 - 1], pa.int64()),
    ([1, 2, 3], pa.int32()),
    ([0.5, None, float("inf"), 1e308, 3], pa.float64()),
    ([True, None, False], pa.bool_()),  # no numpy path: pyarrow's own
])
def test_from_values_is_pa_array(values, kind):
    got = from_values(values, kind)
    assert got.type == kind and got.equals(pa.array(values, kind)), got


def test_from_values_keeps_a_float_nan_apart_from_null():
    got = from_values([math.nan, None], pa.float64())
    assert got.null_count == 1 and math.isnan(got[0].as_py())


@pytest.mark.parametrize("values,kind", [
    ([2**63], pa.int64()),           # past int64: numpy overflows, pyarrow says so
    (["a", 1], pa.string()),         # a number in a text column
    ([1.5], pa.int64()),             # a fraction in an integer column
    (["1"], pa.int64()),
])
def test_from_values_answers_as_pa_array_on_what_it_cannot_take(values, kind):
    try:
        want = pa.array(values, kind)
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as error:
        with pytest.raises(type(error)):
            from_values(values, kind)
    else:
        assert from_values(values, kind).equals(want)


def test_from_values_of_a_surrogate_is_pyarrows_error():
    with pytest.raises(UnicodeEncodeError):
        pa.array(["\ud800"], pa.string())
    with pytest.raises(UnicodeEncodeError):
        from_values(["\ud800"], pa.string())


@pytest.mark.parametrize("value,kind", [(7, pa.int32()), ("run-a", pa.string()),
                                        ("", pa.string()), ("ß", pa.string())])
def test_repeat_is_pa_repeat(value, kind):
    for count in (0, 1, 1000):
        got = repeat(value, count)
        assert got.equals(pa.repeat(pa.scalar(value, kind), count)), (value, count)
