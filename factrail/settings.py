"""Every knob of factrail, once: `FACTRAIL_*` env vars and a TOML file (`FACTRAIL_CONFIG`).

The gateway, `factrail compact`, `factrail eval` and the hook all read this one object; the
engine's and the policy's options are typed sections derived from it (`trigger()`, `fence()`,
`plan_options()`, `engine_options()`), so each default and each bound is written here and
nowhere else. Keyword arguments win over the environment, which wins over the file. Settings
fail closed: a malformed value, an unknown `FACTRAIL_*` name, a missing or broken config file or
an unusable combination raises `SettingsError`, one line per problem naming the variable, its
value (never a secret's) and what is allowed (`factrail.settings_check`); nothing falls back to
a default. The variables the tests, CI and deployment read are declared here too (the
development section). `docs/configuration.md` is generated from this module (`factrail
settings --markdown`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from factrail.core.plan import CompactOptions
from factrail.policy.cost import model_price
from factrail.policy.taint import DEFAULT_TAINT_SKILLS, DEFAULT_TAINT_TOOLS, TaintFence
from factrail.policy.trigger import Trigger
from factrail.session.options import EngineOptions
from factrail.settings_check import (
    CONFIG,
    CONFIG_ENV,
    MIN_SECRET_CHARS,
    Origins,
    SettingsError,
    TomlSource,
    admin_key_text,
    bind_problems,
    env_names,
    http_url,
    parse_names,
    parse_object,
    plain_number,
    plain_text,
    positive_map,
    price_map,
    read_config,
    secret_length,
    state_url,
    strict_bool,
    tool_names,
    unknown_names,
    value_problems,
    whole_in_range,
)
from factrail.stores import output_store
from factrail.stores.outputs import OutputLimits, OutputStore

__all__ = ["MIN_SECRET_CHARS", "OUTPUTS_ROUTE", "Settings", "SettingsError"]

DEFAULT_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "gpt-5.6": 922_000,
    "gpt-6": 922_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "codex": 400_000,
    "claude": 200_000,
    "claude-opus-4-6": 1_000_000,
    "claude-sonnet-4-6": 1_000_000,
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4-8": 1_000_000,
    "claude-opus-5": 1_000_000,
    "claude-sonnet-5": 1_000_000,
    "claude-haiku-5": 1_000_000,
    "claude-fable": 1_000_000,
    "claude-mythos-5": 1_000_000,
    "gemini": 1_048_576,
    "deepseek": 128_000,
    "qwen": 128_000,
    "llama": 128_000,
    "mistral": 128_000,
}
"""Model-name prefix → context window in tokens (longest prefix wins); overridable. Claude's
windows are 1M from Opus and Sonnet 4.6 on (every current model but Haiku 4.5; Mythos 5 has
Fable 5's); OpenAI's
GPT-5.6 and GPT-6 families take 922K input tokens of their 1.05M."""
KEEP_THRESHOLD_BOUNDS = (0.01, 0.99)
"""A threshold ≤ 0 would keep every call and ≥ 1 would drop every call: refused outside."""
OUTPUTS_ROUTE = "/v1/factrail/outputs/"
UPSTREAM_KEEPALIVE_S = 1.5
"""Default of `upstream_keepalive_s`: below uvicorn's, Node's and hypercorn's 5 s and gunicorn's
2 s, with room for factrail closing a response a little after the upstream sent its end."""

StrList = Annotated[tuple[str, ...], NoDecode]
IntMap = Annotated[dict[str, int], NoDecode]
PriceMap = Annotated[dict[str, dict[str, float]], NoDecode]


class Settings(BaseSettings):
    """Everything factrail reads from its environment (see `docs/configuration.md`)."""

    model_config = SettingsConfigDict(
        env_prefix="FACTRAIL_",
        extra="forbid",
        allow_inf_nan=False,
        use_attribute_docstrings=True,
        populate_by_name=True,
    )

    # -- upstream and limits -----------------------------------------------------------------
    upstream_url: str = "https://api.openai.com/v1"
    """The real model endpoint; `/v1/...` paths are appended after its own path."""
    anthropic_upstream_url: str = "https://api.anthropic.com"
    """Where `POST /v1/messages` and everything under `/v1/messages/` go; `/v1` is added unless
    the URL already ends in it."""
    anthropic_authorization: Literal["anthropic", "drop", "forward", "x-api-key"] = "anthropic"
    """What the Anthropic upstream gets of a client's `Authorization` header: `anthropic`
    (default) forwards a bearer only when it is an Anthropic credential (`sk-ant-…`: an API
    key, which the Anthropic SDKs now send as a bearer, or a Claude Code OAuth token) and drops
    any other, so a token meant for another service never reaches Anthropic (said once in the
    log); `drop` never forwards it; `forward` forwards any, for clients whose tokens have
    another shape (`ANTHROPIC_AUTH_TOKEN` of a gateway) — opt in only when those clients are
    yours; `x-api-key` moves a `Bearer` token into `x-api-key` when the client sent none. The
    OpenAI upstream always gets `Authorization` and never `x-api-key` or `anthropic-*`; no
    upstream ever gets a header carrying `FACTRAIL_ADMIN_KEY`."""
    connect_timeout_s: float = Field(default=10.0, gt=0)
    """Upstream connect timeout (a failure is a 502 in the provider's error shape)."""
    read_timeout_s: float = Field(default=600.0, gt=0)
    """Upstream read timeout (a timeout is a 504)."""
    max_connections: int = Field(default=200, gt=0)
    """Connection pool size of the one shared upstream client."""
    upstream_keepalive_s: float = Field(default=UPSTREAM_KEEPALIVE_S, ge=0)
    """How long an idle upstream connection is kept for the next request. Keep it below the
    upstream's own keep-alive timeout: a request sent on a connection the upstream closes at that
    moment fails with a 502, and is not sent again (a model call never runs twice). Common servers
    close idle connections after 5 s (uvicorn, so vLLM, SGLang and LiteLLM; Node; hypercorn;
    llama.cpp's server) or 2 s (uvicorn under gunicorn); 0 opens a connection per request."""
    max_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    """Larger request bodies get a 413."""
    shutdown_timeout_s: float = Field(default=10.0, ge=0)
    """On SIGTERM (or Ctrl-C), how long in-flight requests and streams may run on before they
    are cut (a stream then ends with an error event in its provider's shape); the process then
    exits with status 0. New connections are refused meanwhile."""
    admin_key: SecretStr = SecretStr("")
    """When set, `GET /v1/factrail/outputs/{id}` requires `Authorization: Bearer <key>`;
    printable ASCII without spaces. `factrail serve` refuses to bind anything but a loopback
    address without one of at least 16 characters. No upstream ever gets it."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    """One JSON line per request on stderr (never bodies or credentials); the level's name in
    any case."""

    # -- when to compact ---------------------------------------------------------------------
    trigger_tokens: int = Field(default=180_000, gt=0)
    """Absolute trigger T."""
    trigger_percent: float = Field(default=60.0, ge=0, le=100)
    """T is also at most this share (in percent) of the model's context window (0: the window
    is not used)."""
    trigger_by_model: IntMap = Field(default_factory=dict)
    """JSON object, model-name prefix → absolute trigger for that family, in place of
    `trigger_tokens` (longest prefix wins), e.g. `{"gpt-4.1": 400000}`."""
    context_windows: IntMap = Field(default_factory=lambda: dict(DEFAULT_CONTEXT_WINDOWS))
    """JSON object, model-name prefix → context window, merged over the built-in table
    (gpt-4o 128k, gpt-4.1 1M, gpt-5 400k, gpt-5.6 and gpt-6 922k, o-series 200k, claude 200k
    but 1M from Opus and Sonnet 4.6 on, gemini 1M, …; longest
    prefix wins). A request past 0.9 of its model's window is always compacted, recent results
    included."""
    rearm_tokens: int = Field(default=0, ge=0)
    """Re-arm gap after a compaction; 0 means an eighth of T."""
    mode: Literal["compact", "shadow"] = "compact"
    """`compact`: requests past the soft line are compacted before they leave. `shadow`: every
    request goes upstream byte for byte; the compaction step runs on a copy and records what it
    would have sent, and each session's JSON, the pages and `/metrics` show the projected bill
    (`projected`). `X-Factrail-Bypass: 1` forwards one request untouched in either mode."""
    price_profile: Literal["auto", "anthropic", "openai", "none"] = "auto"
    """Prompt-cache prices a compaction short of the danger line (halfway from the trigger to
    the model's window, at most twice the trigger) must pay back under: `anthropic` (cached
    reads 0.1×, or 0.05× on Opus and Sonnet 5.5 and 0.025× on Fable and Mythos 5.1 and 5.2;
    writes 1.25×, or 2× when the request's markers ask for the one-hour cache),
    `openai` (cached 0.5×, 0.25×, 0.1× or 0.05× by model family; from the GPT-5.6 family on
    writes at 1.25×, and every input token at 2× once a request passes 272K, so a compaction
    that brings one back under that line saves on all of it), `none` (no cache: compact at the
    soft line); `auto` picks by the model's name."""
    payback_horizon: float = Field(default=1.0, ge=0)
    """How many more turns the cost gate bets a session has, as a multiple of the turns it has
    had: a compaction short of the danger line runs only when what it removes, on that many
    turns, pays back the cache it breaks. Lower bets less: a session that ends soon after a
    compaction paid for it and saved little. 0 never bets: a session is compacted only past the
    danger line, on a cold cache, or where the provider has no cache to break (profile `none`).
    Replaying 48 real sessions under Anthropic's rules (`bench/anthropic_replay.py`): 0.5 bills
    0.682 of direct with 4 sessions above direct; 1 (the default) 0.676, 8 of 48 above; 2,
    0.676, 17 above. On the dev corpus's simulation 0.5 bills 0.873 of sending everything at
    0.8 windows against 1's 0.845, and keeps 0.994 of the facts against 0.991; 0 bills 1.000
    there and 0.866 at 1 window (`docs/evaluation.md`, "The gate's bet")."""
    model_prices: PriceMap = Field(default_factory=dict)
    """JSON object, model-name prefix → its input prices relative to an uncached input token,
    over the built-in tables of both profiles (longest prefix wins; a prefix never splits a
    number, so `claude-fable-5-2` does not price the dated `claude-fable-5-20260609`): `cached`
    (a cache read),
    `write` (a cache write, or any token not read from the cache), and optionally
    `long_context` (tokens past which the whole request costs `long_context_factor` times as
    much, 2 unless given). For a model the tables do not know yet, or a price change they
    missed, e.g. `{"claude-opus-6": {"cached": 0.05, "write": 1.25}}`."""
    cache_mark: bool = True
    """Mark the end of the frozen zone with one cache breakpoint, so a compaction re-writes only
    what it changed (before the first compaction, once past half the trigger: the head before
    the first result): a `cache_control` on Anthropic requests with a breakpoint free (at most
    four), a `prompt_cache_breakpoint` on the last tool output of the zone on OpenAI requests to
    GPT-5.6 and later (within their four writes; older models take no such field)."""
    cache_ttl_s: float = Field(default=300.0, gt=0)
    """A session idle longer than this has lost its provider cache, so a compaction at the soft
    line costs nothing extra and runs at once. A request that asks for a longer-lived cache is
    held to that: an Anthropic marker with `ttl: "1h"` (whose writes the cost gate then prices
    at 2× input), OpenAI's `prompt_cache_retention: "24h"`; OpenAI's models from the GPT-5.6
    family on keep their cache 30 minutes (`prompt_cache_options.ttl`)."""
    preserve_recent: int = Field(default=4, ge=0)
    """The newest N messages (and message 0) are never reduced: by default the last two
    exchanges, calls and results (the reference's 6 kept three); a compaction forced past the
    danger line pins at most the last exchange (2). See docs/evaluation.md, "Two exchanges
    pinned, not three"."""
    keep_tools: StrList = ()
    """Tools whose results the rails never touch, besides `Skill`, `Task` and `Agent` (whose
    results are instructions or reports the agent cannot re-derive) and any call reading a
    saved output back."""
    head_chars: int = Field(default=200, ge=0)
    """Characters of an observation's head that the rails always keep."""
    min_cut_chars: int = Field(default=800, ge=0)
    """A result is reduced only when that saves at least this many chars (about 200 tokens)
    beyond the note it is sent with: a smaller cut gives up the result's facts for little, and
    the room is better taken from larger results. Past the hard line, and when the request
    would not fit the model's window, any gain counts."""
    prepare_share: float = Field(default=0.5, ge=0.0, le=1.0)
    """Past this share of T, a turn below the soft line analyses its new results in a worker
    thread while the upstream answers, so the compaction turn only analyses what is newer (0
    turns it off; see `performance.md`)."""
    analysis_sessions: int = Field(default=8, ge=0)
    """How many sessions' analyses stay in memory, least recently used dropped first (a
    200k-token session's analysis is about 14 MB; see `performance.md`)."""

    # -- the judge and the taint fence ---------------------------------------------------------
    judge: Literal["rules", "systemone", "tev"] = "rules"
    """`rules` (no model, nothing leaves), `systemone`, `tev`."""
    judge_url: str = ""
    """System One: the URL posted to (default `https://api.typesafe.ai/v1/systemone`); Tev: the
    base URL (`/chat/completions` appended; required)."""
    judge_model: str = ""
    """Model name sent to the judge (default `jev-latest` for System One, `tev1` for Tev)."""
    judge_api_key: SecretStr = Field(
        default=SecretStr(""),
        validation_alias=AliasChoices("FACTRAIL_JUDGE_API_KEY", "FACTRAIL_TEV_API_KEY"),
    )
    """The judge's own key, sent as a bearer only to the judge URL and redacted from everything
    sent (`FACTRAIL_TEV_API_KEY` is read as an alias)."""
    judge_local: bool = False
    """**Declares** the judge local: only then may a tainted session reach it, and only then may
    a System One endpoint be keyless. Never inferred from the URL."""
    judge_deadline_ms: int = Field(default=15_000, gt=0)
    """One deadline per compaction; transient failures are retried inside it; unanswered calls
    fall to the rules."""
    egress: Literal["full", "metadata"] = "full"
    """`metadata` sends tool arguments as their shape only (kind, sorted keys, length);
    tool-result contents are never sent in either mode."""
    keep_threshold: float = Field(
        default=0.5, ge=KEEP_THRESHOLD_BOUNDS[0], le=KEEP_THRESHOLD_BOUNDS[1]
    )
    """A call whose judged keep probability is below this is reduced (0.01–0.99)."""
    max_state_tokens: int = Field(default=25_000, ge=0)
    """Budget of the transcript state sent in one judge request."""
    max_request_tokens: int = Field(default=30_000, ge=0)
    """Budget of one whole judge request."""
    tev_constraint: Literal["none", "regex", "logit_bias", "json_schema"] = "regex"
    """How a Tev model is held to its answer format: vLLM guided `regex`, `json_schema`,
    `logit_bias`, or `none`."""
    taint_tools: StrList = DEFAULT_TAINT_TOOLS
    """Fenced tool-name prefixes (comma- or newline-separated, or a JSON array of strings; a
    name is ASCII letters, digits, `_`, `-`, `.`, with one MCP prefix); **added** to the
    defaults."""
    taint_skills: StrList = DEFAULT_TAINT_SKILLS
    """Fenced skills (also plugin-qualified, `plugin:email-search`); added to the defaults."""
    taint_replace_defaults: bool = False
    """Replace the default fence lists instead of adding to them."""

    # -- state, saved outputs, decisions ---------------------------------------------------------
    state_url: str = ""
    """Session plans, baselines, taint, calibration, remembered answers, leases and Responses
    chains: `sqlite:///abs/path.db` (default `$XDG_DATA_HOME/factrail/state.db`; shared by the
    workers of one host), `redis://host:6379/0` / `rediss://…` / `unix:///path.sock` (Redis or
    Valkey, shared by every replica; `?prefix=` sets the key prefix, default `factrail:`) or
    `memory://` (one process). SQLite runs in WAL mode, bounded to 10,000 sessions with 30-day
    expiry. Losing it costs cache hits and judge calls, never a request; while it fails the
    fence treats sessions as unproven (rules only)."""
    state_max_bytes: int = Field(default=1024**3, ge=0)
    """Byte bound of the session records in the SQLite state store (0: none), on top of its
    10,000-session bound: the least recently updated go first, except tainted records younger
    than the outputs retention, which are never pruned before their session's outputs."""
    outputs_dir: str = ""
    """Saved full outputs (default `$XDG_CACHE_HOME/factrail/outputs`):
    `<capability>/<tool_use_id>.txt`, redacted, 0600 in 0700 folders, 8 MiB cap per output,
    bounded by the quotas below, expired after the retention (`factrail outputs expire`)."""
    save_outputs: bool = True
    """Save every reduced output before the reduced request leaves."""
    outputs_secret: SecretStr = SecretStr("")
    """Keys each session's outputs capability (an HMAC of the session key: the unguessable first
    part of its output ids and URLs); at least 16 characters. Unset: 32 random bytes made once
    and kept in `$XDG_DATA_HOME/factrail/outputs.key` (0600), shared by every worker on the
    volume. Changing it makes earlier notes' output ids unreachable."""
    outputs_max_bytes: int = Field(default=2 * 1024**3, ge=0)
    """Total byte quota of saved outputs (0: none); the oldest files go first when a save needs
    room, and a save that still does not fit is refused (its note then names the call)."""
    outputs_session_max_bytes: int = Field(default=64 * 1024**2, ge=0)
    """Per-session byte quota of saved outputs (0: none), enforced the same way."""
    outputs_retention_days: float = Field(default=30.0, gt=0)
    """Saved outputs are deleted this many days after they were last saved; tainted session
    records in the state store are kept at least this long."""
    outputs_sweep_interval_s: float = Field(default=600.0, ge=0)
    """How often the gateway sweeps the saved outputs (retention, then both quotas, oldest
    first; 0: only the daily sweep after a compaction)."""
    record_decisions: bool = True
    """A JSONL decision log per UTC day under `$XDG_DATA_HOME/factrail/decisions`, only for
    model-judged, untainted compactions."""
    decisions_retention_days: int = Field(default=30, gt=0)
    """Decision-log day files older than this are deleted."""
    test_fail_compaction: bool = False
    """Test hook: every compaction step raises, to prove the gateway fails open (the original
    bytes are forwarded and `factrail_compaction_failures_total{reason="injected"}` counts it).
    Never set it in production."""

    # -- development: read by the tests, CI and deployment, declared so none is unknown -------
    config: str = ""
    """The path of the TOML file read under the environment."""
    url: str = ""
    """The URL of a running gateway, for tools started beside it that reach it over HTTP
    (empty: `http://127.0.0.1:8080`)."""
    pure_python: Literal["0", "1"] = "0"
    """`1` runs the engine without its optional C kernels, read once at start-up; the output
    is the same, only slower. The gateway logs which path runs when it starts."""
    corpus_dir: str = ""
    """The development corpus of real sessions that `make gate` and the tests read (empty:
    `../shared/corpus/dev`)."""
    require_claude: Literal["0", "1"] = "0"
    """`1` (`.ci/run` sets it): the plugin and real-client tests fail rather than skip without
    Node and the pinned Claude Code."""
    require_native: Literal["0", "1"] = "0"
    """`1`: the kernel tests fail rather than skip when the C kernels are not built (the
    interpreter matrix)."""
    require_promtool: Literal["0", "1"] = "0"
    """`1` (`.ci/run` sets it): the alert rules' tests fail rather than skip without `promtool`
    (Debian's `prometheus` package, which `make test` installs where apt-get can run)."""
    require_chromium: Literal["0", "1"] = "0"
    """`1` (`.ci/run` sets it): the page tests fail rather than skip without headless Chromium
    (Debian's `chromium` package, which `make test` installs where apt-get can run)."""
    hypothesis: Literal["ci", "explore"] = "ci"
    """The tests' Hypothesis profile: `ci` (a fixed example sequence) or `explore` (fresh
    examples)."""
    lb_port: int = Field(default=8080, ge=1, le=65535)
    """The loopback port `deploy/compose.yaml` publishes the cluster profile's balancer on."""

    _source: str = PrivateAttr(default="keyword arguments")

    def __init__(self, **values: Any) -> None:
        """Read and check every source; raises `SettingsError` listing every problem."""
        env = dict(os.environ)
        fields = type(self).model_fields
        problems = unknown_names(env, _known_env())
        path = values.get("config", env.get(CONFIG_ENV))
        config, more = read_config(path, fields, ENV_ONLY)
        problems += more
        origins = Origins(fields, values, env, config, path or "")
        token = CONFIG.set(config)
        try:
            super().__init__(**values)
        except ValidationError as err:
            problems += value_problems(err, origins)
        else:
            problems += self._combinations(origins)
        finally:
            CONFIG.reset(token)
        if problems:
            raise SettingsError(problems)
        self._source = origins.source()

    def _combinations(self, origins: Origins) -> list[str]:
        if self.judge == "tev" and not self.judge_url:
            needs = "the Tev judge needs FACTRAIL_JUDGE_URL, its base URL"
            return [f"{origins.describe('judge', self.judge)} is not allowed: {needs}"]
        return []

    def source(self) -> str:
        """Where these settings came from, in words."""
        return self._source

    def overlaid(self, values: Mapping[str, Any]) -> Settings:
        """A copy with each of `values` (field name → raw value) that the field's own
        validators accept; a value they refuse keeps this setting, but for the fence's lists,
        which would then fence less than was meant: one of those refused is a `SettingsError`.
        The combinations are not checked again."""
        merged = self.model_copy()
        for name, value in values.items():
            try:
                type(self).__pydantic_validator__.validate_assignment(merged, name, value)
            except ValidationError as err:
                if name in FENCE_LISTS:
                    raise SettingsError(value_problems(err, Origins({}, {}, {}, {}, ""))) from None
                continue
        return merged

    def bind_problems(self, host: str) -> list[str]:
        """Why the gateway may not serve on `host` with these settings (none: it may)."""
        key = self.admin_key.get_secret_value()
        described = "FACTRAIL_ADMIN_KEY=" + ("<hidden>" if key else "''")
        return bind_problems(host, key, described)

    @field_validator("*", mode="before")
    @classmethod
    def _parse(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        parse = _PARSE.get(cls.model_fields[name].annotation)
        return parse(value) if parse is not None else value

    @field_validator("*", mode="after")
    @classmethod
    def _check(cls, value: Any, info: ValidationInfo) -> Any:
        check = _CHECKS.get(info.field_name or "")
        return whole_in_range(check(value) if check is not None else value)

    @field_validator("log_level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) and value == value.strip() else value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """init kwargs, then the environment, then the TOML file."""
        return (init_settings, env_settings, TomlSource(settings_cls))

    # -- the typed sections --------------------------------------------------------------------

    def trigger(self) -> Trigger:
        """When to compact: trigger, windows, re-arm."""
        return Trigger(
            tokens=self.trigger_tokens,
            percent=self.trigger_percent,
            rearm=self.rearm_tokens,
            windows=dict(self.context_windows),
            by_model=dict(self.trigger_by_model),
        )

    def fence(self) -> TaintFence:
        """The taint fence: the defaults plus the configured names (or those alone)."""
        return TaintFence.configured(
            self.taint_tools, self.taint_skills, replace_defaults=self.taint_replace_defaults
        )

    def plan_options(self, goal: str = "") -> CompactOptions:
        """What the judge's plan needs."""
        return CompactOptions(
            goal=goal,
            keep_threshold=self.keep_threshold,
            preserve_recent=self.preserve_recent,
            max_state_tokens=self.max_state_tokens,
            max_request_tokens=self.max_request_tokens,
            head_chars=self.head_chars,
            egress=self.egress,
        )

    def engine_options(self, *, outputs_route: str | None = OUTPUTS_ROUTE) -> EngineOptions:
        """The session step's options. `outputs_route`: the HTTP route the notes name beside
        the saved file (None outside the gateway)."""
        return EngineOptions(
            trigger=self.trigger(),
            fence=self.fence(),
            plan=self.plan_options(),
            judge_deadline_ms=self.judge_deadline_ms,
            save_outputs=self.save_outputs,
            record_decisions=self.record_decisions,
            outputs_route=outputs_route,
            prepare_share=self.prepare_share,
            analysis_sessions=self.analysis_sessions,
            price_profile=self.price_profile,
            payback_horizon=self.payback_horizon,
            model_prices={k: model_price(v) for k, v in self.model_prices.items()},
            cache_ttl_s=self.cache_ttl_s,
            keep_tools=tuple(t for t in self.keep_tools if t),
            min_cut_chars=self.min_cut_chars,
        )

    def known_secrets(self) -> list[str]:
        """The configured secrets, for redaction of everything factrail writes or sends."""
        keys = (self.judge_api_key, self.admin_key, self.outputs_secret)
        return [k.get_secret_value() for k in keys if k.get_secret_value()]

    def output_limits(self) -> OutputLimits:
        """The saved outputs' quotas and retention."""
        return OutputLimits(
            max_bytes=self.outputs_max_bytes,
            session_max_bytes=self.outputs_session_max_bytes,
            retention_days=self.outputs_retention_days,
        )

    def output_store(self, env: Mapping[str, str] | None = None) -> OutputStore | None:
        """The saved-output store as configured (None when no cache folder is usable)."""
        return output_store(
            self.outputs_dir,
            self.known_secrets(),
            env,
            secret=self.outputs_secret.get_secret_value(),
            limits=self.output_limits(),
        )


FENCE_LISTS = frozenset({"taint_tools", "taint_skills"})
"""Lists that `overlaid` never leaves out: the fence would fence less than was meant."""
ENV_ONLY_NAMES = (
    "config",
    "url",
    "pure_python",
    "corpus_dir",
    "require_claude",
    "require_native",
    "require_promtool",
    "require_chromium",
    "hypothesis",
    "lb_port",
)
"""The development and deployment settings, in the order `docs/configuration.md` lists them."""
ENV_ONLY = frozenset(ENV_ONLY_NAMES)
"""Read from the environment only: a key of the TOML file naming one is refused."""


def _merge_windows(value: dict[str, int]) -> dict[str, int]:
    return {**DEFAULT_CONTEXT_WINDOWS, **positive_map(value)}


_PARSE: dict[Any, Callable[[Any], Any]] = {
    tuple[str, ...]: parse_names,
    dict[str, int]: parse_object,
    dict[str, dict[str, float]]: parse_object,
    int: lambda v: plain_number(plain_text(v), whole=True),
    float: lambda v: plain_number(plain_text(v), whole=False),
    bool: strict_bool,
    str: plain_text,
    SecretStr: plain_text,
}
"""How a raw value of each annotation is read before its type is checked."""
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "admin_key": admin_key_text,
    "taint_tools": tool_names,
    "keep_tools": tool_names,
    "upstream_url": http_url,
    "anthropic_upstream_url": http_url,
    "judge_url": lambda v: http_url(v, empty=True),
    "url": lambda v: http_url(v, empty=True),
    "state_url": state_url,
    "outputs_secret": lambda v: secret_length(v, MIN_SECRET_CHARS),
    "trigger_by_model": positive_map,
    "context_windows": _merge_windows,
    "model_prices": price_map,
}
"""What each field must hold beyond its type."""


@cache
def _known_env() -> frozenset[str]:
    return frozenset(env_names(Settings.model_fields))
