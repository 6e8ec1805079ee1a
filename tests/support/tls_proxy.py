"""A TLS-terminating TCP proxy in front of the (plaintext) Temporal dev server, for connection tests.

The dev server cannot serve TLS, so tests put this in front of it: clients speak TLS (optionally mTLS) to
the proxy, which forwards the bytes to the dev server. It also reads the gRPC request headers it forwards
(HTTP/2 HEADERS frames, HPACK-decoded) so a test can see which `authorization` header reached the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from hpack import Decoder

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADERS, CONTINUATION = 0x1, 0x9
PADDED, PRIORITY = 0x8, 0x20


class _HeaderSniffer:
    """Follows the client-to-server HTTP/2 byte stream and decodes request headers."""

    def __init__(self, seen: list[dict[str, str]]) -> None:
        self.buffer = b""
        self.preface_done = False
        self.decoder = Decoder()
        self.block = b""
        self.seen = seen

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if not self.preface_done:
            if len(self.buffer) < len(HTTP2_PREFACE):
                return
            self.buffer = self.buffer[len(HTTP2_PREFACE):]
            self.preface_done = True
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                return
            kind, flags = self.buffer[3], self.buffer[4]
            payload = self.buffer[9:9 + length]
            self.buffer = self.buffer[9 + length:]
            if kind == HEADERS:
                pad = payload[0] if flags & PADDED else 0
                start = (1 if flags & PADDED else 0) + (5 if flags & PRIORITY else 0)
                self.block = payload[start:len(payload) - pad]
            elif kind == CONTINUATION:
                self.block += payload
            else:
                continue
            if flags & 0x4:  # END_HEADERS
                headers = self.decoder.decode(self.block)
                self.seen.append({str(k): str(v) for k, v in headers})
                self.block = b""


class TLSProxy:
    """`async with TLSProxy(context, upstream_port) as proxy:` then connect to `proxy.address` over TLS."""

    def __init__(self, context: ssl.SSLContext, upstream_host: str, upstream_port: int) -> None:
        self.context = context
        self.upstream = (upstream_host, upstream_port)
        self.server: asyncio.Server | None = None
        self.headers: list[dict[str, str]] = []
        self.handshake_errors: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def __aenter__(self) -> TLSProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context,
                                                 ssl_handshake_timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            sniffer = _HeaderSniffer(self.headers)
            await asyncio.gather(self._pipe(reader, up_writer, sniffer), self._pipe(up_reader, writer, None))
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    sniffer: _HeaderSniffer | None) -> None:
        try:
            while data := await reader.read(65536):
                if sniffer is not None:
                    sniffer.feed(data)
                writer.write(data)
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.close()


def server_context(cert: object, *, client_ca: object | None = None) -> ssl.SSLContext:
    """A server-side context from a trustme leaf cert; with `client_ca`, client certificates are required."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)  # type: ignore[attr-defined]
    context.set_alpn_protocols(["h2"])
    if client_ca is not None:
        client_ca.configure_trust(context)  # type: ignore[attr-defined]
        context.verify_mode = ssl.CERT_REQUIRED
    return context
