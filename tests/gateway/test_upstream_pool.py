"""The upstream client's sharded pool: the least busy shard takes a request until it is closed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from factrail.gateway.upstream import POOL_SHARD_CONNECTIONS, ShardedTransport, make_client


class Body(httpx.AsyncByteStream):
    """An open response body, as a real connection's."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"ok"


def test_the_pool_is_cut_in_shards_of_the_same_total() -> None:
    transport = ShardedTransport.of(200, 16)
    limits = [shard._pool._max_connections for shard in transport.shards]  # type: ignore[attr-defined]
    assert sum(limits) == 200 and max(limits) <= 16 and min(limits) >= 15
    assert len(ShardedTransport.of(3, 16).shards) == 1
    client = make_client(1.0, 2.0, 10)
    assert isinstance(client._transport, ShardedTransport)  # the one the client sends through
    assert len(client._transport.shards) == -(-10 // POOL_SHARD_CONNECTIONS)


async def test_requests_go_to_the_least_busy_shard_until_their_response_is_closed() -> None:
    seen: list[int] = []

    def shard(i: int) -> httpx.MockTransport:
        def answer(request: httpx.Request) -> httpx.Response:
            seen.append(i)
            return httpx.Response(200, stream=Body())

        return httpx.MockTransport(answer)

    transport = ShardedTransport([shard(0), shard(1), shard(2)])
    async with httpx.AsyncClient(transport=transport) as client:
        open_ = [await client.send(client.build_request("GET", "http://u/"), stream=True)
                 for _ in range(4)]  # fmt: skip
        assert seen == [0, 1, 2, 0] and transport.in_flight == [2, 1, 1]
        await open_[1].aclose()
        await open_[1].aclose()  # closed twice, released once
        assert transport.in_flight == [2, 0, 1]
        answer = await client.get("http://u/")
        assert answer.content == b"ok" and seen[-1] == 1
        for response in open_:
            await response.aclose()
        assert transport.in_flight == [0, 0, 0]
