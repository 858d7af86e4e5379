"""The cluster under test: the backend protocol, the backends, and what they share.

Owns the ``Cluster`` protocol and its capabilities (:mod:`.protocol`), the backends by
name (:mod:`.backends`), the host pieces both backends share (:mod:`.host`), Kafka's
distribution, broker config and client queries (:mod:`.kafka_dist`,
:mod:`.kafka_config`, :mod:`.kafka_client`), Toxiproxy
(:mod:`.toxiproxy`), the one waiting loop (:mod:`.waiting`), the set-up and the
prerequisites ``faultline doctor`` checks (:mod:`.setup`), and the backends
(:mod:`.local`, :mod:`.docker`).

May import: errors, faults, spec, rundir.
"""
