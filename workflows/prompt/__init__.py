"""PromptWorkflow (workflow.py), the conductor, and its rooms: the record, the approvals desk and its checks,
steering, sub-agents, round inputs, tool running, notifications. Imports nothing itself, so a client that needs a
wire model never loads the workflow."""
