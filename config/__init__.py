"""What clients and workers both configure: `ClientSettings`, the Temporal connection, the data converter with its
payload store and codec, and observability. Imports only `durable_agent.agent`; `client` and `workers` build on it.
"""
