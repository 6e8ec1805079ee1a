"""Free TCP ports for servers this process starts (never a developer's own dev server's defaults)."""

from __future__ import annotations

import socket

_RESERVED_PORTS = frozenset({7233, 8233})  # a developer's own `temporal server start-dev` defaults


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host`` (never 7233/8233)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _RESERVED_PORTS:
            return port


def port_open(host: str, port: int) -> bool:
    """Whether something accepts a TCP connection on `host`:`port` (within 0.2 s)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0
