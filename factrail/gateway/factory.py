"""The app factory, its lifespan (client, stores, engine) and `serve` for `factrail serve`."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from pydantic import SecretStr

from factrail import __version__, runtime
from factrail.core import kernels
from factrail.gateway import pages
from factrail.gateway.bills import watch_bills
from factrail.gateway.engine import Engine, build_engine
from factrail.gateway.logging import configure_logging
from factrail.gateway.metrics import MULTIPROC_ENV, Metrics
from factrail.gateway.pool_watch import watch_pool
from factrail.gateway.proxy import Gateway
from factrail.gateway.routes import ops
from factrail.gateway.routes.proxied import ProxiedRoutes
from factrail.gateway.shutdown import exit_zero_on_sigterm
from factrail.gateway.sweeper import sweep_outputs
from factrail.gateway.upstream import make_client, pool_of
from factrail.settings import Settings
from factrail.stores import admin_key, state_url
from factrail.stores.outputs import OutputStore
from factrail.stores.state import StateStore, StoreConfigError

SWITCH_INTERVAL_S = 0.001
"""How long a thread may hold the interpreter while another waits (Python's default is 5 ms): a
compaction runs in a worker thread, and the requests served meanwhile need the interpreter for
a few microseconds at a time."""

log = logging.getLogger("factrail.app")

EngineFactory = Callable[
    [Settings, StateStore, OutputStore | None, Metrics, httpx.AsyncClient], Engine | None
]


def default_engine(
    settings: Settings,
    state: StateStore,
    outputs: OutputStore | None,
    metrics: Metrics,
    client: httpx.AsyncClient,
) -> Engine:
    """The real engine with the configured judge (rules when it cannot be built)."""
    choice = runtime.judge(settings, client)
    if choice.error is not None:
        log.warning("judge %s not usable (%s); using the rules", settings.judge, choice.reason)
    assert choice.judge is not None
    return build_engine(
        settings,
        state=state,
        outputs=outputs,
        judge=choice.judge,
        observe_judge=metrics.judge_seconds.observe,
        observe_preparation=metrics.record_preparation,
    )


def create_app(
    settings: Settings | None = None,
    *,
    client: httpx.AsyncClient | None = None,
    state: StateStore | None = None,
    outputs: OutputStore | None = None,
    engine_factory: EngineFactory = default_engine,
    base_url: str = "http://127.0.0.1:8080",
) -> FastAPI:
    """A gateway app; anything not given is built from `settings` when the app starts.
    `base_url`: where it is served, for the login line of a first start."""
    configured = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info("factrail %s starting; engine kernels: %s", __version__, kernels.describe())
        cfg = with_admin_key(configured, base_url)
        http = client or make_client(
            cfg.connect_timeout_s, cfg.read_timeout_s, cfg.max_connections, cfg.upstream_keepalive_s
        )
        metrics = Metrics()
        store = state or runtime.state_store(
            cfg, on_error=lambda operation: metrics.store_errors.labels(operation).inc()
        )
        saved = outputs or runtime.output_store(cfg)
        shared = state_url(cfg.state_url).split(":", 1)[0] in ("redis", "rediss", "unix")
        if shared and saved is not None and not cfg.outputs_secret.get_secret_value():
            log.warning(
                "a shared state store without FACTRAIL_OUTPUTS_SECRET: each replica keys saved"
                " outputs with the secret in its own data folder, so an output saved by one is"
                " found by another only if they share that folder; set the same secret on all"
            )
        try:
            engine = engine_factory(cfg, store, saved, metrics, http)
        except Exception:
            log.exception("the compaction engine could not start; proxying without compaction")
            engine = None
        app.state.gateway = Gateway(cfg, metrics, http, engine, links=store)
        app.state.state_store = store
        app.state.outputs = saved
        tasks = []
        if saved is not None and cfg.outputs_sweep_interval_s > 0:
            tasks.append(
                asyncio.create_task(sweep_outputs(saved, cfg.outputs_sweep_interval_s, metrics))
            )
        if (pool := pool_of(http)) is not None:
            tasks.append(asyncio.create_task(watch_pool(pool, metrics)))
        if engine is not None:
            tasks.append(asyncio.create_task(watch_bills(store, metrics, live_s=cfg.cache_ttl_s)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            if engine is not None:
                engine.compactor.close()
            await http.aclose()
            store.close()

    app = FastAPI(
        title="factrail",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.include_router(ops.router)
    app.include_router(pages.router)
    app.add_middleware(ProxiedRoutes)
    return app


def serve(host: str = "127.0.0.1", port: int = 8080, workers: int = 1) -> None:
    """Run the gateway with uvicorn (`factrail serve`); `workers` > 1 runs that many processes
    on one socket, sharing the state store, the saved outputs and (multiprocess mode) the
    metrics."""
    settings = _process_settings()
    if workers > 1:
        check_shared(settings)
    base_url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    settings = with_admin_key(settings, base_url)
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": settings.log_level.lower(),
        "access_log": False,
        "proxy_headers": False,
        "timeout_graceful_shutdown": settings.shutdown_timeout_s,
    }
    exit_zero_on_sigterm()
    if workers <= 1:
        uvicorn.run(create_app(settings, base_url=base_url), **options)
        return
    with tempfile.TemporaryDirectory(prefix="factrail-metrics-") as shared:
        os.environ[MULTIPROC_ENV] = shared
        # every worker wants the one key, kept in a file or (no data folder) made here alone
        os.environ.setdefault("FACTRAIL_ADMIN_KEY", settings.admin_key.get_secret_value())
        uvicorn.run("factrail.gateway.factory:worker_app", factory=True, workers=workers, **options)


def with_admin_key(settings: Settings, base_url: str) -> Settings:
    """`settings` holding the admin key, configured or else generated (`factrail.stores.
    admin_key`: the login line said once, on stderr, by the process that made it), so the
    admin surface is never open and the key is withheld from upstreams and redacted like any
    configured secret."""
    if settings.admin_key.get_secret_value().strip():
        return settings
    key = admin_key.load_or_create(settings, announce=partial(_announce, base_url))
    return settings.model_copy(update={"admin_key": SecretStr(key)})


def _announce(base_url: str, path: Path | None, key: str) -> None:
    """Print the login line of a first start on stderr (not the log: it holds the key)."""
    print(admin_key.login_line(path, key, base_url), file=sys.stderr, flush=True)


def worker_app() -> FastAPI:
    """The app of one worker process (`serve` with several workers): settings from the
    environment, as the parent read them."""
    return create_app(_process_settings())


def _process_settings() -> Settings:
    """The settings from the environment, with this process's logging and switch interval
    set up by them."""
    settings = Settings()
    configure_logging(settings.log_level)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return settings


def check_shared(settings: Settings) -> None:
    """Several workers must share their state: refuse a per-process store."""
    url = state_url(settings.state_url)
    if url.startswith("memory://") or url == "sqlite://:memory:":
        raise StoreConfigError(
            f"--workers needs a state store the workers share; {url} lives in one process"
            " (use sqlite:///abs/path.db or redis://host:6379/0)"
        )
