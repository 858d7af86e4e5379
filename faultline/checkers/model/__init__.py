"""The reference model: one partition's replication protocol, executable (issue 6).

Public surface::

    ModelConfig, State                                       # state: config and state
    ModelStep, initial_state, apply                          # steps: what they do to a state
    settle, judge, outcome, ModelOutcome, MODEL_ANOMALIES    # outcome: heal, drain, anomalies
    invariant_violations
    Scenario, SCENARIOS, run_scenario                        # the seeds' scenarios
    Bound, Exploration, explore, enabled_steps, replay       # searching fault schedules
    Cell, default_matrix                                     # the guarantee table

Modules, each importing only those listed before it (no import cycle, not even for
type checking): ``state`` (config and state values), ``controller`` (ISR, ELR and
elections), ``replica`` (a replica's log, leader epochs, metadata and HW), ``steps``
(``ModelStep`` and ``apply``), ``outcome``, ``explore``, ``scenarios``, ``table``.
"""

from faultline.checkers.model.explore import Bound, Exploration, enabled_steps, explore, replay
from faultline.checkers.model.outcome import (
    MODEL_ANOMALIES,
    ModelOutcome,
    invariant_violations,
    judge,
    outcome,
    settle,
)
from faultline.checkers.model.scenarios import SCENARIOS, Scenario, run_scenario
from faultline.checkers.model.state import ModelConfig, State
from faultline.checkers.model.steps import ModelStep, apply, initial_state
from faultline.checkers.model.table import Cell, default_matrix

__all__ = [
    "MODEL_ANOMALIES", "SCENARIOS", "Bound", "Cell", "Exploration", "ModelConfig", "ModelOutcome",
    "ModelStep", "Scenario", "State", "apply", "default_matrix", "enabled_steps",
    "explore", "initial_state", "invariant_violations", "judge", "outcome", "replay", "run_scenario",
    "settle",
]
