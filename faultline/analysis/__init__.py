"""The Spark pipeline over sweeps: ``faultline analyze`` and what ``nightly`` builds on.

Owns reading sweep directories (:mod:`.sweepdir`), the Spark session (:mod:`.spark`),
the Parquet tables (:mod:`.rows`: history rows <-> ``ops``; :mod:`.tables`: ``runs``,
``faults``, ``anomalies``, ``observations``), the checker on executors (:mod:`.check`,
calling :func:`faultline.checkers.stored.check_stored_table`), the per-cell aggregates and
trends (:mod:`.aggregate`), the comparison page (:mod:`.comparison`), the JUnit XML
(:mod:`.junit`), the pipeline (:mod:`.pipeline`) and what ``faultline analyze`` writes
(:mod:`.outputs`).
docs/analysis.md describes the tables.

May import: errors, faults, targeted, spec, history, rundir, checkers, report, compiled.
"""
