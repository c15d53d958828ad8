"""The workload registry: name -> function + the parameter sets to run it with.

A workload function has the signature

    def my_workload(params: dict, workdir: pathlib.Path) -> dict

It runs inside a fresh `python -m bench.worker` process, once per parameter set.
`workdir` is an empty temporary directory (deleted afterwards) for SQLite files.
It returns raw measurements: `system`, `workload`, `model_calls`, `messages`,
`seconds`, `model_seconds`, and optionally `db_bytes` plus any extra fields;
`harness.finish_row` adds overhead per call, bytes per message and peak RSS.

Modules contribute workloads through a module-level `WORKLOADS: dict[str, Workload]`;
`load_registry` merges the modules listed in `MODULES`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

WorkloadFn = Callable[[dict, Path], dict]
MODULES = (
    "bench.baselines",
    "bench.teamgraph_workloads",
    "bench.context_workloads",
    "bench.scheduler_workloads",
    "bench.cluster_workloads",
    "bench.floor_workloads",
)


@dataclass
class Workload:
    """A registered workload: what to call and with which parameter sets.

    `quick` defaults to the first `full` parameter set; `timeout_s` bounds each run.
    `repeats`: in a full run, each parameter set runs this many times (each in a fresh
    process) and the fastest run is kept: other load on the machine only ever adds
    time. A quick run runs each set once.
    """

    fn: WorkloadFn
    full: list[dict]
    quick: list[dict] | None = None
    timeout_s: float = 600.0
    description: str = ""
    repeats: int = 1

    def param_sets(self, quick: bool) -> list[dict]:
        """The parameter sets for a quick (smoke) or full run."""
        if quick:
            return self.quick if self.quick is not None else self.full[:1]
        return self.full


@dataclass
class Registry:
    """All workloads found, plus the modules that failed to import."""

    workloads: dict[str, Workload] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def load_registry(modules: tuple[str, ...] = MODULES) -> Registry:
    """Import each module and merge its `WORKLOADS`; record import errors, don't raise."""
    registry = Registry()
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a half-written module must not hide the others
            registry.errors[module_name] = f"{type(exc).__name__}: {exc}"
            print(f"warning: cannot import {module_name}: {exc}", file=sys.stderr)
            continue
        for name, workload in getattr(module, "WORKLOADS", {}).items():
            if name in registry.workloads:
                raise ValueError(f"workload {name!r} registered twice ({module_name})")
            registry.workloads[name] = workload
    return registry
