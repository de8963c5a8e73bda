"""The connection's request order (gateway/server.py) with a stand-in dispatcher: a produce
request that has appended lets the next request start, and answers still leave in request
order; a produce request that has not (waiting for room in memory) holds the connection; any
other request that waits (a long-polling fetch) holds it too, though requests that need no
wait are answered as they arrive; a request that fails ends the connection before the next."""

import asyncio
import contextlib
import struct

from martlet.gateway.ordering import next_request_may_start
from martlet.gateway.server import Server
from martlet.protocol.codec import ProtocolError

WAIT_S = 10.0
PRODUCE, FETCH, METADATA, BROKEN = 0, 1, 3, 99


class Dispatcher:
    """Frames are (api key, request id); a produce request appends (says so, unless told it
    waits for room) and then waits for the test to release it; a fetch waits for it too, and
    BROKEN is not a request."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.release: dict[int, asyncio.Event] = {}
        self.waits_for_room: set[int] = set()
        self.progress = asyncio.Event()
        self.cancelled: list[int] = []

    async def handle(self, frame: bytearray, peer: object = None) -> list[bytes]:
        key, request = struct.unpack(">hh", frame[:4])
        self.started.append(request)
        self.progress.set()
        if key == BROKEN:
            raise ProtocolError("not a request")
        if key == FETCH:
            await self.release.setdefault(request, asyncio.Event()).wait()
        if key == PRODUCE:
            if request not in self.waits_for_room:
                next_request_may_start()
            try:
                await self.release.setdefault(request, asyncio.Event()).wait()
            except asyncio.CancelledError:
                self.cancelled.append(request)
                self.progress.set()
                raise
        return [struct.pack(">ih", 2, request)]


async def until(condition, dispatcher: Dispatcher) -> None:
    async def wait() -> None:
        while not condition():
            dispatcher.progress.clear()
            await dispatcher.progress.wait()

    await asyncio.wait_for(wait(), WAIT_S)


@contextlib.asynccontextmanager
async def serving(dispatcher: Dispatcher):
    """A server on a free loopback port and one client connection to it."""
    server = Server(dispatcher, 1 << 20)  # type: ignore[arg-type]
    host, port = await server.start("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        yield reader, writer
    finally:
        writer.close()
        await server.stop()


def send(writer: asyncio.StreamWriter, key: int, request: int) -> None:
    writer.write(struct.pack(">ihhi", 8, key, request, 0))  # a frame holds at least a request header


async def answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    got = []
    for _ in range(count):
        data = await asyncio.wait_for(reader.readexactly(6), WAIT_S)
        got.append(struct.unpack(">ih", data)[1])
    return got


def test_appended_produce_requests_let_the_next_start_and_answers_keep_request_order():
    async def scenario() -> None:
        dispatcher = Dispatcher()
        async with serving(dispatcher) as (reader, writer):
            send(writer, PRODUCE, 1)
            send(writer, PRODUCE, 2)
            send(writer, METADATA, 3)
            await until(lambda: dispatcher.started == [1, 2], dispatcher)  # 2 started while 1 waits
            dispatcher.release.setdefault(2, asyncio.Event()).set()  # 2 is done before 1
            await asyncio.sleep(0)
            assert dispatcher.started == [1, 2]  # metadata waits for every earlier answer
            dispatcher.release[1].set()
            assert await answers(reader, 3) == [1, 2, 3]

    asyncio.run(scenario())


def test_a_produce_request_waiting_before_it_appends_holds_the_connection():
    async def scenario() -> None:
        dispatcher = Dispatcher()
        dispatcher.waits_for_room.add(1)
        async with serving(dispatcher) as (reader, writer):
            send(writer, PRODUCE, 1)
            send(writer, PRODUCE, 2)
            await until(lambda: dispatcher.started == [1], dispatcher)
            for _ in range(10):
                await asyncio.sleep(0)  # let the connection run: it must not start request 2
            assert dispatcher.started == [1]
            dispatcher.release.setdefault(1, asyncio.Event()).set()
            await until(lambda: dispatcher.started == [1, 2], dispatcher)
            dispatcher.release.setdefault(2, asyncio.Event()).set()
            assert await answers(reader, 2) == [1, 2]

    asyncio.run(scenario())


def test_a_produce_request_still_waiting_for_room_is_dropped_with_its_connection():
    """Its producer resends it on another connection: appending it later would store it twice."""
    async def scenario() -> None:
        dispatcher = Dispatcher()
        dispatcher.waits_for_room.add(1)
        async with serving(dispatcher) as (_, writer):
            send(writer, PRODUCE, 1)
            await until(lambda: dispatcher.started == [1], dispatcher)
            writer.close()
            await until(lambda: dispatcher.cancelled == [1], dispatcher)

    asyncio.run(scenario())


def test_a_waiting_fetch_holds_the_connection_and_the_next_request_is_answered_after_it():
    async def scenario() -> None:
        dispatcher = Dispatcher()
        async with serving(dispatcher) as (reader, writer):
            send(writer, METADATA, 1)
            assert await answers(reader, 1) == [1]  # answered as it came: no wait in it
            send(writer, FETCH, 2)
            send(writer, METADATA, 3)
            await until(lambda: dispatcher.started == [1, 2], dispatcher)
            for _ in range(10):
                await asyncio.sleep(0)  # let the connection run: it must not start request 3
            assert dispatcher.started == [1, 2]
            dispatcher.release.setdefault(2, asyncio.Event()).set()
            assert await answers(reader, 2) == [2, 3]
            send(writer, METADATA, 4)
            assert await answers(reader, 1) == [4]

    asyncio.run(scenario())


def test_a_request_that_is_no_request_ends_the_connection_before_the_next():
    async def scenario() -> None:
        dispatcher = Dispatcher()
        async with serving(dispatcher) as (reader, writer):
            send(writer, METADATA, 1)
            send(writer, BROKEN, 2)
            send(writer, METADATA, 3)
            assert await answers(reader, 1) == [1]
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # closed by the broker
            assert dispatcher.started == [1, 2]

    asyncio.run(scenario())


def test_a_fetch_still_waiting_when_the_server_stops_is_cancelled():
    async def scenario() -> None:
        dispatcher = Dispatcher()
        server = Server(dispatcher, 1 << 20)  # type: ignore[arg-type]
        host, port = await server.start("127.0.0.1", 0)
        _, writer = await asyncio.open_connection(host, port)
        try:
            send(writer, FETCH, 1)
            await until(lambda: dispatcher.started == [1], dispatcher)
            waiting = [task for task in asyncio.all_tasks() if "_resumed" in repr(task.get_coro())]
            assert len(waiting) == 1  # the fetch, started as it arrived, goes on in a task of its own
            await asyncio.wait_for(server.stop(), WAIT_S)
            await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), WAIT_S)
            assert all(task.cancelled() for task in waiting)
        finally:
            writer.close()

    asyncio.run(scenario())
