"""The cluster under test: the backend protocol, the backends, and what they share.

Owns the ``Cluster`` protocol and its capabilities (:mod:`.protocol`), the backends by
name (:mod:`.backends`) and the clean-ups they register (:mod:`.cleanups`), Kafka's
distribution, broker config and client queries (:mod:`.kafka_dist`,
:mod:`.kafka_config`, :mod:`.kafka_client`), Toxiproxy
(:mod:`.toxiproxy`), the one waiting loop (:mod:`.waiting`), the set-up and
``faultline doctor`` (:mod:`.setup`), ``faultline setup`` and ``doctor`` (:mod:`.cli`),
and the local backend (:mod:`.local`). ``faultline cluster`` is the run package's: its
session is a run.

May import: errors, faults, spec, rundir.
"""
