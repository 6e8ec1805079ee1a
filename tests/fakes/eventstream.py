"""AWS event-stream frames (`application/vnd.amazon.eventstream`), as Bedrock's
`InvokeModelWithResponseStream` sends them.

A frame: a 12-byte prelude (total length, headers length, CRC32 of those 8 bytes, all big-endian uint32),
the headers (each: name length as one byte, the name, value type 7 = string, value length as uint16, the
value), the payload, and the CRC32 of everything before it.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7
_PRELUDE = 12
_MESSAGE_CRC = 4


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", _STRING, len(raw_value))
            + raw_value)


def frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message with string-valued `headers` around `payload`."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    lengths = struct.pack(">II", _PRELUDE + len(encoded) + len(payload) + _MESSAGE_CRC, len(encoded))
    head = lengths + struct.pack(">I", zlib.crc32(lengths)) + encoded + payload
    return head + struct.pack(">I", zlib.crc32(head))


def chunk(event: Mapping[str, Any]) -> bytes:
    """A Bedrock `chunk` event: a JSON payload whose `bytes` is the base64 of one Anthropic stream event."""
    data = base64.b64encode(json.dumps(event).encode()).decode()
    headers = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps({"bytes": data}).encode())


def exception(exception_type: str, message: str) -> bytes:
    """An exception frame sent inside the stream (e.g. `throttlingException`), which ends it."""
    headers = {":exception-type": exception_type, ":content-type": "application/json",
               ":message-type": "exception"}
    return frame(headers, json.dumps({"message": message}).encode())
