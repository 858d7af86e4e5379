"""The host pieces both backends share: what a run keeps on this machine, and how it is
found and removed.

Owns the state root (:mod:`.stateroot`: where runs keep what finds their leftovers,
trusted only when nobody but this user can change it), the run state on disk
(:mod:`.runstate`: a run's owner, processes and layout; stale runs removed), the clean-ups
backends register for what only they can find (:mod:`.cleanups`), the network
namespaces, veths, bridge and grudges (:mod:`.netns`) and the signals around a cluster's
lifetime (:mod:`.signals`).

May import: what :mod:`faultline.cluster` may, and the rest of :mod:`faultline.cluster`
but its backends.
"""
