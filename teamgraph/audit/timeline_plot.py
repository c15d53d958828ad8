"""Drawing a :class:`~teamgraph.audit.timeline.Timeline`: a PNG with matplotlib, an HTML page with plotly.

One lane per agent (the person on top, then the Team Leader, then the members in
order of creation): model calls as solid bars, waits as light hatched bars (on a
person: red; on another agent: amber), tool calls that ran within a step as ticks,
messages between lanes as arrows. Both libraries are in the ``timeline`` extra
(``pip install 'teamgraph[timeline]'``) and imported only here, when a picture is asked for.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamgraph.audit.timeline import Timeline

STYLE: dict[str, dict[str, str]] = {
    "model": {"color": "#4f46e5", "label": "model call", "hatch": ""},
    "tool": {"color": "#0d9488", "label": "tool call", "hatch": ""},
    "wait_agent": {"color": "#f59e0b", "label": "waits for an agent", "hatch": "//"},
    "wait_person": {"color": "#dc2626", "label": "waits for a person", "hatch": "//"},
}
ARROW_COLOR = {"message": "#475569", "answer": "#059669", "request": "#dc2626"}
_BAR = 0.5


def _missing(library: str, exc: ImportError) -> ImportError:
    return ImportError(f"Drawing a timeline needs {library}: pip install 'teamgraph[timeline]' ({exc}).")


def _rows(timeline: Timeline) -> dict[str, int]:
    """Each lane's row: the first lane on top."""
    return {lane: len(timeline.lanes) - 1 - i for i, lane in enumerate(timeline.lanes)}


def _title(timeline: Timeline) -> str:
    agents = len([lane for lane in timeline.lanes if lane != "person"])
    counts = (agents, "agent"), (timeline.count("model"), "model call"), (len(timeline.arrows), "message")
    parts = [f"{n} {noun}{'' if n == 1 else 's'}" for n, noun in counts]
    return " · ".join([f"Thread {timeline.thread}", *parts, f"{timeline.duration:.2f} s"])


def draw_png(timeline: Timeline, *, width: float = 12.0) -> bytes:
    """The timeline as PNG bytes (matplotlib, Agg backend: no display needed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise _missing("matplotlib", exc) from None
    rows = _rows(timeline)
    fig, ax = plt.subplots(figsize=(width, 1.4 + 0.62 * max(len(rows), 1)), dpi=100)
    try:
        _draw_spans(ax, timeline, rows)
        _draw_arrows(ax, timeline, rows)
        ax.set_yticks(list(rows.values()), list(rows))
        ax.set_ylim(-0.7, max(len(rows), 1) - 0.3)
        ax.set_xlim(0, max(timeline.duration, 1e-3) * 1.02)
        ax.set_xlabel("seconds since the thread's first checkpoint")
        ax.set_title(_title(timeline), loc="left", fontsize=10, pad=18)
        ax.grid(axis="x", color="#e2e8f0", linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        handles = [Patch(facecolor=s["color"], hatch=s["hatch"], label=s["label"]) for s in STYLE.values()]
        ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=4, frameon=False, fontsize=8)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        plt.close(fig)


def _draw_spans(ax: Any, timeline: Timeline, rows: dict[str, int]) -> None:
    gap = timeline.duration / 250  # NOTE: back-to-back model calls of one agent stay apart
    for span in timeline.spans:
        style = STYLE[span.kind]
        waiting = span.kind.startswith("wait")
        width = span.end - span.start - (0 if waiting else gap)
        ax.broken_barh(
            [(span.start, max(width, timeline.duration / 400))],
            (rows[span.lane] - _BAR / 2, _BAR),
            facecolors=style["color"],
            alpha=0.35 if waiting else 0.9,
            hatch=style["hatch"],
            edgecolor=style["color"],
            linewidth=0.5,
        )
    for mark in timeline.marks:
        y = rows[mark.lane]
        ax.plot([mark.at, mark.at], [y - _BAR / 2 - 0.08, y + _BAR / 2 + 0.08], color=STYLE["tool"]["color"], lw=1.6)


def _draw_arrows(ax: Any, timeline: Timeline, rows: dict[str, int]) -> None:
    for arrow in timeline.arrows:
        a, b = rows[arrow.sender], rows[arrow.receiver]
        if a == b:
            continue
        # NOTE: from the edge of the sender's bar to the edge of the receiver's, so bars stay readable.
        step = _BAR / 2 if b < a else -_BAR / 2
        ax.annotate(
            "",
            xy=(arrow.end, b + step),
            xytext=(arrow.start, a - step),
            arrowprops={"arrowstyle": "-|>", "color": ARROW_COLOR[arrow.kind], "lw": 0.9, "alpha": 0.8,
                        "shrinkA": 0, "shrinkB": 0},
        )  # fmt: skip


def draw_html(timeline: Timeline) -> str:
    """The timeline as a self-contained interactive HTML page (plotly; works offline)."""
    try:
        import plotly.graph_objects as go  # type: ignore[import-untyped]
    except ImportError as exc:
        raise _missing("plotly", exc) from None
    fig = go.Figure()
    for kind, style in STYLE.items():
        spans = [s for s in timeline.spans if s.kind == kind]
        if not spans:
            continue
        fig.add_trace(
            go.Bar(
                name=style["label"],
                orientation="h",
                y=[s.lane for s in spans],
                x=[max(s.end - s.start, 1e-4) for s in spans],
                base=[s.start for s in spans],
                marker={"color": style["color"], "opacity": 0.45 if kind.startswith("wait") else 0.9},
                hovertext=[f"{s.lane}: {s.label} ({s.start:.3f}–{s.end:.3f} s)" for s in spans],
                hoverinfo="text",
            )
        )
    if timeline.marks:
        fig.add_trace(
            go.Scatter(
                name="tool call (within a step)",
                mode="markers",
                x=[m.at for m in timeline.marks],
                y=[m.lane for m in timeline.marks],
                marker={"symbol": "line-ns-open", "size": 18, "color": STYLE["tool"]["color"]},
                hovertext=[f"{m.lane}: {m.label}" for m in timeline.marks],
                hoverinfo="text",
            )
        )
    for arrow in timeline.arrows:
        if arrow.sender == arrow.receiver:
            continue
        fig.add_annotation(
            x=arrow.end, y=arrow.receiver, ax=arrow.start, ay=arrow.sender, xref="x", yref="y", axref="x",
            ayref="y", showarrow=True, arrowhead=2, arrowwidth=1, arrowcolor=ARROW_COLOR[arrow.kind],
            hovertext=f"{arrow.sender} → {arrow.receiver}: {arrow.label}", text="",
        )  # fmt: skip
    fig.update_layout(
        title=_title(timeline),
        barmode="overlay",
        xaxis_title="seconds since the thread's first checkpoint",
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(timeline.lanes))},
        height=220 + 60 * len(timeline.lanes),
        template="plotly_white",
    )
    return str(fig.to_html(include_plotlyjs=True, full_html=True))
