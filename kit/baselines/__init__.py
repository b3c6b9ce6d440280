"""Baseline tables: native op times per task, per hardware fingerprint, MNN version and build flags.

KernelBench keeps its baseline times per GPU; the kit keeps native MNN's per machine.  Every timed job whose
native side ran interleaved with the candidate adds that native measurement to the table of the hardware that
timed it (``mkb eval`` and ``mkb calibrate`` alike).  The table is used three ways:

* as a record: ``mkb baselines list`` / ``show`` (:mod:`kit.baselines.cli`);
* as a source of native times where the config asks for it (``baselines.native_timing = "table"``): only the
  candidate is timed and divided into the table's native time; every record says so
  (``native_timing = "table"``, ``baseline_key``), and a lookup that does not match the node's hardware, MNN
  version, build flags and runner settings, or the task's files, is refused with the reason
  (:mod:`kit.baselines.lookup`);
* as a health check in the report: a run's interleaved native times that drift from the table beyond the
  task's noise band (:mod:`kit.baselines.drift`).

Modules: :mod:`~kit.baselines.key` (what a table is keyed by), :mod:`~kit.baselines.table` (the Parquet files),
:mod:`~kit.baselines.lookup` (finding an entry, or why not), :mod:`~kit.baselines.book` (a worker's use of its
table), :mod:`~kit.baselines.drift` (the report's check), :mod:`~kit.baselines.cli` (``mkb baselines``).
docs/scoring.md, "Baseline tables", has the rules.
"""
