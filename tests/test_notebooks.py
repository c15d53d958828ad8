"""Every notebook in notebooks/ runs top to bottom on a real Jupyter kernel.

Notebooks run offline (ScriptedChatModel, temporary home folders), each in its own
kernel with a temporary working directory; a cell that raises fails the test.
New notebooks are picked up automatically. Notebooks are stored without outputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    dirty = [
        i for i, cell in enumerate(book.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} have outputs; clear them before committing"


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
        out for cell in book.cells if cell.cell_type == "code"
        for out in cell.get("outputs", []) if out.get("output_type") == "error"
    ]
    assert not errors, errors
