"""Test doubles shared by the test suite."""

from tests.fakes.llm_server import PROTOCOLS, FakeCall, FakeLLMServer, FakeUsage, SSEOptions, WireProtocol

__all__ = ["PROTOCOLS", "FakeCall", "FakeLLMServer", "FakeUsage", "SSEOptions", "WireProtocol"]
