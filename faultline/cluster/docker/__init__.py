"""The docker backend: each Kafka node a container on a network of the run's own.

Owns the engine on this machine (:mod:`.engine`: is one running, starting ``dockerd``,
stopping the one faultline started with the host's firewall restored).

May import: what :mod:`faultline.cluster` may, and the rest of :mod:`faultline.cluster`.
"""
