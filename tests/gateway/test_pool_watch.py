"""The upstream pool's upkeep: busy, idle and orphaned connections, lost ones reclaimed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from factrail.gateway.metrics import Metrics
from factrail.gateway.pool_watch import watch_pool
from factrail.gateway.upstream import PoolState, ShardedTransport, make_client, pool_of


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A keep-alive HTTP/1.1 server answering every request `ok`."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        writer.close()


@pytest.fixture
async def origin() -> AsyncIterator[str]:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/"
        server.close()


async def test_the_state_counts_busy_idle_and_in_flight_connections(origin: str) -> None:
    transport = ShardedTransport.of(8, 4)
    async with httpx.AsyncClient(transport=transport) as client:
        assert transport.state() == PoolState(0, 0, 0)
        await client.get(origin)
        assert transport.state() == PoolState(busy=0, idle=1, in_flight=0)
        streamed = await client.send(client.build_request("GET", origin), stream=True)
        assert transport.state() == PoolState(busy=1, idle=0, in_flight=1)
        assert transport.state().orphaned == 0
        await streamed.aread()  # read to the end and closed: the connection goes back
        assert transport.state() == PoolState(busy=0, idle=1, in_flight=0)


async def test_a_lost_connection_is_reclaimed_and_the_shard_serves_again(origin: str) -> None:
    """A response whose close never handed its connection back (simulated: its shard is told
    it ended, the connection stays taken) leaves a shard of one connection that would make
    every later request wait out the pool timeout; `reclaim` replaces that shard."""
    transport = ShardedTransport.of(1, 1)
    timeout = httpx.Timeout(5.0, pool=0.5)
    async with httpx.AsyncClient(transport=transport, timeout=timeout) as client:
        streamed = await client.send(client.build_request("GET", origin), stream=True)
        transport._release(0)  # told it ended; the connection was never handed back
        assert transport.state() == PoolState(busy=1, idle=0, in_flight=0)
        with pytest.raises(httpx.PoolTimeout):
            await client.get(origin)
        assert await transport.reclaim() == 1
        assert transport.state() == PoolState(busy=0, idle=0, in_flight=0)
        assert (await client.get(origin)).text == "ok"
        assert await transport.reclaim() == 0
        del streamed


async def test_a_shard_with_a_request_in_flight_is_never_replaced(origin: str) -> None:
    transport = ShardedTransport.of(1, 1)
    async with httpx.AsyncClient(transport=transport) as client:
        streamed = await client.send(client.build_request("GET", origin), stream=True)
        shard = transport.shards[0]
        assert await transport.reclaim() == 0
        assert transport.shards[0] is shard
        assert await streamed.aread() == b"ok"
        assert transport.state() == PoolState(busy=0, idle=1, in_flight=0)


def test_a_busy_connection_no_request_accounts_for_is_orphaned() -> None:
    assert PoolState(busy=3, idle=1, in_flight=1).orphaned == 2
    assert PoolState(busy=1, idle=0, in_flight=2).orphaned == 0


def test_the_gateway_client_s_pool_is_found_and_another_client_s_is_not() -> None:
    assert isinstance(pool_of(make_client(1.0, 2.0, 8)), ShardedTransport)
    assert pool_of(httpx.AsyncClient()) is None


class Pool(ShardedTransport):
    """A pool whose state, and what it reclaims, are given."""

    def __init__(self, states: list[PoolState], lost: list[int]) -> None:
        super().__init__([])
        self.states = states
        self.lost = lost

    def state(self) -> PoolState:
        return self.states.pop(0)

    async def reclaim(self) -> int:
        return self.lost.pop(0)


def gauges(metrics: Metrics) -> dict[str, float]:
    text = metrics.render().decode()
    return {
        s.labels["state"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "factrail_upstream_connections"
    }


async def test_the_watch_reclaims_lost_connections_counts_them_and_records_the_gauges(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    pool = Pool([PoolState(1, 2, 1), PoolState(0, 1, 0), PoolState(2, 0, 2)], lost=[0, 3, 0])
    seen: list[tuple[dict[str, float], float]] = []

    async def sleep(_: float) -> None:
        text = metrics.render().decode()
        reclaimed = metric(text, "factrail_upstream_connections_reclaimed_total")
        seen.append((gauges(metrics), reclaimed))
        if not pool.states:
            raise asyncio.CancelledError

    with (
        caplog.at_level(logging.WARNING, logger="factrail.app"),
        pytest.raises(asyncio.CancelledError),
    ):
        await watch_pool(pool, metrics, sleep=sleep)
    assert seen[0] == ({"busy": 1.0, "idle": 2.0, "orphaned": 0.0}, 0.0)
    assert seen[1] == ({"busy": 0.0, "idle": 1.0, "orphaned": 0.0}, 3.0)
    assert seen[2] == ({"busy": 2.0, "idle": 0.0, "orphaned": 0.0}, 3.0)
    warnings = [r for r in caplog.records if "reclaimed 3 upstream connections" in r.getMessage()]
    assert len(warnings) == 1


def metric(text: str, name: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    )
