"""Wires a running broker together: store, engine, handlers, server."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import uuid
from dataclasses import replace

from ..engine.errors import DataDirLocked
from ..engine.service import Engine
from ..engine.store.atomic import read_whole, write_atomically
from ..engine.store.base import Store
from ..engine.store.local import LocalStore
from .config import ServeConfig, parse_address, split_hdfs_url
from .context import Context
from .dispatch import Dispatcher
from .handlers.registry import load_all
from .server import Server

log = logging.getLogger(__name__)
CLUSTER_ID_PATH = "cluster-id"
LOCK_PATH = "serve.lock"


class Broker:
    """One Martlet broker process: open with `start`, close with `stop`."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        os.makedirs(config.data_dir, exist_ok=True)
        local = LocalStore(config.data_dir)
        self._lock = local.lock(LOCK_PATH)
        self.store: Store = local if config.store is None else _hdfs_store(config.store)
        self.engine = Engine(self.store, config.engine)
        self.server: Server | None = None
        self.address: tuple[str, int] | None = None

    async def start(self) -> tuple[str, int]:
        self.engine.open()
        self.engine.start_background()
        settings = self.config.gateway
        ctx = Context(self.engine, settings, _cluster_id(self.store))
        self.server = Server(Dispatcher(ctx, load_all()), settings.frame_bytes_max)
        self.address = await self.server.start(settings.listen_host, settings.listen_port)
        ctx.settings = _advertise(settings, self.config.advertised, self.address)
        return self.address

    async def stop(self) -> None:
        if self.server:
            await self.server.stop()
        await self.engine.close()
        self._lock.release()


def _advertise(settings, advertised: str | None, bound: tuple[str, int]):  # type: ignore[no-untyped-def]
    host, port = parse_address(advertised) if advertised else bound
    return replace(settings, advertised_host=host, advertised_port=port)


def _hdfs_store(url: str) -> Store:
    from ..engine.store.hdfs import HdfsStore  # only a cluster needs the HDFS client loaded

    address, root = split_hdfs_url(url)
    try:
        return HdfsStore(address, root)
    except Exception as error:  # hdfs-native reports an unreachable NameNode as RuntimeError
        raise OSError(f"cannot use HDFS store {url}: {error}") from None


def _cluster_id(store: Store) -> str:
    if store.exists(CLUSTER_ID_PATH):
        return read_whole(store, CLUSTER_ID_PATH).decode().strip()
    cluster_id = "-"
    while cluster_id.startswith("-"):  # as Kafka's ids: a leading '-' reads as a CLI option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    write_atomically(store, CLUSTER_ID_PATH, cluster_id.encode())
    return cluster_id


async def run_until_signalled(broker: Broker, ready: asyncio.Event | None = None) -> None:
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    host, port = await broker.start()
    print(f"martlet listening on {host}:{port}", flush=True)
    await stop.wait()
    log.info("stopping: closing connections and flushing partitions")
    await broker.stop()


__all__ = ["Broker", "DataDirLocked", "run_until_signalled"]
