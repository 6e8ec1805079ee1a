"""`python -m durable_agent.cli`: the `dagent` command line."""

from durable_agent.cli.entry import main

main()
