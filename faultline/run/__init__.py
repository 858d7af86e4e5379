"""``faultline run``: one test from spec to report.

Owns the runner (:mod:`.runner`: cluster up, workload and nemesis, heal, quiescence,
drain, broker state, teardown, check, report) and its command (:mod:`.cli`), the hunt
(:mod:`.hunt`), ``faultline cluster`` (:mod:`.cluster_cli`) and its session by hand, a
run whose faults are typed (:mod:`.session`); the
top-level ``faultline`` group is :mod:`faultline.cli`. The only
package that ties the others together.

May import: every package below it (errors, faults, spec, history, rundir, checkers,
cluster, brokerstate, workloads, nemeses, report).
"""
