"""The data converter reads what it wrote after the SDK copies it to bind a store context (once per payload
sequence with external storage on)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from durable_agent.config.storage.converter import data_converter
from durable_agent.workflows.protocol import PromptRequest


def test_a_copied_data_converter_reads_what_the_original_wrote(tmp_path: Path) -> None:
    converter = data_converter(str(tmp_path))
    request = PromptRequest(input="hello", user_id="u1")
    [payload] = converter.payload_converter.to_payloads([request])
    copy = dataclasses.replace(converter)  # what DataConverter._with_store_context does
    assert copy.payload_converter is not converter.payload_converter
    assert copy.payload_converter.from_payloads([payload], [PromptRequest]) == [request]
