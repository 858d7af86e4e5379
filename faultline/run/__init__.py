"""``faultline run``: one test from spec to report.

Owns the runner (:mod:`.runner`: cluster up, workload and nemesis, heal, quiescence,
drain, broker state, teardown, check, report) and the session by hand of ``faultline
cluster``, a run whose faults are typed (:mod:`.session`). The only package that ties
the others together; the commands (:mod:`faultline.commands`) drive it.

May import: every package below it (errors, faults, spec, history, rundir, checkers,
cluster, brokerstate, workloads, nemeses, report).
"""
