"""The docs site's generated parts: the Policy and CLI references and the benchmarks, read from the code."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import pytest
import typer
from pydantic import BaseModel, Field

from docs import gen_pages, hooks
from teamgraph import Policy
from teamgraph.cli.commands import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_every_policy_field_has_a_description():
    missing = [name for name, field in Policy.model_fields.items() if not field.description]
    assert missing == [], f"Policy fields without Field(description=...): {missing}"


def test_policy_reference_has_one_row_per_field_with_its_default():
    rows = {line.split(" | ")[0].strip("| `"): line for line in gen_pages.policy_reference().splitlines()[2:]}
    assert list(rows) == list(Policy.model_fields)
    for name, field in Policy.model_fields.items():
        assert f"`{field.default!r}`" in rows[name], name
    assert "≥ 1" in rows["max_parallel"] and "> 0.1, ≤ 1.0" in rows["context_threshold"]


def test_policy_reference_refuses_a_field_without_description():
    class Undocumented(BaseModel):
        said: int = Field(default=1, description="Documented.")
        silent: bool = False

    with pytest.raises(ValueError, match=r"Undocumented\.silent"):
        gen_pages.policy_reference(model=Undocumented)


def test_type_names_read_as_written():
    assert gen_pages.type_name(Literal["a", "b"]) == '"a" | "b"'
    assert gen_pages.type_name(int | None) == "int | None"
    assert gen_pages.type_name(tuple[str, ...]) == "tuple[str, ...]"


def test_cells_keep_tables_and_code_intact():
    assert gen_pages.cell("a|b <x> `<y>`\nz") == "a\\|b &lt;x> `<y>` z"


def _commands(command: Any, path: str = "teamgraph") -> dict[str, Any]:
    found = {path: command}
    for name, sub in getattr(command, "commands", {}).items():
        found |= _commands(sub, f"{path} {name}")
    return found


def test_cli_reference_has_every_command_and_option():
    reference = gen_pages.cli_reference()
    for path, command in _commands(typer.main.get_command(app)).items():
        assert f"`{path}`" in reference, path
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in reference, f"{path} {opt}"
    assert "[bold]" not in reference


RESULTS = {
    "date": "2030-01-01T00:00:00+00:00",
    "quick": True,
    "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "python": "3.11.7", "packages": {"langgraph": "1.2.24"}},
    "targets": [{"section": "1", "target": "t <= 2 ms", "measured": "1.9 ms", "status": "PASS", "note": ""}],
    "targets_issue10": [{"section": "10", "target": "ratio <= 0.1", "measured": "0.2", "status": "MISS", "note": "n"}],
    "results": [
        {
            "system": "teamgraph",
            "workload": "delegation rounds",
            "params": {"rounds": 10},
            "overhead_ms_per_call": 1.234,
            "model_calls": 61,
            "db_bytes": 2_500_000,
            "bytes_per_message": 3700.0,
            "peak_rss_mb": 96.4,
        }
    ],
    "cadence": [
        {
            "cadence": 3000,
            "bytes_per_message_1000": 3700,
            "bytes_per_message_5000": 3710,
            "resume_ms_500": 67,
            "resume_ms_5000": 127,
            "resume_ratio": 1.9,
        }
    ],
}


def test_benchmark_tables_show_each_verdict_and_workload():
    page = gen_pages.benchmark_tables(RESULTS)
    assert "Test CPU" in page and "quick smoke run" in page
    assert "| 10 | ratio &lt;= 0.1 | 0.2 | **MISS** | n |" in page
    assert "| teamgraph | delegation rounds | rounds=10 | 1.23 | 61 |  | 2.5 MB | 3.7 KB | 96 MB |" in page
    assert "| 3000 | 3.7 / 3.7 KB | 67 → 127 ms | 1.90× |" in page


def test_benchmarks_page_reads_the_committed_results():
    results = json.loads((ROOT / "bench" / "results.json").read_text(encoding="utf-8"))
    page = gen_pages.benchmarks_page_tables()
    for target in results["targets"] + results["targets_issue10"]:
        assert gen_pages.cell(target["measured"]) in page
    assert page.count("\n| ") - page.count("\n|---") >= len(results["results"])


def test_hooks_fill_markers_and_name_unknown_ones(monkeypatch):
    monkeypatch.setitem(gen_pages.GENERATORS, "answer", lambda: "42")
    assert hooks.fill("a\n<!-- generated: answer -->\nb") == "a\n42\nb"
    with pytest.raises(KeyError, match="no_such_part"):
        hooks.fill("<!-- generated: no_such_part -->")


def test_every_generated_marker_in_the_pages_has_a_generator():
    markers = {m for page in DOCS.rglob("*.md") for m in hooks.MARKER.findall(page.read_text(encoding="utf-8"))}
    assert markers == set(gen_pages.GENERATORS)


def test_the_budgets_guide_states_the_policy_defaults():
    guide = (DOCS / "how-to" / "budgets-and-limits.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([\d.]+)(?: s)? \|", guide, re.MULTILINE)
    assert len(rows) >= 10
    for name, default in rows:
        assert float(default) == Policy.model_fields[name].default, f"budgets-and-limits.md: {name} = {default}"


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^\s*- [^#\n]*:\s+([\w/.-]+\.md)\s*$", config, re.MULTILINE))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert nav == pages


def test_the_graph_page_draws_what_the_readme_draws():
    from docs.gen_graph import current_block

    picture = gen_pages.graph_picture()
    assert picture.startswith("```mermaid\n") and "__start__" in picture
    assert picture.strip() in current_block((ROOT / "README.md").read_text(encoding="utf-8"))


def test_gen_pages_prints_a_part_and_refuses_unknown_names(capsys):
    assert gen_pages.main(["policy"]) == 0
    assert "`max_parallel`" in capsys.readouterr().out
    assert gen_pages.main(["nope"]) == 2
    assert "usage" in capsys.readouterr().err
