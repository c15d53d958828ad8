"""``python -m teamgraph.cli``: the same as the `teamgraph` console script."""

from teamgraph.cli import main

if __name__ == "__main__":
    main()
