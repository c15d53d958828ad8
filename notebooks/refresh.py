"""Run every notebook in this folder top to bottom and save it with its outputs.

Usage (from the repository root, with the ``test`` and ``notebooks`` extras installed)::

    python notebooks/refresh.py            # every notebook
    python notebooks/refresh.py 01_quickstart.ipynb

Each notebook runs offline (its scripted model, temporary home folders) on the
``python3`` Jupyter kernel, in a temporary working directory, exactly as
tests/test_notebooks.py runs it; a cell that fails stops the refresh and
leaves the notebook unchanged.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent
KERNEL = "python3"
CELL_TIMEOUT_S = 120
# Keys that would send traces or requests out: the notebooks run offline.
ONLINE_KEYS = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "OPENAI_API_KEY", "TEAMGRAPH_MODEL", "TEAMGRAPH_DB")


def offline_env(tmp: str) -> dict[str, str]:
    """This environment without online keys, tracing off, temporary folders under ``tmp``."""
    env = {k: v for k, v in os.environ.items() if k not in ONLINE_KEYS}
    env.update({"TMPDIR": tmp, "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"})
    return env


def refresh(path: Path) -> None:
    """Execute ``path`` in a temporary folder and write it back with its outputs."""
    book = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="teamgraph-notebook-") as tmp:
        client = nbclient.NotebookClient(
            book, timeout=CELL_TIMEOUT_S, kernel_name=KERNEL, resources={"metadata": {"path": tmp}}
        )
        client.execute(cwd=tmp, env=offline_env(tmp))
    nbformat.write(book, path)


def main(argv: list[str]) -> int:
    paths = [HERE / name for name in argv] if argv else sorted(HERE.glob("*.ipynb"))
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        refresh(path)
    print(f"refreshed {len(paths)} notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
