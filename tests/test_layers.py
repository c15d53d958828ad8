"""The layout shows the architecture: no import runs up a layer, in any folder of the package.

Each unit (a sub-package or a top-level module of ``teamgraph``) has a floor; a unit
imports only units on lower floors (``TYPE_CHECKING`` imports too). ``tests/test_ledger.py``
checks the same inside the ledger, layer by layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "teamgraph"

FLOORS: list[set[str]] = [
    {"records", "redaction", "policy", "workers", "compat", "history", "drawing"},
    {"runs", "calls", "state", "messaging", "protocols", "models", "roles"},
    {"checkpoints"},
    {"audit"},
    {"runtime"},
    {"governance"},
    {"tools"},
    {"ledger"},
    {"nodes"},
    {"graph"},
    {"team_checks"},
    {"team"},
    {"__init__", "demo", "studio"},
    {"cli"},
    {"console"},
]
"""The floors, from the ground up."""


def _unit(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0] if parts[0] != "__init__" or len(parts) > 1 else "__init__"


def _imported_units(path: Path) -> set[str]:
    units: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "teamgraph":
                units.add(parts[1] if len(parts) > 1 else "__init__")
    return units


def test_every_unit_of_the_package_has_a_floor():
    units = {_unit(path) for path in PACKAGE.rglob("*.py")}
    placed = set().union(*FLOORS)
    assert units <= placed, f"give these a floor in FLOORS: {sorted(units - placed)}"


def test_no_import_runs_up_a_floor():
    floor = {unit: n for n, units in enumerate(FLOORS) for unit in units}
    upward = [
        f"{path.relative_to(PACKAGE.parent)} imports teamgraph.{target}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for target in sorted(_imported_units(path))
        if target != _unit(path) and floor.get(target, -1) >= floor.get(_unit(path), -1)
    ]
    assert upward == [], "an import runs up (or across) a floor:\n" + "\n".join(upward)
