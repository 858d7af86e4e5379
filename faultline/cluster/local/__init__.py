"""The local backend: each Kafka node a JVM in a network namespace of its own.

Owns :class:`~faultline.cluster.local.cluster.LocalCluster` (the cluster's lifetime and
capabilities), a node's view (:mod:`.node`) and the JVMs (:mod:`.jvm`: configs, storage,
launching); the host pieces it shares with the docker backend are
:mod:`faultline.cluster.host`'s.

May import: what :mod:`faultline.cluster` may, and the rest of :mod:`faultline.cluster`.
"""
