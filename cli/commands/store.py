"""`dagent store check|sweep|refresh`: the blob store of payloads and files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from durable_agent.cli import common
from durable_agent.cli.common import AddressOption, ProfileOption, console

store_app = typer.Typer(help="The blob store of payloads and files (DAGENT_STORE).", no_args_is_help=True)


@store_app.command("check")
def store_check() -> None:
    """Write and read back a probe object: exit 0 when the configured store is usable."""
    from durable_agent.config.storage.stores import check_store

    settings = common.load_settings(None)

    async def main() -> int:
        await check_store(settings.blob_objects())
        console.print(f"store ok: {settings.blob_objects().location}")
        return 0

    common.run_async(main)


@store_app.command("sweep")
def store_sweep(
    address: AddressOption = None,
    profile: ProfileOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed")] = False,
    grace_minutes: Annotated[int, typer.Option(help="Never remove blobs written this recently")] = 60,
) -> None:
    """Remove local-directory blobs of workflows past the namespace's retention (S3/GCS: use a lifecycle
    rule, see docs/deploying.md)."""
    from datetime import timedelta

    from durable_agent.config.storage.local import DirectoryObjects
    from durable_agent.workers.retention import sweep_directory
    from durable_agent.workers.worker import connect

    settings = common.load_settings(address, profile)

    async def main() -> int:
        if not isinstance(settings.blob_objects(), DirectoryObjects):
            raise ValueError(f"{settings.blob_objects().location} is swept by its lifecycle rule, not by dagent "
                             "(docs/deploying.md, Retention)")
        client = await connect(settings)
        roots = [Path(settings.payload_dir), Path(settings.file_dir)]
        report = await sweep_directory(client, roots, grace=timedelta(minutes=grace_minutes), dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        for label in report.removed:
            console.print(f"{verb} {label}")
        console.print(f"{verb} blobs of {len(report.removed)} workflow run(s), {report.bytes_removed} bytes; "
                      f"kept {len(report.kept)}; namespace retention {report.retention}")
        return 0

    common.run_async(main, settings)


@store_app.command("refresh")
def store_refresh(
    address: AddressOption = None,
    profile: ProfileOption = None,
    older_than: Annotated[str, typer.Option(help="Re-write referenced objects older than this (e.g. 7d)")] = "7d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would be re-written")] = False,
) -> None:
    """Keep every object an open workflow references younger than the store's age rule (run it daily; see
    docs/operations.md, Retention)."""
    from durable_agent.config.durations import parse_duration
    from durable_agent.workers.retention import refresh_live_blobs
    from durable_agent.workers.worker import connect

    settings = common.load_settings(address, profile)
    try:
        age = parse_duration(older_than, what="--older-than")
    except ValueError as exc:
        common.exit_user_error(exc)

    async def main() -> int:
        stores = {o.location: o for o in (settings.blob_objects(), settings.file_store().objects)}
        done = await refresh_live_blobs(await connect(settings), list(stores.values()), older_than=age,
                                        dry_run=dry_run, task_queue=settings.task_queue)
        console.print(f"{'would re-write' if dry_run else 're-wrote'} {len(done.refreshed)} of {done.referenced} "
                      f"objects referenced by {done.workflows} open workflow(s); {len(done.missing)} missing")
        for key in done.missing:
            console.print(f"missing {key}")
        return 1 if done.missing else 0

    common.run_async(main, settings)
