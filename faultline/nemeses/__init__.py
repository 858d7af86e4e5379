"""Nemeses: one module per fault family of :data:`faultline.faults.FAMILIES` (kill, pause,
stop, partition, toxics, wipe, lose_unflushed, links, clients, clock), their seeded schedule, and the
scripted nemesis that runs a targeted schedule (:mod:`~faultline.nemeses.scripted`).

What a family is (its fault and heal actions, kinds, the capabilities it needs) lives
in that record; a module here only says how to apply and heal it.
:mod:`~faultline.nemeses.schedule` draws the seeded schedule (pure),
:mod:`~faultline.nemeses.package` drives it and always heals at the end,
:mod:`~faultline.nemeses.base` holds the ``Nemesis`` protocol and the capability checks.

May import: errors, faults, targeted (the targeted schedule language), spec, history,
cluster (the protocol and capabilities), brokerstate (the on-disk formats lose-unflushed
cuts logs back with).
"""
