"""Declared dependencies are the imported ones.

Every third-party module ``teamgraph/`` imports must come from a distribution
``pyproject.toml`` declares: in ``[project] dependencies`` when it is imported at
module level, or in an extra when it is imported only inside a function (an
optional feature) or for type checking. And every core dependency must be
imported somewhere in ``teamgraph/``.

Imports are mapped to distributions through the installed files (so
``yaml`` -> ``pyyaml``, ``langgraph.checkpoint.sqlite`` ->
``langgraph-checkpoint-sqlite``): the test environment installs every extra.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "teamgraph"
FIRST_PARTY = "teamgraph"


@dataclass(frozen=True)
class Import:
    """One import statement of a third-party module."""

    module: str
    where: str
    at_module_level: bool


class _Imports(ast.NodeVisitor):
    """The imports of one file, each marked module-level (runs at import) or not."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.found: list[Import] = []
        self._deferred = 0  # inside a function or an `if TYPE_CHECKING:` block

    def _defer(self, node: ast.AST) -> None:
        self._deferred += 1
        self.generic_visit(node)
        self._deferred -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _defer

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
        if name != "TYPE_CHECKING":
            self.generic_visit(node)
            return
        self._deferred += 1
        for child in node.body:
            self.visit(child)
        self._deferred -= 1
        for child in node.orelse:
            self.visit(child)

    def _add(self, module: str) -> None:
        self.found.append(Import(module, self.where, at_module_level=self._deferred == 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._add(node.module)


def third_party_imports() -> list[Import]:
    """Every import in ``teamgraph/`` of a module that is neither ours nor the standard library's."""
    found: list[Import] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        visitor = _Imports(str(path.relative_to(ROOT)))
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        found += visitor.found
    return [
        i
        for i in found
        if i.module.split(".")[0] not in (FIRST_PARTY, "__future__") and i.module.split(".")[0] not in STDLIB
    ]


STDLIB = frozenset(sys.stdlib_module_names)


@cache
def _providers() -> dict[str, list[str]]:
    """Top-level package -> the distributions providing it, read once: each read scans every installed one."""
    return dict(importlib.metadata.packages_distributions())


@cache
def _files_of(top: str) -> dict[Path, str]:
    """Installed file -> distribution name, for the distributions that provide package ``top``."""
    owners: dict[Path, str] = {}
    for name in _providers().get(top, []):
        dist = importlib.metadata.distribution(name)
        for file in dist.files or []:
            owners[Path(str(dist.locate_file(file))).resolve()] = canonicalize_name(name)
    return owners


def distribution_of(module: str) -> str:
    """The (canonical) name of the installed distribution that provides ``module``."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{module} is imported by teamgraph but not installed (pip install -e '.[test,bench]')"
    origin = spec.origin if spec.origin not in (None, "namespace") else None
    candidates = [Path(origin)] if origin else [Path(p) / "__init__.py" for p in spec.submodule_search_locations or []]
    owners = _files_of(module.split(".")[0])
    for path in candidates:
        if path.resolve() in owners:
            return owners[path.resolve()]
    # NOTE: a namespace package's folder has no file of its own: ask for the distribution(s) of its top name.
    names = {canonicalize_name(n) for n in _providers().get(module.split(".")[0], [])}
    assert len(names) == 1, f"cannot tell which distribution provides {module}: {sorted(names)}"
    return names.pop()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    extras = {
        extra: {canonicalize_name(Requirement(r).name) for r in requirements}
        for extra, requirements in project.get("optional-dependencies", {}).items()
    }
    return core, extras


def _problems(imports: list[Import]) -> Iterator[str]:
    core, extras = _declared()
    in_extras = set().union(*extras.values())
    for found in imports:
        dist = distribution_of(found.module)
        if found.at_module_level and dist not in core:
            yield (
                f"{found.where} imports {found.module} at module level, but {dist!r} is not in "
                "[project] dependencies: declare it there (with the lower bound you tested)"
            )
        elif not found.at_module_level and dist not in core | in_extras:
            yield (
                f"{found.where} imports {found.module} inside a function, but {dist!r} is in neither "
                "[project] dependencies nor an extra: declare it in the extra of that feature"
            )


@pytest.mark.slow  # NOTE: maps every import to an installed file (seconds)
def test_every_imported_distribution_is_declared():
    imports = third_party_imports()
    assert imports, "no third-party import found: the scan is broken"
    assert list(_problems(imports)) == []


def test_every_core_dependency_is_imported():
    core, _ = _declared()
    imported = {distribution_of(i.module) for i in third_party_imports()}
    assert sorted(core - imported) == [], "declared in [project] dependencies but never imported by teamgraph/"


def test_the_scan_sees_lazy_and_type_checking_imports_as_deferred():
    source = (
        "import yaml\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from langgraph_sdk.runtime import ServerRuntime\n"
        "else:\n    import rich\n"
        "def draw():\n    from matplotlib.figure import Figure\n"
    )
    visitor = _Imports("example.py")
    visitor.visit(ast.parse(source))
    assert [(i.module, i.at_module_level) for i in visitor.found] == [
        ("yaml", True),
        ("typing", True),
        ("langgraph_sdk.runtime", False),
        ("rich", True),
        ("matplotlib.figure", False),
    ]
    assert [distribution_of(m) for m in ("yaml", "langgraph.checkpoint.sqlite", "langchain_core.messages")] == [
        "pyyaml",
        "langgraph-checkpoint-sqlite",
        "langchain-core",
    ]
