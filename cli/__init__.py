"""The `dagent` command line: `python -m durable_agent.cli` or the `dagent` script."""
