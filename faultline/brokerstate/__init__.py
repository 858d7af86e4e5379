"""The broker's own state, read from its files and its answers: during a run and after it.

Owns the readers of Kafka's on-disk formats (:mod:`.segments`: batch headers, segment
names, checkpoints, every replica's log end), the KRaft metadata log decoder
(:mod:`.metadata_log`), the replica summaries (:mod:`.replica_logs`), the observer that
samples leader, ISR, HW and each replica's LEO (:mod:`.observe`), the wait for
quiescence before the drain (:mod:`.quiescence`), and the collection after the drain
(:mod:`.collect`; the group workload's group, :mod:`.group_state`). What these files
mean for a verdict is the checkers' business (:mod:`faultline.checkers.whitebox`).

May import: errors, faults, targeted, spec, rundir, cluster.
"""
