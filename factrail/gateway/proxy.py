"""One proxied request: read the body, compact it in flight (failing open), forward, relay.

The fast path forwards the exact bytes of bodies too small to reach any trigger. Every estimated
token consumes at least one byte of the body (a letter run of L chars costs at most L, a digit
run L/2, a symbol 0.9, whitespace 0), so a body of N bytes estimates at most N tokens; the
corpus peaks at 0.49 tokens per byte (whole JSON bodies). `CALIBRATION_HEADROOM` covers a
session whose calibrated estimate runs above the raw one.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

import httpx
import orjson
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from factrail.gateway import openai_marks
from factrail.gateway.answers import Answers, Links
from factrail.gateway.cache_marks import Anchor, CacheMarks
from factrail.gateway.clients import client_name
from factrail.gateway.engine import Engine
from factrail.gateway.errors import anthropic_error, openai_error
from factrail.gateway.logging import log_request
from factrail.gateway.metrics import Metrics
from factrail.gateway.prepared import Prepared
from factrail.gateway.relay import Relay
from factrail.gateway.request_body import Forward, Reject, classify
from factrail.gateway.request_facts import (
    asks_summary,
    extra_tokens,
    raw_path,
    requested_cache_ttl,
    requested_window,
    stream_shape,
    system_text,
    with_system,
)
from factrail.gateway.routing import RESPONSES, Provider, Route
from factrail.gateway.sessions import SessionMemory
from factrail.gateway.upstream import (
    HeaderRules,
    carries_secret,
    has_dot_segment,
    request_headers,
    response_headers,
    set_cookies,
    upstream_url,
    withhold_query,
)
from factrail.gateway.usage import UsageReader
from factrail.policy.cost import writes_billed
from factrail.policy.provenance import evidence, previous_id
from factrail.policy.trigger import soft_line
from factrail.session import TurnResult
from factrail.session.fencing import TaintRecords, fence_unread
from factrail.session.keys import alias_keys
from factrail.settings import Settings

log = logging.getLogger("factrail.proxy")

Answer = Response | Relay
"""What the gateway answers with: a whole response or a relayed stream."""

CALIBRATION_HEADROOM = 1.5
MODEL_PEEK_BYTES = 4096
_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')
OUTCOME_HEADER = "x-factrail"
BYPASS_HEADER = "x-factrail-bypass"
"""`X-Factrail-Bypass: 1` forwards one request untouched, in any mode (the fence still reads
it: taint is sticky)."""
COMPACTIONS_HEADER = "x-factrail-compactions"
"""How many times this session has been compacted so far (on every parsed request)."""


class RequestRejected(Exception):
    """A request the gateway answers itself (400, 413) in the route's error shape."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class Gateway:
    """Shared state of the proxy: settings, metrics, the upstream client and the engine."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        client: httpx.AsyncClient,
        engine: Engine | None,
        links: Links | None = None,
    ) -> None:
        """`links`: where answer ids are remembered for every worker and replica (the
        state store); without it, in this process only."""
        self.settings = settings
        self.links = links
        self.metrics = metrics
        self.client = client
        self.engine = engine
        self.trigger = settings.trigger()
        """The compactor's own trigger rule, which the fast path asks too."""
        self.fast_path_bytes = int(soft_line(self.trigger.smallest()) / CALIBRATION_HEADROOM)
        self.fence = settings.fence()
        anthropic = settings.anthropic_upstream_url.rstrip("/")
        self.bases: dict[Provider, str] = {
            "openai": settings.upstream_url,
            "anthropic": anthropic if anthropic.endswith("/v1") else anthropic + "/v1",
        }
        """Upstream base URL of each provider, ending in `/v1`."""
        self.extensions = {"timeout": client.timeout.as_dict()}
        """The client's timeouts, for requests built without the client's merging step (which
        would also add its default headers and its cookie jar: a proxy forwards neither)."""
        self.sessions = SessionMemory()
        self.answers = Answers(metrics, self.sessions, engine, links)
        """Reads what each answer teaches its session."""
        self.shadow = settings.mode == "shadow"
        """Shadow mode: every request goes upstream as sent; the step runs on a copy."""
        self.cache_marks = CacheMarks(settings.cache_mark)
        """Places the frozen zone's cache breakpoint on Anthropic requests."""
        self.admin_key = settings.admin_key.get_secret_value()
        """What the admin surface wants (configured or generated: `factory.with_admin_key`)."""
        withheld = (self.admin_key.encode(),)
        self.header_rules = HeaderRules(settings.anthropic_authorization, withheld)
        """Where credentials may go (`Authorization` to Anthropic; the admin key nowhere, in
        no header, query parameter or path: `carries_secret`)."""

    def cannot_reach_trigger(self, body: bytes) -> bool:
        """True when no estimate of `body` can reach the soft line of the model it names.

        The model is peeked with a byte search (no parse); when several `"model"` strings occur,
        the smallest trigger among them counts, and without one the smallest of any model does.
        """
        if len(body) < self.fast_path_bytes:
            return not self.fence.may_call(body)  # a fenced call must be seen: taint is sticky
        models = {m.decode("utf-8", "replace") for m in _MODEL.findall(body[:MODEL_PEEK_BYTES])}
        models.update(
            m.decode("utf-8", "replace") for m in _MODEL.findall(body[-MODEL_PEEK_BYTES:])
        )
        if not models:
            return False
        trigger = min(self.trigger.for_model(m) for m in models)
        small = len(body) * CALIBRATION_HEADROOM < soft_line(trigger)
        return small and not self.fence.may_call(body)

    async def serve(self, scope: Scope, receive: Receive, send: Send, route: Route) -> None:
        """Proxy one request end to end and answer it; count and log it once answered.

        Nothing but the answer runs between the upstream's response and the client: what its
        usage taught the session is stored after, off the event loop.
        """
        start = time.perf_counter()
        response, outcome, prepared = await self._respond(Request(scope, receive), route, start)
        result = prepared.result if prepared is not None else None
        ms = round((time.perf_counter() - start) * 1000, 2)
        try:
            await response(scope, receive, send)
        finally:
            status = response.status_code
            if isinstance(response, Relay) and response.cut is not None:
                outcome = response.cut  # ended early on our side: counted apart from its status
            self.metrics.count_request(route.label, outcome, status)
            log_request(
                route=route.label,
                method=scope["method"],
                outcome=outcome,
                status=status,
                tokens_before=result.tokens_before if result else None,
                tokens_after=result.tokens_after if result else None,
                decision=result.decision if result else None,
                ms=ms,
            )
            if result is not None and result.after_answer is not None:
                try:  # the analysis of this turn's results, now that the answer is out
                    result.after_answer()
                except Exception:
                    log.warning("could not queue the turn's preparation", exc_info=True)
        if prepared is not None and prepared.observe is not None:
            try:
                await asyncio.to_thread(prepared.observe)
            except Exception:
                log.warning("could not store what the turn taught its session", exc_info=True)

    async def _respond(
        self, request: Request, route: Route, start: float
    ) -> tuple[Answer, str, Prepared | None]:
        """The response, the outcome and what the compaction step did for one request (None:
        it did not get that far); never raises."""
        try:
            path = raw_path(request.scope)
            if has_dot_segment(path):
                raise RequestRejected(400, "dot segments are not allowed in paths", "invalid_path")
            if any(carries_secret(path.encode("latin-1"), s) for s in self.header_rules.withheld):
                raise RequestRejected(400, "the admin key is never forwarded", "invalid_path")
            body = await self._read_body(request)
            prepared = await self._prepare(route, body, request.headers)
            response = await self._forward(request, route, prepared, start)
        except RequestRejected as exc:
            return _error(route, exc.status, exc.message, exc.code), "rejected", None
        except ClientDisconnect:
            return Response(status_code=499), "client-gone", None
        return response, prepared.outcome, prepared

    async def _read_body(self, request: Request) -> bytes:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise RequestRejected(413, f"request body exceeds {limit} bytes", "body_too_large")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestRejected(413, f"request body exceeds {limit} bytes", "body_too_large")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _prepare(self, route: Route, body: bytes, headers: Headers) -> Prepared:
        """Compact `body` when it may cross the trigger; any internal error fails open."""
        if route.field is None or self.engine is None:
            return Prepared(body)
        kept: list[bytes] = []

        def small(plain: bytes) -> bool:  # a decoded body past the fast path: the fence reads it
            fast = self.cannot_reach_trigger(plain)
            kept.extend(() if fast else (plain,))
            return fast

        if headers.get(BYPASS_HEADER, "").strip() == "1":
            return await self._bypass(route, body, headers)
        verdict = classify(body, headers, limit=self.settings.max_body_bytes, small=small)
        if isinstance(verdict, Reject):
            raise RequestRejected(verdict.status, verdict.message, verdict.code)
        if isinstance(verdict, Forward):
            if kept:  # forwarded unread: the fence reads it
                await self._fence_unread(route, kept[0], headers)
            return Prepared(body)
        data = verdict.data
        items, model = data.get(route.field), data.get("model")
        parse = self.engine.parsers.get(route.parser or route.field)
        if not isinstance(items, list) or not isinstance(model, str) or parse is None:
            return Prepared(body)
        phase = "parse"
        session = None
        try:
            if self.settings.test_fail_compaction:
                phase = "injected"
                raise RuntimeError("FACTRAIL_TEST_FAIL_COMPACTION is set")
            system = system_text(data, route)
            doc = with_system(parse(items), system)
            chained = route is RESPONSES or isinstance(data.get("thread"), dict)
            await self._recall_chain(data)
            session = self.engine.session_key(headers, data, doc, model, self.sessions.answered_by)
            phase = "compact"
            started = time.perf_counter()
            extra = extra_tokens(data, doc)
            compactor = self.engine.compactor
            identities = alias_keys(headers, data, doc, model, self.sessions.answered_by, session)
            seen = evidence(data, doc.messages, identities)
            result = await compactor.compact(
                session,
                doc,
                model=model,
                extra_tokens=extra,
                evidence=seen,
                window=requested_window(route.provider, headers),
                cache_ttl_s=requested_cache_ttl(route.provider, data),
                last=asks_summary(route, data),
                shadow=self.shadow,
            )
            client = client_name(headers)
            if self.shadow:
                self.metrics.record_projected_turn(result)
                original = None  # nothing would have changed: sent whole, as it goes
                if result.document is not None:
                    original = compactor.transcript_tokens(doc.messages[doc.live :]) + extra
                return shadowed(body, session, result, original, chained, client, model)
            self.metrics.record_turn(result, time.perf_counter() - started)
            document = result.document
            wire = items if document is None else document
            marked, moved = None, None  # a breakpoint at the end of the frozen zone
            if route.provider == "anthropic":
                marked, moved = self._mark(session, result, data, wire)
            elif self.settings.cache_mark and writes_billed(model):
                chat = route.field == "messages"
                marked = openai_marks.place(data, wire, doc, result.frozen_through, chat=chat)
            document = document if marked is None else marked
            if document is None:
                return Prepared(
                    body, result.outcome, session, result, chained=chained, moved=moved,
                    whole_tokens=result.tokens_after, client=client, model=model,
                )  # fmt: skip
            sent = result.estimated_sent
            original = compactor.transcript_tokens(doc.messages[doc.live :]) + extra
            removed = max(original - sent, 0) / sent if sent > 0 else 0.0
            phase = "serialise"
            data[route.field] = document
            sent_body = orjson.dumps(data)
            return Prepared(
                sent_body, result.outcome, session, result, removed, verdict.decoded, chained,
                moved=moved, whole_tokens=calibrated(original, result), client=client, model=model,
            )  # fmt: skip
        except Exception:
            log.warning("compaction failed open", extra={"fields": {"phase": phase}}, exc_info=True)
            self.metrics.failures.labels(phase).inc()
            return Prepared(body, "failed-open", session)

    async def _bypass(self, route: Route, body: bytes, headers: Headers) -> Prepared:
        """`X-Factrail-Bypass: 1`: the body goes upstream as sent, compacted in no mode; the
        fence still reads it (a fenced call it holds taints its session for the turns after)."""
        plain: list[bytes] = []

        def keep(decoded: bytes) -> bool:  # every body is "small": none is parsed
            plain.append(decoded)
            return True

        verdict = classify(body, headers, limit=self.settings.max_body_bytes, small=keep)
        if plain and not isinstance(verdict, Reject):
            await self._fence_unread(route, plain[0], headers)
        return Prepared(body, "bypass")

    async def _fence_unread(self, route: Route, plain: bytes, headers: Headers) -> None:
        """Let the fence read a body forwarded without the step (`fence_unread`)."""
        if self.engine is None or route.field is None or not isinstance(self.links, TaintRecords):
            return
        parsers, field, name = self.engine.parsers, route.field, route.parser or route.field
        read = lambda d: with_system(parsers[name](d[field]), system_text(d, route))  # noqa: E731
        key, chain = self.engine.session_key, self.sessions.answered_by
        unread = (self.fence, self.links, plain, headers, read, key, chain)
        await asyncio.to_thread(fence_unread, *unread)

    async def _forward(
        self, request: Request, route: Route, prepared: Prepared, start: float
    ) -> Answer:
        scope = request.scope
        query = withhold_query(scope["query_string"], self.header_rules.withheld)
        url = upstream_url(self.bases[route.provider], raw_path(scope), query)
        upstream_request = httpx.Request(
            scope["method"],
            url,
            headers=request_headers(
                scope["headers"],
                anthropic=route.provider == "anthropic",
                rules=self.header_rules,
                decoded=prepared.decoded,
            ),
            content=prepared.body,
            extensions=self.extensions,
        )
        sent = time.perf_counter()
        self.metrics.overhead.observe(sent - start)
        try:
            upstream = await self.client.send(upstream_request, stream=True)
        except httpx.TimeoutException:
            return _transport_error(route, 504, "the upstream did not answer in time", prepared)
        except httpx.TransportError:
            return _transport_error(route, 502, "the upstream could not be reached", prepared)
        self.metrics.upstream.observe(time.perf_counter() - sent)
        headers = response_headers(upstream.headers)
        headers[OUTCOME_HEADER] = prepared.outcome
        if prepared.result is not None:
            headers[COMPACTIONS_HEADER] = str(prepared.result.compactions)
        content_type = upstream.headers.get("content-type", "")
        reader = UsageReader(route.provider)
        if route.field is None or "text/event-stream" in content_type:
            headers["x-accel-buffering"] = "no"
            relay = Relay(upstream, headers, shape=stream_shape(route, content_type))
            if route.field is not None:  # a compaction route: its usage is read on the way past
                done = partial(self.answers.answered, prepared, reader)
                relay.tap, relay.done = reader.feed, done
            relay.raw_headers.extend(set_cookies(upstream.headers))
            return relay
        try:
            content = await upstream.aread()
        except httpx.TimeoutException:
            return _transport_error(route, 504, "the upstream response timed out", prepared)
        except httpx.TransportError:
            return _transport_error(route, 502, "the upstream response was cut", prepared)
        finally:
            await upstream.aclose()
        reader.read_body(content)
        self.answers.answered(prepared, reader)
        answer = Response(content, status_code=upstream.status_code, headers=headers)
        answer.raw_headers.extend(set_cookies(upstream.headers))
        return answer

    def _mark(
        self, session: str, result: TurnResult, data: Mapping[str, Any], wire: Any
    ) -> tuple[list[Any] | None, Anchor | None]:
        """The frozen zone's cache marker on an Anthropic request, placed from where the
        session's last one went (as the state store says: on whichever worker it went); and
        where this one went, when that moved (`Prepared.moved`)."""
        stored = Anchor.from_record(result.mark)
        marked, placed = self.cache_marks.place(
            session, result.outcome, data, wire, result.frozen_through, stored
        )
        return marked, (placed if placed != stored else None)

    async def _recall_chain(self, data: dict[str, Any]) -> None:
        """Learn from the shared store which session a request continuing a provider-kept
        history (`previous_id`) belongs to, when this process does not know (another worker or
        replica answered it)."""
        previous = previous_id(data)
        if self.links is None or not previous:
            return
        if self.sessions.answered_by(previous) is None:
            session = await asyncio.to_thread(self.links.linked, previous)
            if session is not None:
                self.sessions.remember(previous, session)


def calibrated(estimate: int, result: TurnResult) -> int:
    """An uncalibrated estimate at the turn's calibration (its sent tokens over their raw
    estimate)."""
    if result.estimated_sent <= 0:
        return estimate
    return round(estimate * result.tokens_after / result.estimated_sent)


def shadowed(
    body: bytes,
    session: str,
    result: TurnResult,
    original: int | None,
    chained: bool,
    client: str | None,
    model: str,
) -> Prepared:
    """Shadow mode: the client's own bytes go upstream; what the step would have sent is kept
    for the answer's projected bill (`removed_share`: its removed tokens over the whole;
    `original`: the whole's raw estimate, None when the step would have sent it unchanged)."""
    whole = result.tokens_after if original is None else calibrated(original, result)
    removed = max(whole - result.tokens_after, 0) / whole if whole > 0 else 0.0
    return Prepared(
        body, "shadow", session, result, removed, chained=chained, shadow=True,
        whole_tokens=whole, client=client, model=model,
    )  # fmt: skip


def _error(
    route: Route, status: int, message: str, code: str, headers: dict[str, str] | None = None
) -> Response:
    """An error the gateway answers itself, in the error shape of the route's provider."""
    if route.provider == "anthropic":
        return anthropic_error(status, message, headers=headers)
    type_ = "upstream_error" if status >= 500 else "invalid_request_error"
    return openai_error(status, message, type_=type_, code=code, headers=headers)


def _transport_error(route: Route, status: int, message: str, prepared: Prepared) -> Response:
    code = "upstream_timeout" if status == 504 else "upstream_unreachable"
    return _error(route, status, message, code, {OUTCOME_HEADER: prepared.outcome})
