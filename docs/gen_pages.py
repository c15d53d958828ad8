"""The docs site's generated parts: the Policy reference, the CLI reference, the benchmarks.

Each is read from the code or the data it documents while ``mkdocs build`` runs
(``docs/hooks.py`` puts it where a page says ``<!-- generated: NAME -->``), so none
can go stale: a new ``Policy`` field, CLI option or benchmark run shows up at the next
build.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results.json"


def inline(text: str) -> str:
    """``text`` with ``<`` escaped outside code spans, where it would start raw HTML."""
    # NOTE: odd parts are inside code spans, where "&lt;" would show as such.
    parts = text.split("`")
    return "`".join(part.replace("<", "&lt;") if i % 2 == 0 else part for i, part in enumerate(parts))


def cell(text: object) -> str:
    """``text`` safe inside a Markdown table cell: one line, pipes escaped, ``<`` outside code spans."""
    return inline(str(text).replace("|", "\\|").replace("\n", " "))


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- Policy


def type_name(annotation: Any) -> str:
    """A field's type as a reader writes it: ``"leader" | "human"``, ``int | None``, ``tuple[str, ...]``."""
    args = get_args(annotation)
    if str(get_origin(annotation)).endswith("Literal"):
        return " | ".join(f'"{arg}"' for arg in args)
    if args and type(annotation).__name__ in {"UnionType", "_UnionGenericAlias"}:
        return " | ".join(type_name(arg) for arg in args)
    if annotation is type(None):
        return "None"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def limits(metadata: Sequence[Any]) -> str:
    """A field's bounds (pydantic's ``gt``/``ge``/``lt``/``le`` metadata) as ``> 0, ≤ 1.0``."""
    signs = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    found = [f"{sign} {getattr(item, key)}" for item in metadata for key, sign in signs.items() if hasattr(item, key)]
    return ", ".join(found)


def policy_reference(*, model: Any = None) -> str:
    """Every field of ``model`` (default: ``Policy``): its type, default, bounds and description, in order.

    Raises:
        ValueError: A field has no description (the reference would have a hole), naming it.
    """
    if model is None:
        from teamgraph.policy import Policy as model
    rows = []
    for name, field in model.model_fields.items():
        if not field.description:
            raise ValueError(
                f"{model.__name__}.{name} has no description: add Field(description=...) in teamgraph/policy.py."
            )
        kind, default = f"`{type_name(field.annotation)}`", f"`{field.default!r}`"
        rows.append((f"`{name}`", kind, default, limits(field.metadata), field.description))
    return table(("field", "type", "default", "limits", "what it sets"), rows)


# --------------------------------------------------------------------------- CLI

_MARKUP = re.compile(r"\[(/?)(bold|b|italic|i|dim|underline|cyan|green|red|yellow)\]")


def plain(help_text: str | None) -> str:
    """A command's help without typer's rich markup (``[bold]x[/bold]`` becomes code)."""
    return inline(_MARKUP.sub("`", help_text or "").strip())


def cli_reference() -> str:
    """Every command of the ``teamgraph`` CLI: its usage, help and options, from the typer app."""
    import typer

    from teamgraph.cli.commands import app

    root = typer.main.get_command(app)
    # NOTE: each command's own context class: typer may bring its own copy of click.
    return "\n".join(_command_sections(root, root.context_class(root, info_name="teamgraph")))


def _command_sections(command: Any, ctx: Any) -> list[str]:
    """The sections of ``command`` and of its subcommands, depth first."""
    sections = [_command_section(command, ctx)]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        sections += _command_sections(sub, sub.context_class(sub, info_name=name, parent=ctx))
    return sections


def _command_section(command: Any, ctx: Any) -> str:
    """One command's heading, usage, help and options table."""
    path = ctx.command_path
    level = "##" if ctx.parent is None else "###"
    usage = command.get_usage(ctx).removeprefix("Usage: ")
    params = [p.get_help_record(ctx) for p in command.params]
    rows = [(f"`{opts}`", help_text) for opts, help_text in filter(None, params)]
    body = [f"{level} `{path}`\n", f"```\n{usage}\n```\n", plain(command.help) + "\n"]
    if rows:
        body.append(table(("option or argument", "meaning"), rows))
    return "\n".join(body)


# --------------------------------------------------------------------------- benchmarks

_RESULT_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("framework ms per model call", "overhead_ms_per_call", lambda v: f"{v:.2f}"),
    ("model calls", "model_calls", str),
    ("makespan / critical path", "makespan_over_critical", lambda v: f"{v:.2f}"),
    ("SQLite file", "db_bytes", lambda v: f"{v / 1e6:.1f} MB" if v >= 1e6 else f"{v / 1e3:.0f} KB"),
    ("bytes per message", "bytes_per_message", lambda v: f"{v / 1e3:.1f} KB"),
    ("peak RSS", "peak_rss_mb", lambda v: f"{v:.0f} MB"),
)


def _params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in params.items())


def _result_row(result: Mapping[str, Any]) -> list[str]:
    row = [result["system"], result["workload"], _params(result.get("params", {}))]
    for _, key, show in _RESULT_COLUMNS:
        value = result.get(key)
        row.append("" if value is None else show(value))
    return row


def _targets(rows: Sequence[Mapping[str, Any]]) -> str:
    return table(
        ("§", "target", "measured", "verdict", "note"),
        ((t["section"], t["target"], t["measured"], f"**{t['status']}**", t.get("note", "")) for t in rows),
    )


def _cadence(rows: Sequence[Mapping[str, Any]]) -> str:
    return table(
        ("snapshot cadence", "bytes per message at 1 000 / 5 000", "resume at 500 → 5 000 messages", "ratio"),
        (
            (
                c["cadence"],
                f"{c['bytes_per_message_1000'] / 1e3:.1f} / {c['bytes_per_message_5000'] / 1e3:.1f} KB",
                f"{c['resume_ms_500']:.0f} → {c['resume_ms_5000']:.0f} ms",
                f"{c['resume_ratio']:.2f}×",
            )
            for c in rows
        ),
    )


def benchmark_tables(results: Mapping[str, Any]) -> str:
    """The tables of one ``bench/results.json``: where it ran, the verdicts, each workload's figures."""
    machine = results.get("machine", {})
    packages = ", ".join(f"{name} {version}" for name, version in machine.get("packages", {}).items())
    kind = "a quick smoke run (`--quick`)" if results.get("quick") else "a full run (`python -m bench`)"
    parts = [
        f"Run of {results.get('date', '?')}, {kind}, on {machine.get('cpu_model', '?')} "
        f"({machine.get('cpu_count', '?')} cores), Python {machine.get('python', '?')}; {packages}.\n",
    ]
    if results.get("targets_issue29"):
        parts += ["### Targets of issue 29 (the team is the graph)\n", _targets(results["targets_issue29"])]
    if results.get("targets_issue10"):
        parts += ["### Targets of issue 10\n", _targets(results["targets_issue10"])]
    if results.get("targets"):
        parts += ["### Targets of issue 6 (the delegation workload)\n", _targets(results["targets"])]
    header = ["system", "workload", "parameters", *(title for title, _, _ in _RESULT_COLUMNS)]
    parts += ["### Every workload\n", table(header, (_result_row(r) for r in results.get("results", [])))]
    if results.get("cadence"):
        parts += ["### DeltaChannel snapshot cadence\n", _cadence(results["cadence"])]
    return "\n".join(parts)


def benchmarks_page_tables(path: Path = RESULTS) -> str:
    """``benchmark_tables`` of the committed ``bench/results.json``."""
    return benchmark_tables(json.loads(path.read_text(encoding="utf-8")))


def graph_picture() -> str:
    """The demo team's graph as a mermaid block, as the README shows it (``docs/gen_graph.py``)."""
    from docs.gen_graph import demo_mermaid

    return f"```mermaid\n{demo_mermaid().rstrip()}\n```\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "graph": graph_picture,
    "policy": policy_reference,
    "cli": cli_reference,
    "benchmarks": benchmarks_page_tables,
}
"""What each ``<!-- generated: NAME -->`` marker of a page becomes."""


def main(argv: Sequence[str]) -> int:
    """Print the generated parts named in ``argv`` (``python -m docs.gen_pages policy``), outside a build."""
    unknown = [name for name in argv if name not in GENERATORS]
    if not argv or unknown:
        print(f"usage: python -m docs.gen_pages {' | '.join(GENERATORS)} ...", file=sys.stderr)
        return 2
    for name in argv:
        print(GENERATORS[name]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
