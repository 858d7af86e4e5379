"""``faultline sweep``: many runs of one matrix of configs into one sweep directory.

Owns the matrix (:mod:`.matrix`: the YAML, its validation and its cells), the manifest
``sweep.json`` (:mod:`.manifest`: cell states and what a rerun does) and running the
cells one after another with a live progress line (:mod:`.runner`). Each cell is a
normal run directory made by :func:`faultline.run.runner.run_test`; the sweep
directory's layout is the contract ``faultline analyze`` reads (docs/history.md, "Sweep directory").

May import: errors, faults, spec, yamlfile, rundir, checkers, cluster, workloads, hunt, run. Only
:mod:`faultline.commands` imports it.
"""
