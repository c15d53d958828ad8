"""Every notebook in notebooks/ runs top to bottom on a real Jupyter kernel.

Notebooks run offline (ScriptedChatModel, temporary home folders), each in its own
kernel with a temporary working directory; a cell that raises fails the test.
New notebooks are picked up automatically. Notebooks are stored *with* their outputs
(so they read well where they are browsed), refreshed by ``python notebooks/refresh.py``.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernelspec = pytest.importorskip("jupyter_client.kernelspec")

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
KERNEL = "python3"
CELL_TIMEOUT_S = 120

# Keys that would send traces or requests out (the notebooks must run offline).
_ONLINE_KEYS = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "OPENAI_API_KEY", "TEAMGRAPH_MODEL")


@pytest.fixture(scope="session")
def kernel_name() -> str:
    """The python3 kernel, installed for this interpreter if it is missing (CI installs it)."""
    if KERNEL not in kernelspec.find_kernel_specs():
        subprocess.run(
            [sys.executable, "-m", "ipykernel", "install", "--user", "--name", KERNEL],
            check=True,
            capture_output=True,
        )
    return KERNEL


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The kernel inherits this environment: offline, no tracing, temp folders under tmp_path."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' tempfile.mkdtemp() homes
    for key in _ONLINE_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("LANGCHAIN_TRACING_V2", "false")


def test_notebooks_exist() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_with_its_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    code = [cell for cell in book.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name}: cells not run top to bottom in one go ({counts}); refresh with: python notebooks/refresh.py"
    )
    assert any(cell.outputs for cell in code), f"{path.name} has no outputs; run python notebooks/refresh.py"
    errors = [out for cell in code for out in cell.outputs if out.get("output_type") == "error"]
    assert not errors, f"{path.name} was saved with an error: {errors}"


def test_the_quickstart_shows_the_run_and_the_team_graph_as_pictures() -> None:
    book = nbformat.read(NOTEBOOKS_DIR / "01_quickstart.ipynb", as_version=4)
    images = [
        base64.b64decode(out["data"]["image/png"])
        for cell in book.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if "image/png" in out.get("data", {})
    ]
    assert len(images) == 2  # the run's timeline, then the team graph
    # NOTE: router, human, start and end: a small picture, but a drawn one (an empty figure is ~2 KB).
    assert all(image.startswith(b"\x89PNG") and len(image) > 5_000 for image in images)


def test_draw_png_draws_the_team_offline(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from teamgraph import ScriptedChatModel, Team
    from teamgraph.drawing import draw_png, graph_layers

    graph = Team(model=ScriptedChatModel({}), home=tmp_path, checkpointer=False).compile()
    png = draw_png(graph, tmp_path / "team.png")
    assert png.startswith(b"\x89PNG") and (tmp_path / "team.png").read_bytes() == png
    layers = graph_layers(list(graph.get_graph().nodes), [(e.source, e.target) for e in graph.get_graph().edges])
    assert layers[0] == ["__start__"] and layers[1] == ["router"] and layers[-1] == ["__end__"]
    # NOTE: the team is the graph (issue 29): the leader, a node per role, the member node, the gate.
    agents = set(layers[2])
    assert {"leader", "researcher", "ui-operator", "member", "human"} <= agents
    assert draw_png(graph, xray=True).startswith(b"\x89PNG")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, kernel_name: str, offline_env: None) -> None:
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        book,
        timeout=CELL_TIMEOUT_S,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(tmp_path)}},  # the kernel's working directory
    )
    try:
        client.execute(cwd=str(tmp_path), env=dict(os.environ))
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name} failed:\n{error}", pytrace=False)
    errors = [
        out
        for cell in book.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors, errors
