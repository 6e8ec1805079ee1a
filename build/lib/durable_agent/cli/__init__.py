"""The `dagent` command line: `python -m cli` or the `dagent` script."""
