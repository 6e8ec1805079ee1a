"""The payloads at the workflows' boundaries, one module per boundary; import them from workflows/protocol.py."""
