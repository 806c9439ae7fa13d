"""One big run read a page at a time: no query sorts more than about two pages of rows.

A run's rows past a mark used to be one ``ORDER BY`` query: DuckDB sorted the whole run before
the first batch (a run of 1,000,000 lines of 30 metrics held 245 MB of the 256 MB memory
limit until the last batch was read, however slowly the client read). Instead, the rows are
counted per bucket of ``span`` row ids (one aggregate, no sort), and each page is the rows
query over the buckets it covers, with LIMIT and OFFSET::

    plan([(0, 90), (1, 100), (2, 40)], span=100, after=-1, upto=10**9, rows=100)
    -> [Page(after=-1, upto=199, skip=0, rows=100),    # the 90 of bucket 0, 10 of bucket 1
        Page(after=99, upto=299, skip=10, rows=100),   # the other 90 of bucket 1, 10 of 2
        Page(after=199, upto=299, skip=10, rows=30)]

Every page but the last holds exactly ``rows`` rows (an archive's row groups stay one Arrow
batch each), in row id order.
"""

from __future__ import annotations

from typing import NamedTuple


class Page(NamedTuple):
    after: int  # row ids in (after, upto]
    upto: int
    skip: int  # rows of that range passed over (those of an earlier page)
    rows: int


def plan(buckets: list[tuple[int, int]], span: int, after: int, upto: int,
         rows: int) -> list[Page]:
    """Pages of ``rows`` rows over ``buckets`` ((bucket, rows) in bucket order; bucket b holds
    row ids b*span .. b*span+span-1), within (after, upto]."""
    pages: list[Page] = []
    start: tuple[int, int] | None = None  # the page's first bucket, and rows of it skipped
    have = 0
    for bucket, count in buckets:
        used = 0
        while used < count:
            if start is None:
                start = (bucket, used)
            take = min(rows - have, count - used)
            have, used = have + take, used + take
            if have == rows:
                pages.append(_page(start, bucket, span, after, upto, have))
                start, have = None, 0
    if start is not None:
        pages.append(_page(start, buckets[-1][0], span, after, upto, have))
    return pages


def _page(start: tuple[int, int], last: int, span: int, after: int, upto: int,
          rows: int) -> Page:
    first, skip = start
    return Page(max(after, first * span - 1), min(upto, (last + 1) * span - 1), skip, rows)
