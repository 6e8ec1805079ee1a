"""`DurableAgentPlugin` builds on what a team configured: its codec, failure converter, external storage and
sandbox restrictions stay; ours are added around them (config/storage/converter.py, workers/plugin.py)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import ClientConfig
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    PayloadCodec,
)
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from durable_agent.config.storage.codec import AESGCMCodec
from durable_agent.config.storage.converter import CodecChain, IncompatiblePayloadConverter
from durable_agent.workers.plugin import DurableAgentPlugin, compose_runner
from durable_agent.workers.settings import Settings

KEY = base64.b64encode(b"k" * 32).decode()


class TeamCodec(PayloadCodec):
    """Marks every payload it encodes, as a team's compression or encryption would change it."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload(metadata={"encoding": b"team/v1"}, data=p.SerializeToString()) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            inner = Payload()
            inner.ParseFromString(p.data)
            out.append(inner)
        return out


class TeamFailureConverter(DefaultFailureConverter):
    pass


def _client_converter(plugin: DurableAgentPlugin, existing: DataConverter) -> DataConverter:
    config = plugin.configure_client(cast(ClientConfig, {"data_converter": existing}))
    return config["data_converter"]


def _settings(tmp_path: Path, **update: Any) -> Settings:
    return Settings(payload_dir=str(tmp_path / "payloads"), **update)


def test_the_team_codec_and_failure_converter_are_kept(tmp_path: Path) -> None:
    codec = TeamCodec()
    converter = _client_converter(DurableAgentPlugin(_settings(tmp_path)), DataConverter(
        payload_codec=codec, failure_converter_class=TeamFailureConverter))
    assert converter.payload_codec is codec
    assert converter.failure_converter_class is TeamFailureConverter
    assert converter.payload_converter_class is PydanticPayloadConverter
    assert converter.external_storage is not None, "our blob store is added where the team has none"


async def test_with_our_codec_keys_ours_runs_inside_the_team_codec(tmp_path: Path) -> None:
    team = TeamCodec()
    settings = _settings(tmp_path, codec_keys=f"k1:{KEY}")
    converter = _client_converter(DurableAgentPlugin(settings), DataConverter(payload_codec=team))
    chain = converter.payload_codec
    assert isinstance(chain, CodecChain) and isinstance(chain.inner, AESGCMCodec) and chain.outer is team
    [wire] = await converter.encode(["secret"])
    assert wire.metadata["encoding"] == b"team/v1", "the team's encoding is the outermost, on the wire"
    [inside] = await team.decode([wire])
    assert inside.metadata["encoding"] != b"json/plain" and b"secret" not in inside.data, "ours encrypted it"
    assert await converter.decode([wire], [str]) == ["secret"]


def test_the_team_external_storage_is_kept(tmp_path: Path) -> None:
    from durable_agent.config.storage.drivers import payload_driver
    from durable_agent.config.storage.stores import objects_for

    theirs = ExternalStorage(drivers=[payload_driver(objects_for("", str(tmp_path / "theirs")))],
                             payload_size_threshold=1)
    converter = _client_converter(DurableAgentPlugin(_settings(tmp_path)), DataConverter(external_storage=theirs))
    assert converter.external_storage is theirs


def test_applied_twice_nothing_is_added_twice(tmp_path: Path) -> None:
    plugin = DurableAgentPlugin(_settings(tmp_path, codec_keys=f"k1:{KEY}"))
    once = _client_converter(plugin, DataConverter(payload_codec=TeamCodec()))
    twice = _client_converter(plugin, once)
    assert twice.payload_codec is once.payload_codec and twice.external_storage is once.external_storage


def test_pydantic_converter_is_kept_and_an_unknown_one_refused_in_one_line(tmp_path: Path) -> None:
    plugin = DurableAgentPlugin(_settings(tmp_path))
    assert _client_converter(plugin, DataConverter(payload_converter_class=PydanticPayloadConverter)
                             ).payload_converter_class is PydanticPayloadConverter

    class TeamProtobufOnly(DefaultPayloadConverter):
        pass

    with pytest.raises(IncompatiblePayloadConverter) as refused:
        _client_converter(plugin, DataConverter(payload_converter_class=TeamProtobufOnly))
    message = str(refused.value)
    assert "\n" not in message and "TeamProtobufOnly" in message and "PydanticPayloadConverter" in message


def test_a_team_sandbox_keeps_its_passthrough_and_gains_ours() -> None:
    team = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("mylib"))
    runner = compose_runner("on")(team)
    assert type(runner) is SandboxedWorkflowRunner
    assert {"mylib", "durable_agent"} <= runner.restrictions.passthrough_modules
    strict = compose_runner("strict")(team)
    assert isinstance(strict, SandboxedWorkflowRunner)
    assert "mylib" in strict.restrictions.passthrough_modules
    assert "durable_agent" not in strict.restrictions.passthrough_modules
    unsandboxed = UnsandboxedWorkflowRunner()
    assert compose_runner("on")(unsandboxed) is unsandboxed, "a team's own kind of runner is theirs to keep"
    assert isinstance(compose_runner("off")(team), UnsandboxedWorkflowRunner)
