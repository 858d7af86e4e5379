"""Reference-model speed: steps/s, settle+judge/s, and exploration schedules/s per cell.

Prints figures only (no timed asserts). Run: .venv/bin/python benchmarks/bench_model.py
"""

from __future__ import annotations

import random
import time

from faultline.checkers.model.explore import Bound, enabled_steps, explore
from faultline.checkers.model.outcome import outcome
from faultline.checkers.model.state import ModelConfig
from faultline.checkers.model.steps import apply, initial_state

FAULTS = frozenset({"kill", "pause", "partition", "wipe", "leader-fault"})


def bench_steps(n: int = 20000) -> None:
    rng = random.Random(7)
    st = initial_state(ModelConfig())
    t = time.perf_counter()
    for _ in range(n):
        apply(st, rng.choice(enabled_steps(st, FAULTS)))
        if st.next_value > 40:
            st = initial_state(ModelConfig())
    dt = time.perf_counter() - t
    print(f"random steps:        {n / dt:10.0f} steps/s")


def bench_outcome(n: int = 1000) -> None:
    rng = random.Random(7)
    states = []
    for _ in range(n):
        st = initial_state(ModelConfig(acks="1"))
        for _ in range(12):
            apply(st, rng.choice(enabled_steps(st, FAULTS)))
        states.append(st)
    t = time.perf_counter()
    for st in states:
        outcome(st)
    dt = time.perf_counter() - t
    print(f"settle + judge:      {n / dt:10.0f} schedules/s")


def bench_explore() -> None:
    cells = [("1", frozenset({"kill", "leader-fault"})), ("all", frozenset({"kill", "leader-fault"})),
             ("all", frozenset({"partition", "leader-fault"})), ("all", frozenset({"wipe", "leader-fault"}))]
    for depth, walks in ((4, 0), (5, 0), (0, 500), (5, 1500)):
        total_n, total_t = 0, 0.0
        for acks, faults in cells:
            t = time.perf_counter()
            ex = explore(ModelConfig(acks=acks, min_insync=2), faults, Bound(depth=depth, walks=walks,  # type: ignore[arg-type]
                                                                              walk_length=12, seed=1))
            total_t += time.perf_counter() - t
            total_n += ex.schedules
        print(f"explore depth={depth} walks={walks:4}: {total_n / total_t:8.0f} schedules/s "
              f"({total_n} schedules over {len(cells)} cells in {total_t:.1f}s)")


if __name__ == "__main__":
    bench_steps()
    bench_outcome()
    bench_explore()
