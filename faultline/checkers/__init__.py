"""The checkers: a stored run judged against the guarantees of its config.

Owns the queue checker (:mod:`.queue`: one pass over the history, anomalies per
topic-partition), the guarantee table (:mod:`.guarantees`: which anomalies a config and
the faults each partition saw, :mod:`.partition_faults`, permit), the verdict and its
stories (:mod:`.verdict`, :mod:`.examples`, :mod:`.explain`), the measures, the
white-box invariants over the broker's own files (:mod:`.whitebox`), the one check of a
stored run: the checkers its workload names, composed (:mod:`.stored`), its results
written into the run directory (:mod:`.results_file`), the history's pairing rules
compiled (:mod:`.pairing`) and the reference model (:mod:`.model`). Pure functions of
files and rows: no cluster, client or report code.

May import: errors, faults, spec, history, rundir, compiled.
"""
