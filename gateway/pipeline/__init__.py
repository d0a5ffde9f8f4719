"""The events archive and the PySpark analytics on it.

``archive``   the events stream (consumer group) → Parquet files, ``date=/hour=`` partitioned.
``synth``     a simulated M/M/c (or M/D/c) queue writing the same events, for tests and benches.
``analytics`` the Spark job: events → per-job records, queue statistics, utilisation, stuck jobs.
``summaries`` its summary tables (statistics, utilisation, stuck jobs) from those records.
``report``    the report (``report.json``, Redis) and the Erlang C scaling advice in it.
``erlang``    the pure M/M/c formulas.

Importing this package does not import pyspark: only ``analytics``, ``summaries``,
``columns`` and ``spark`` do.
"""
