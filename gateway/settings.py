"""Gateway settings, from the command line and the config file."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    frame_bytes_max: int = 104_857_600
    auto_create_topics: bool = False
    default_partitions: int = 1
    fetch_wait_ms_max: int = 30_000
