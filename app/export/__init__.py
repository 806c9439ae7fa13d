"""The Parquet archive (``python -m app export --logdir runs --to archive``): every table a
query engine needs, Hive-partitioned by run, written incrementally (docs/export.md)::

    archive/_cliffwatch_export.json                 how far each table and run was written
    archive/metrics/run=sweep%2Flr%201e-4/part-00001.parquet   first export
    archive/metrics/run=sweep%2Flr%201e-4/part-00002.parquet   the lines logged since
    archive/incidents/run=sweep%2Flr%201e-4/part-00001.parquet rewritten when they change
"""
