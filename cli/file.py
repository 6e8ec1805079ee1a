"""`dagent file ...`: the files a prompt's tools attached (`file` outputs), listed and saved.

    dagent file ls prompt-…                      # each file: its index, name, type, size and summary
    dagent file get prompt-… paris-trip.md       # saved as ./paris-trip.md (by name or by index)
    dagent file get prompt-… 3 -o - | less       # to stdout

Read from the shared file store (DAGENT_STORE / DAGENT_FILE_DIR, as the worker writes it); over HTTP the same
file is `GET /prompts/{id}/files/{index}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from durable_agent.cli import common
from durable_agent.cli.common import AddressOption, ProfileOption, console

if TYPE_CHECKING:
    from durable_agent.agent.models import FileOutput, Prompt

file_app = typer.Typer(help="Files a prompt's tools attached: list them, save one.", no_args_is_help=True)

PromptArgument = Annotated[str, typer.Argument(help="Prompt (workflow) id")]


def attached(prompt: Prompt) -> list[tuple[int, FileOutput]]:
    """The prompt's files with their index in its output (how the record, the events and the API name them)."""
    from durable_agent.agent.models import FileOutput

    return [(index, entry) for index, entry in enumerate(prompt.output) if isinstance(entry, FileOutput)]


def pick(prompt: Prompt, which: str | None) -> tuple[int, FileOutput]:
    """The file named `which` (its name, or its index in the output); the only one when `which` is None."""
    files = attached(prompt)
    if not files:
        raise LookupError(f"prompt {prompt.id} has no attached file")
    if which is None:
        if len(files) > 1:
            raise LookupError(f"prompt {prompt.id} has {len(files)} files; name one: "
                              + ", ".join(entry.name for _, entry in files))
        return files[0]
    found = [(i, e) for i, e in files if str(i) == which] or [(i, e) for i, e in files if e.name == which]
    if not found:
        raise LookupError(f"prompt {prompt.id} has no file {which!r}; its files: "
                          + ", ".join(f"[{i}] {e.name}" for i, e in files))
    return found[-1]  # a name used twice: the latest


@file_app.command("ls")
def file_ls(prompt_id: PromptArgument, address: AddressOption = None, profile: ProfileOption = None) -> None:
    """List the prompt's attached files."""
    from durable_agent.client import AgentClient

    settings = common.load_settings(address, profile)

    async def main() -> int:
        prompt = await (await AgentClient.connect(settings)).prompt(prompt_id).get()
        files = attached(prompt)
        if not files:
            console.print(f"prompt {prompt_id} has no attached file")
        for index, entry in files:
            console.print(f"[{index}] {entry.name}  {entry.media_type}, {entry.size} bytes — {entry.summary}",
                          markup=False, highlight=False)
        return 0

    common.run_async(main, settings)


@file_app.command("get")
def file_get(
    prompt_id: PromptArgument,
    which: Annotated[str | None, typer.Argument(help="The file's name or index (`dagent file ls`); optional "
                                                     "when the prompt has one file")] = None,
    output: Annotated[str | None, typer.Option("-o", "--output", help="Where to save it (a directory, a path, "
                                                                      "or - for stdout); default: its name here")
                      ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file")] = False,
    address: AddressOption = None,
    profile: ProfileOption = None,
) -> None:
    """Save a file the prompt's tools attached."""
    import sys

    from durable_agent.client import AgentClient

    settings = common.load_settings(address, profile)

    async def main() -> int:
        client = await AgentClient.connect(settings)
        index, entry = pick(await client.prompt(prompt_id).get(), which)
        content = await client.read_file(entry.content_ref)
        if output == "-":
            sys.stdout.buffer.write(content)
            sys.stdout.buffer.flush()
            return 0
        target = Path(output) if output else Path(".")
        if target.is_dir():
            name = Path(entry.name).name  # never a path the tool chose: only its last part
            target = target / (name if name not in ("", ".", "..") else f"file-{index}")
        if target.exists() and not force:
            raise FileExistsError(f"{target} exists (--force overwrites it)")
        target.write_bytes(content)
        console.print(f"saved [{index}] {entry.name} ({entry.media_type}, {len(content)} bytes) to {target}",
                      markup=False, highlight=False)
        return 0

    common.run_async(main, settings)
