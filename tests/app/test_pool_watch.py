"""The upstream pool's gauges: busy, idle and orphaned connections, refreshed by one task."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import Metrics
from app.pool_watch import watch_pool
from app.upstream import PoolState, ShardedTransport, make_client, pool_of


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


def test_a_busy_connection_no_request_accounts_for_is_orphaned() -> None:
    assert PoolState(busy=3, idle=1, in_flight=1).orphaned == 2
    assert PoolState(busy=1, idle=0, in_flight=2).orphaned == 0


def test_the_gateway_client_s_pool_is_found_and_another_client_s_is_not() -> None:
    assert isinstance(pool_of(make_client(1.0, 2.0, 8)), ShardedTransport)
    assert pool_of(httpx.AsyncClient()) is None


class Pool(ShardedTransport):
    """A pool whose state is given."""

    def __init__(self, states: list[PoolState]) -> None:
        super().__init__([])
        self.states = states

    def state(self) -> PoolState:
        return self.states.pop(0)


def gauges(metrics: Metrics) -> dict[str, float]:
    text = metrics.render().decode()
    return {
        s.labels["state"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "factrail_upstream_connections"
    }


async def test_the_watch_records_the_gauges_and_warns_once_of_orphans(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    pool = Pool([PoolState(1, 2, 1), PoolState(4, 0, 1), PoolState(5, 0, 1)])
    seen: list[dict[str, float]] = []

    async def sleep(_: float) -> None:
        seen.append(gauges(metrics))
        if not pool.states:
            raise asyncio.CancelledError

    with (
        caplog.at_level(logging.WARNING, logger="factrail.app"),
        pytest.raises(asyncio.CancelledError),
    ):
        await watch_pool(pool, metrics, sleep=sleep)
    assert seen[0] == {"busy": 1.0, "idle": 2.0, "orphaned": 0.0}
    assert seen[1] == {"busy": 4.0, "idle": 0.0, "orphaned": 3.0}
    assert seen[2]["orphaned"] == 4.0
    warnings = [r for r in caplog.records if "pool lost them" in r.getMessage()]
    assert len(warnings) == 1
