"""Gateway settings: `FACTRAIL_*` env vars, and an optional TOML file named by `FACTRAIL_CONFIG`.

Environment variables win over the file. A malformed value never crashes the gateway: the field
falls back to its default and one warning names it (never its value, which may be a secret).
"""

from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from factrail.policy.options import DEFAULT_DEADLINE_MS, DEFAULT_TAINT_SKILLS, DEFAULT_TAINT_TOOLS

log = logging.getLogger("factrail.settings")

DEFAULT_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "codex": 400_000,
    "claude": 200_000,
    "gemini": 1_048_576,
    "deepseek": 128_000,
    "qwen": 128_000,
    "llama": 128_000,
    "mistral": 128_000,
}
"""Model-name prefix → context window in tokens (longest prefix wins); overridable."""

StrList = Annotated[tuple[str, ...], NoDecode]
WindowMap = Annotated[dict[str, int], NoDecode]


class Settings(BaseSettings):
    """Everything the gateway reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="FACTRAIL_", extra="ignore")

    upstream_url: str = "https://api.openai.com/v1"
    anthropic_upstream_url: str = "https://api.anthropic.com"
    """Where `/v1/messages*` go; `/v1` is added unless the URL already ends in it."""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    max_connections: int = 200
    max_body_bytes: int = 32 * 1024 * 1024

    trigger_tokens: int = 180_000
    trigger_percent: float = 60.0
    trigger_by_model: WindowMap = Field(default_factory=dict)
    """Model-name prefix → absolute trigger for that family (JSON), e.g. {"gpt-4.1": 400000}."""
    rearm_tokens: int = 0
    """Re-arm gap after a compaction; 0 means an eighth of the trigger."""
    preserve_recent: int = 6
    prepare_share: float = Field(default=0.5, ge=0.0, le=1.0)
    """Past this share of the trigger, turns below it analyse their new results in the
    background so the compaction turn is quicker; 0 turns it off."""
    analysis_sessions: int = Field(default=8, ge=0)
    """Sessions whose analyses are kept in memory (least recently used go first)."""
    context_windows: WindowMap = Field(default_factory=lambda: dict(DEFAULT_CONTEXT_WINDOWS))
    """Overrides merged over `DEFAULT_CONTEXT_WINDOWS` (JSON object in the environment)."""

    judge: Literal["rules", "systemone", "tev"] = "rules"
    judge_url: str = ""
    judge_model: str = ""
    judge_api_key: SecretStr = SecretStr("")
    judge_local: bool = False
    judge_deadline_ms: int = DEFAULT_DEADLINE_MS
    egress: Literal["full", "metadata"] = "full"
    taint_tools: StrList = DEFAULT_TAINT_TOOLS
    taint_skills: StrList = DEFAULT_TAINT_SKILLS
    taint_replace_defaults: bool = False
    """Configured fence lists are added to the defaults unless this is set."""
    tev_constraint: Literal["none", "regex", "logit_bias", "json_schema"] = "regex"
    record_decisions: bool = True
    decisions_retention_days: int = 30

    state_url: str = ""
    """`sqlite:///path` (default `$XDG_DATA_HOME/factrail/state.db`), `memory://`."""
    outputs_dir: str = ""
    """Default `$XDG_CACHE_HOME/factrail/outputs`; empty disables nothing, it only defaults."""
    save_outputs: bool = True
    save_process: Literal["auto", "on", "off"] = "auto"
    """A child process stages a compaction's outputs while the rails run; `auto`: when this
    process may use two CPUs or more."""
    admin_key: SecretStr = SecretStr("")

    log_level: str = "INFO"
    test_fail_compaction: bool = False
    """Test hook: raise inside every compaction step, to prove the gateway fails open."""

    @field_validator("*", mode="wrap")
    @classmethod
    def _default_on_error(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: Any) -> Any:
        name: str = info.field_name
        try:
            result = handler(_decode(cls.model_fields[name], value))
            return _POST_CHECKS[name](result) if name in _POST_CHECKS else result
        except (ValidationError, ValueError, TypeError):
            log.warning("setting %s is malformed; using its default", name)
            return cls.model_fields[name].get_default(call_default_factory=True)

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
        return (init_settings, env_settings, _TomlSource(settings_cls))

    def smallest_trigger(self) -> int:
        """The smallest trigger any model can have: bounds the no-parse fast path."""
        by_percent = [
            int(w * self.trigger_percent / 100) for w in self.context_windows.values() if w > 0
        ]
        absolute = [self.trigger_tokens, *(t for t in self.trigger_by_model.values() if t > 0)]
        return min([t for t in by_percent if t > 0] + absolute)


def _positive(value: Any) -> Any:
    if value <= 0:
        raise ValueError("must be positive")
    return value


def _merge_windows(value: dict[str, int]) -> dict[str, int]:
    merged = dict(DEFAULT_CONTEXT_WINDOWS)
    merged.update({k.lower(): v for k, v in value.items() if v > 0})
    return merged


_POST_CHECKS = {
    "max_body_bytes": _positive,
    "trigger_tokens": _positive,
    "trigger_percent": _positive,
    "max_connections": _positive,
    "judge_deadline_ms": _positive,
    "connect_timeout_s": _positive,
    "read_timeout_s": _positive,
    "context_windows": _merge_windows,
}


def _decode(info: FieldInfo, value: Any) -> Any:
    """Strings for list and map fields: JSON, or comma-separated for lists."""
    if not isinstance(value, str) or info.annotation is None:
        return value
    if info.annotation == tuple[str, ...]:
        text = value.strip()
        if text.startswith("["):
            return orjson.loads(text)
        return tuple(part.strip() for part in text.split(",") if part.strip())
    if info.annotation == dict[str, int]:
        return orjson.loads(value)
    return value


class _TomlSource(PydanticBaseSettingsSource):
    """The `[factrail]` table (or top level) of the TOML file named by `FACTRAIL_CONFIG`."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self._data = _read_toml(os.environ.get("FACTRAIL_CONFIG", ""))

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """One field's value from the file."""
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._data.items() if k in self.settings_cls.model_fields}


def _read_toml(path: str) -> dict[str, Any]:
    if not path:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        log.warning("config file %s is unreadable; ignoring it", path)
        return {}
    table = data.get("factrail", data)
    return {str(k).lower(): v for k, v in table.items()} if isinstance(table, dict) else {}
