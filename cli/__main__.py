from durable_agent.cli.entry import main

main()
