from durable_agent.cli.app import main

main()
