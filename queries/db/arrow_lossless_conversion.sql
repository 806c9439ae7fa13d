-- title: Lossless Arrow export
-- description: Ad-hoc results are sized as Arrow batches before any row becomes a Python value;
--   without this, HUGEINT and UHUGEINT become DECIMAL(38,0) and the largest UHUGEINT comes back
--   as -1. With it they travel as duckdb.* extension types and convert back exactly.
SET arrow_lossless_conversion = true
