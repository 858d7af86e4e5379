"""``faultline hunt``'s model: show on real Kafka each loss the reference model permits
for a config, and its absence on the safe config.

For the config (acks, min.insync, unclean, Kafka version) the model explores fault
schedules (:func:`faultline.checkers.model.table.explore_cell`, faults kill, pause and
a wipe of one replica, leaders included: :data:`~faultline.hunt.recipes.HUNT_FAULTS`)
and names each anomaly it permits with its shortest schedule. Each recipe
(:mod:`.recipes`) is a model schedule, compiled into a targeted schedule
(:mod:`.compile`). The model replays each recipe on the config; a recipe is hunted for
the anomalies that replay shows and the exploration permits, on real clusters
(:mod:`.runs`). The table is printed and written as ``hunt.html`` beside the runs
(:mod:`.page`, ``<results>/hunt-<UTC time>/``); ``faultline hunt`` is
:mod:`faultline.commands.hunt`.

May import: errors, spec, history, rundir, checkers.
"""

from faultline.hunt.recipes import RECIPES, HuntConfig, Recipe, safe
from faultline.hunt.runs import Row, Try, hunt, read_try, spec_for, unhunted

__all__ = ["RECIPES", "HuntConfig", "Recipe", "Row", "Try", "hunt", "read_try", "safe", "spec_for",
           "unhunted"]
