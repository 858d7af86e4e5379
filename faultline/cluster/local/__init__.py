"""The local backend: each Kafka node a JVM in a network namespace of its own.

Owns :class:`~faultline.cluster.local.cluster.LocalCluster` (the cluster's lifetime and
capabilities), a node's view (:mod:`.node`), the JVMs (:mod:`.jvm`: configs, storage,
launching), the namespaces, veths, bridge and grudges (:mod:`.netns`), the run state
that lets a later run remove what a crashed one left (:mod:`.runstate`), and the
signals around a cluster's lifetime (:mod:`.signals`).

May import: what :mod:`faultline.cluster` may, and the rest of :mod:`faultline.cluster`.
"""
