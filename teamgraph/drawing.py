"""The team graph as a picture, drawn offline with matplotlib.

NOTE: workaround of an upstream behaviour (langchain-core's graph drawing needs a network or Graphviz).
LangGraph's ``draw_mermaid_png`` calls a web service and ``draw_png`` needs
Graphviz's C library; this draws the same nodes and edges (``graph.get_graph()``)
with matplotlib alone, in layers from START: plain edges solid, conditional edges
(the router's choices) dashed, edges back to an earlier layer curved.

Example:
    ```python
    from IPython.display import Image
    from teamgraph import Team
    from teamgraph.drawing import draw_png

    Image(draw_png(Team(model=...).compile()))
    ```

Needs the ``notebooks`` extra: ``pip install 'teamgraph[notebooks]'``.
"""

from __future__ import annotations

import io
from collections import deque
from pathlib import Path
from typing import Any

__all__ = ["draw_png", "graph_layers"]

START, END = "__start__", "__end__"
_LABELS = {START: "START", END: "END"}
_INCH_PER_NODE = 1.45
_MIN_WIDTH_IN = 6.0
_INCH_PER_LAYER = 1.3
_DPI = 100
_BOX = {"boxstyle": "round,pad=0.4", "facecolor": "#eef2ff", "edgecolor": "#4f46e5", "linewidth": 1.2}
_ENDS_BOX = {**_BOX, "facecolor": "#f1f5f9", "edgecolor": "#64748b"}


def graph_layers(nodes: list[str], edges: list[tuple[str, str]]) -> list[list[str]]:
    """Nodes in layers by their distance from START (END last; unreachable nodes before it).

    Args:
        nodes: The node ids.
        edges: ``(source, target)`` pairs.

    Returns:
        The layers, top to bottom, each in the nodes' order.
    """
    depth = {START: 0} if START in nodes else {}
    queue = deque(depth)
    while queue:
        node = queue.popleft()
        for source, target in edges:
            if source == node and target not in depth:
                depth[target] = depth[node] + 1
                queue.append(target)
    last = max((d for n, d in depth.items() if n != END), default=0)
    for node in nodes:
        if node != END and node not in depth:
            depth[node] = last + 1
    if END in nodes:
        depth[END] = max((d for n, d in depth.items() if n != END), default=0) + 1
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in nodes:
        layers[depth[node]].append(node)
    return [layer for layer in layers if layer]


def draw_png(graph: Any, path: str | Path | None = None, *, xray: bool = False) -> bytes:
    """Draw a compiled graph (or ``get_graph()``'s result) as a PNG.

    Args:
        graph: A compiled LangGraph graph, or a ``langchain_core`` ``Graph``.
        path: Also write the PNG there.
        xray: Draw subgraphs' inner nodes too (a team graph has none: its steps run in the router's pool).

    Returns:
        The PNG's bytes (``IPython.display.Image(draw_png(graph))`` shows it).
    """
    # Imported here: matplotlib is an optional extra and slow to import.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    drawn = graph.get_graph(xray=xray) if hasattr(graph, "get_graph") else graph
    nodes = list(drawn.nodes)
    edges = [(e.source, e.target, bool(e.conditional)) for e in drawn.edges]
    layers = graph_layers(nodes, [(s, t) for s, t, _ in edges])
    widest = max(len(layer) for layer in layers)
    # NOTE: wide rows get taller gaps, so edges from a row's far ends stay steep enough to follow.
    step = max(1.0, widest / 5)
    figure = Figure(figsize=(max(_MIN_WIDTH_IN, widest * _INCH_PER_NODE), len(layers) * _INCH_PER_LAYER * step**0.5))
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(-0.5, widest - 0.5)
    axes.set_ylim(-(len(layers) - 0.5) * step, 0.5 * step)
    axes.axis("off")

    where: dict[str, tuple[float, float]] = {}
    row_of: dict[str, int] = {}
    for row, layer in enumerate(layers):
        offset = (widest - len(layer)) / 2
        for column, node in enumerate(layer):
            where[node] = (offset + column, -row * step)
            row_of[node] = row
    for source, target, conditional in edges:
        if source == target:
            _draw_loop(axes, where[source], step=step, conditional=conditional)
            continue
        back = row_of[target] <= row_of[source]
        # NOTE: an edge that skips a row bends, so it does not run through the nodes between.
        bend = 0.1 if back else (0.4 if row_of[target] - row_of[source] > 1 else 0)
        axes.annotate(
            "",
            xy=where[target],
            xytext=where[source],
            arrowprops={
                "arrowstyle": "-|>",
                "color": "#94a3b8" if back else "#334155",
                "linewidth": 0.9,
                "linestyle": "--" if conditional else "-",
                "shrinkA": 14,
                "shrinkB": 14,
                "connectionstyle": f"arc3,rad={bend}",
            },
        )
    for node, (x, y) in where.items():
        label = _LABELS.get(node, drawn.nodes[node].name)
        axes.text(
            x, y, label, ha="center", va="center", fontsize=9, bbox=_ENDS_BOX if node in _LABELS else _BOX, zorder=3
        )
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    png = buffer.getvalue()
    if path is not None:
        Path(path).write_bytes(png)
    return png


def _draw_loop(axes: Any, at: tuple[float, float], *, step: float, conditional: bool) -> None:
    """An edge from a node to itself (the router's next superstep), as a loop on its right."""
    x, y = at
    axes.annotate(
        "",
        xy=(x + 0.05, y - 0.05 * step),
        xytext=(x + 0.05, y + 0.05 * step),
        arrowprops={
            "arrowstyle": "-|>",
            "color": "#334155",
            "linewidth": 0.9,
            "linestyle": "--" if conditional else "-",
            "shrinkA": 0,
            "shrinkB": 0,
            "connectionstyle": "arc3,rad=-2.2",
        },
    )
