"""Nemeses: the faults of DESIGN.md's table, one family per module, and their schedule.

=================  ==============================================  ======================
module             fault -> heal (history ``f``)                   needs (capabilities)
=================  ==============================================  ======================
kill               ``kill`` -> ``start``                           Killable
pause              ``pause`` -> ``resume``                         Pausable
stop               ``stop`` -> ``start``                           Stoppable, Killable
partition          ``partition`` -> ``heal``                       Partitionable
toxics             ``toxic`` -> ``clear-toxics``                   Toxifiable
wipe               ``wipe`` -> ``start``                           Killable, Wipeable
lose_unflushed     ``lose-unflushed`` -> ``start``                 Killable
=================  ==============================================  ======================

:mod:`~faultline.nemeses.schedule` draws the seeded schedule (pure),
:mod:`~faultline.nemeses.package` drives it and always heals at the end,
:mod:`~faultline.nemeses.base` holds the ``Nemesis`` protocol.
"""
