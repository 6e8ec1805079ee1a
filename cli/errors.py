"""How `dagent` reports a failure: one line on stderr, a non-zero exit code.

Shared by every command (and by whatever else prints user errors): `--json` output stays the only thing
on stdout, and a script can rely on `dagent ...; echo $?`.
"""

from __future__ import annotations

import sys

import typer

USER_ERROR = 2  # the command could not run as given (bad arguments, bad input, unknown prompt)
REFUSED = 1  # the command ran but what it asked for did not happen


def one_line(exc: BaseException) -> str:
    """A single line saying what went wrong, with the causes chained on the same line."""
    from pydantic import ValidationError  # here, not at the top: `dagent --help` imports this module

    if isinstance(exc, ValidationError):
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
    elif isinstance(exc, typer.TyperException):
        text = exc.format_message()
    else:
        text = str(exc) or type(exc).__name__
        cause, depth = exc.__cause__, 0
        while cause is not None and depth < 3:
            text += f" (caused by {type(cause).__name__}: {cause})"
            cause, depth = cause.__cause__, depth + 1
    return " ".join(text.split())


def report(prefix: str, exc: BaseException) -> None:
    sys.stderr.write(f"{prefix}: {one_line(exc)}\n")
    sys.stderr.flush()
