"""The upstream client: one pooled `httpx.AsyncClient`, header filtering both ways, URLs."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import httpx

from factrail.gateway.secret_search import carries_any, header_carries, prepare, shortest_carrier
from factrail.gateway.secret_search import carries_secret as carries_secret
from factrail.settings import UPSTREAM_KEEPALIVE_S

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection, not the message (RFC 9110 §7.6.1)."""
REQUEST_DROP = HOP_BY_HOP | {
    "host",
    "content-length",
    "accept-encoding",
    "x-factrail-session",
    "x-factrail-bypass",
}
"""Also factrail's own request headers (`X-Factrail-Session`, `X-Factrail-Bypass`): for factrail,
never forwarded."""
RAW_REQUEST_DROP = frozenset(name.encode() for name in REQUEST_DROP)
IDENTITY = (b"accept-encoding", b"identity")
ANTHROPIC_ONLY = (b"x-api-key", b"anthropic-")
"""Anthropic credentials and options: never sent to the OpenAI upstream."""
log = logging.getLogger("factrail.proxy")
AnthropicAuthorization = Literal["anthropic", "drop", "forward", "x-api-key"]
ANTHROPIC_CREDENTIAL = b"sk-ant-"
"""How Anthropic's API keys and OAuth tokens begin."""
"""What reaches the Anthropic upstream of a client's `Authorization` (see the setting)."""
RESPONSE_DROP = HOP_BY_HOP | {"content-length", "content-encoding", "server", "date"}
"""Bodies are relayed decoded; uvicorn sets its own date and server."""


POOL_SHARD_CONNECTIONS = 4
"""Connections per pool shard (see `ShardedTransport`)."""


def make_client(
    connect_timeout: float,
    read_timeout: float,
    max_connections: int,
    keepalive_expiry: float = UPSTREAM_KEEPALIVE_S,
) -> httpx.AsyncClient:
    """The shared client: pooled keep-alive connections (`max_connections` in all, in shards,
    each idle at most `keepalive_expiry` seconds), no redirects, no env proxies magic.

    A request that fails on the way out is never sent again: a model call must not run twice,
    and once its bytes reached a socket nothing proves the upstream did not act on them (a
    connection closed with no answer looks the same whether the upstream dropped it idle or
    died while working). httpcore itself retries the one case it can prove unsent (a pooled
    connection found closed before a byte was written); the expiry keeps the other, a
    connection closed just as it was reused, from happening (see `UPSTREAM_KEEPALIVE_S`)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(read_timeout, connect=connect_timeout, pool=connect_timeout),
        transport=ShardedTransport.of(max_connections, POOL_SHARD_CONNECTIONS, keepalive_expiry),
        follow_redirects=False,
        trust_env=False,
    )


class ShardedTransport(httpx.AsyncBaseTransport):
    """Several small connection pools in place of one large one; each request goes to the pool
    with the fewest requests in flight (until its response is closed).

    httpcore's pool does work quadratic in its connections on every request and every response
    closed (each idle connection counts all the others; each queued request scans them all), so
    at 200 concurrent streams on one pool of 200 connections that bookkeeping took 61% of the
    gateway's CPU and capped it at a sixth of the upstream's throughput. Shards of
    `POOL_SHARD_CONNECTIONS` keep the same total and cost a few checks each time. A shard that
    lost connections (a close cut short) can be replaced whole (`reclaim`)."""

    def __init__(
        self,
        shards: Sequence[httpx.AsyncBaseTransport],
        remake: Callable[[int], httpx.AsyncBaseTransport] | None = None,
    ) -> None:
        self.shards = list(shards)
        self.in_flight = [0] * len(shards)
        self.remake = remake
        """Builds shard `i` anew (`reclaim`); None: shards are never replaced."""

    @classmethod
    def of(
        cls, max_connections: int, per_shard: int, keepalive_expiry: float = UPSTREAM_KEEPALIVE_S
    ) -> ShardedTransport:
        """`max_connections` in shards of at most `per_shard` (as even as can be), each idle
        connection kept `keepalive_expiry` seconds."""
        count = max(1, -(-max_connections // per_shard))
        sizes = [max_connections // count + (i < max_connections % count) for i in range(count)]

        def shard(i: int) -> httpx.AsyncBaseTransport:
            limits = httpx.Limits(
                max_connections=sizes[i],
                max_keepalive_connections=sizes[i],
                keepalive_expiry=keepalive_expiry,
            )
            return httpx.AsyncHTTPTransport(limits=limits, trust_env=False)

        return cls([shard(i) for i in range(count)], shard)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` on the least busy shard."""
        in_flight = self.in_flight
        shard = in_flight.index(min(in_flight))
        in_flight[shard] += 1
        try:
            response = await self.shards[shard].handle_async_request(request)
        except BaseException:
            in_flight[shard] -= 1
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Released(response.stream, partial(self._release, shard))
        return response

    def _release(self, shard: int) -> None:
        self.in_flight[shard] -= 1

    def state(self) -> PoolState:
        """How the shards' connections stand now (shards that are not httpx's own pools, as in
        tests, count none)."""
        busy = idle = 0
        for shard in self.shards:
            shard_busy, shard_idle = _connections(shard)
            busy += shard_busy
            idle += shard_idle
        return PoolState(busy, idle, sum(self.in_flight))

    async def reclaim(self) -> int:
        """Replace every shard that holds busy connections with no request in flight on it (lost
        to its pool for good: a close cut short) by a new one, and close the old; the number of
        connections so reclaimed. A shard with a request in flight is left alone."""
        if self.remake is None:
            return 0
        old: list[httpx.AsyncBaseTransport] = []
        lost = 0
        for i, shard in enumerate(self.shards):
            busy, _ = _connections(shard)
            if busy and not self.in_flight[i]:
                lost += busy
                old.append(shard)
                self.shards[i] = self.remake(i)
        for shard in old:
            await shard.aclose()
        return lost

    async def aclose(self) -> None:
        """Close every shard's connections."""
        for shard in self.shards:
            await shard.aclose()


def _connections(shard: httpx.AsyncBaseTransport) -> tuple[int, int]:
    """A shard's open connections: busy (a request or response on it) and idle."""
    busy = idle = 0
    pool = getattr(shard, "_pool", None)
    for connection in getattr(pool, "connections", ()):
        if connection.is_closed():
            continue
        if connection.is_idle():
            idle += 1
        else:
            busy += 1
    return busy, idle


def pool_of(client: httpx.AsyncClient) -> ShardedTransport | None:
    """The sharded pool `client` sends through (None: a client built otherwise, as in tests)."""
    transport = getattr(client, "_transport", None)
    return transport if isinstance(transport, ShardedTransport) else None


@dataclass(frozen=True, slots=True)
class PoolState:
    """The upstream pool's connections: `busy` (a request or a response on it), `idle` (kept
    alive for the next), and the requests in flight. A busy connection no request in flight
    accounts for (`orphaned`) is one the pool lost: it is never used again until its shard is
    replaced (`ShardedTransport.reclaim`)."""

    busy: int
    idle: int
    in_flight: int

    @property
    def orphaned(self) -> int:
        return max(0, self.busy - self.in_flight)


class _Released(httpx.AsyncByteStream):
    """A response body that tells its shard once it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self.stream = stream
        self.release: Callable[[], None] | None = release

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.stream.__aiter__()

    async def aclose(self) -> None:
        release, self.release = self.release, None
        try:
            await self.stream.aclose()
        finally:
            # Only once the connection is handed back: a shard with no request in flight and a
            # busy connection has lost it (`ShardedTransport.reclaim`).
            if release is not None:
                release()


def has_dot_segment(path: str) -> bool:
    """Whether a raw path holds a `.` or `..` segment, plain or percent-encoded (it could climb
    out of `/v1` on the upstream host)."""
    lowered = path.lower().replace("%2e", ".")
    return any(part in (".", "..") for part in lowered.split("/"))


def upstream_url(base: str, path: str, query: bytes) -> str:
    """`base` (ending in `/v1` or not) joined with a client path under `/v1` and raw query."""
    rest = path[len("/v1") :] if path.startswith("/v1/") or path == "/v1" else path
    url = base.rstrip("/") + rest
    return f"{url}?{query.decode('latin-1')}" if query else url


@dataclass(frozen=True)
class HeaderRules:
    """Where credentials may go: what the Anthropic upstream gets of `Authorization`, and
    secrets of factrail's own (the admin key) that no upstream ever gets, in any header or
    query parameter, however spelled (`carries_secret`)."""

    anthropic_authorization: AnthropicAuthorization = "anthropic"
    withheld: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        for secret in self.withheld:
            prepare(secret)


def request_headers(
    headers: Iterable[tuple[bytes, bytes]],
    *,
    anthropic: bool = False,
    rules: HeaderRules = HeaderRules(),
    decoded: bool = False,
) -> list[tuple[bytes, bytes]]:
    """End-to-end client headers to forward, from raw ASGI headers (hop-by-hop, those named in
    `Connection`, the length and the client's `accept-encoding` dropped; to an upstream other
    than Anthropic's, `x-api-key` and `anthropic-*` too, so an Anthropic key never crosses; to
    Anthropic's, `Authorization` as `rules` say; to any, a header carrying a withheld secret).
    `decoded`: the body is the decoded form of one sent under `Content-Encoding`, dropped too.

    The upstream is asked for identity, so streams relay as they come and nothing is decoded.
    """
    pairs = [(key.lower(), value) for key, value in headers]
    named = {
        part.strip().lower()
        for key, value in pairs
        if key == b"connection"
        for part in value.split(b",")
    }
    drop = RAW_REQUEST_DROP | named if named else RAW_REQUEST_DROP
    kept = [(k, v) for k, v in pairs if k not in drop]
    if decoded:
        kept = [(k, v) for k, v in kept if k != b"content-encoding"]
    if rules.withheld:
        least = _shortest(rules.withheld)  # a shorter header holds no window of one
        kept = [
            (k, v)
            for k, v in kept
            if len(k) + len(v) < least or not header_carries(k, v, rules.withheld)
        ]
    if not anthropic:
        return [*(kv for kv in kept if not kv[0].startswith(ANTHROPIC_ONLY)), IDENTITY]
    return [*_anthropic_authorization(kept, rules.anthropic_authorization), IDENTITY]


def _anthropic_authorization(
    pairs: list[tuple[bytes, bytes]], mode: AnthropicAuthorization
) -> list[tuple[bytes, bytes]]:
    """`pairs` bound for Anthropic with `Authorization` kept when it carries an Anthropic
    credential (`anthropic`), dropped, kept, or (`x-api-key`) a bearer token moved to
    `x-api-key` unless the client sent one (any other scheme is dropped)."""
    if mode == "forward" or not any(k == b"authorization" for k, _ in pairs):
        return pairs
    kept = [(k, v) for k, v in pairs if k != b"authorization"]
    if mode == "anthropic":
        own = [(k, v) for k, v in pairs if k != b"authorization" or _anthropic_bearer(v)]
        if len(own) < len(pairs):
            _note_dropped_authorization()
        return own
    if mode == "drop":
        _note_dropped_authorization()
        return kept
    if any(k == b"x-api-key" for k, _ in kept):
        return kept
    for key, value in pairs:
        scheme, _, token = value.strip().partition(b" ")
        if key == b"authorization" and scheme.lower() == b"bearer" and token.strip():
            return [*kept, (b"x-api-key", token.strip())]
    return kept


def _anthropic_bearer(value: bytes) -> bool:
    """Whether an `Authorization` value is `Bearer sk-ant-…` (an Anthropic key or token)."""
    scheme, _, token = value.strip().partition(b" ")
    return scheme.lower() == b"bearer" and token.strip().startswith(ANTHROPIC_CREDENTIAL)


@functools.lru_cache(maxsize=8)
def _shortest(secrets: tuple[bytes, ...]) -> int:
    """The length of the shortest text that could carry one of `secrets` (`carries_secret`)."""
    return min(map(shortest_carrier, secrets), default=1 << 62)


def withhold_query(query: bytes, secrets: tuple[bytes, ...]) -> bytes:
    """A raw query string without every parameter (name or value) that carries a secret; and
    without any, when those left still carry one together: as written (HTML entities are cut
    at their `&`s) or with their values run together (a secret cut into pieces too short to
    hold a window each, in consecutive parameters)."""
    if not query or not any(secrets):
        return query
    kept = [pair for pair in query.split(b"&") if not carries_any(pair, secrets)]
    rest = b"&".join(kept)
    if len(kept) < 2:
        return rest
    values = b"".join(pair.partition(b"=")[2] or pair for pair in kept)
    return b"" if carries_any(rest + b"\x1f" + values, secrets) else rest


@functools.cache
def _note_dropped_authorization() -> None:
    """Said once per process: a client in OAuth mode sees Anthropic's 401 and nothing else."""
    log.warning(
        "a client's Authorization header was not forwarded to the Anthropic upstream; set "
        "FACTRAIL_ANTHROPIC_AUTHORIZATION=forward for clients signed in with a token (Claude "
        "Code's OAuth mode) or x-api-key for bearer API keys"
    )


def response_headers(headers: httpx.Headers) -> dict[str, str]:
    """Upstream headers to return (rate limits, request ids, retry-after, openai-* and the rest),
    but `Set-Cookie` (see `set_cookies`)."""
    pairs = list(headers.multi_items())
    named = _connection_named(pairs)
    out: dict[str, str] = {}
    for key, value in pairs:
        lower = key.lower()
        if lower in RESPONSE_DROP or lower in named or lower == "set-cookie":
            continue
        out[lower] = f"{out[lower]}, {value}" if lower in out else value
    return out


def set_cookies(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    """Every upstream `Set-Cookie`, as raw headers: they cannot be joined into one, so they are
    returned apart from `response_headers`."""
    return [(b"set-cookie", v.encode("latin-1")) for v in headers.get_list("set-cookie")]


def _connection_named(pairs: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Header names listed in `Connection` are hop-by-hop as well."""
    names: set[str] = set()
    for key, value in pairs:
        if key.lower() == "connection":
            names.update(part.strip().lower() for part in value.split(",") if part.strip())
    return frozenset(names)
