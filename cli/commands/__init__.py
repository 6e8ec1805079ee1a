"""The `dagent` commands, one module per kind; cli/app.py registers them by name and imports one only when it
runs (or when help lists it). Their tops import only typer and cli/common.py."""
