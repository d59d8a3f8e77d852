"""How the settings are checked: every value, every `FACTRAIL_*` name, the TOML file, the bind.

Nothing falls back to a default. `Settings()` raises `SettingsError`, whose `problems` are one
line each, naming the variable (or the file and key, or the keyword argument), its value
(`<hidden>` for a secret) and what is allowed. `factrail serve` adds `bind_problems` for its
address; `factrail settings --check` prints every line.

Booleans are `true`, `false`, `1` or `0` exactly; whole numbers are plain ASCII digits, other
numbers plain decimals. Lists are comma- or newline-separated names, or a JSON array of strings;
a name is ASCII letters, digits, `_`, `-`, `.` (and `:` between a plugin and its skill), holding
one MCP prefix at most, so a list written with another separator (`;`, `|`, `/`, `:`, a
full-width comma) cannot read as one name that fences nothing. Maps are JSON objects.

A problem line never shows a secret, nor the value of a name that is not a setting, nor a URL's
userinfo, query or fragment, nor a table or list of the TOML file; what it shows is redacted.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import stat
import tomllib
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Literal, get_args, get_origin
from urllib.parse import urlsplit

import annotated_types
import orjson
from pydantic import SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource

ENV_PREFIX = "FACTRAIL_"
PREFIX_LIKENESS = 0.8
"""An environment name whose first characters (case-folded, `-` read as `_`) are at least this
alike to `FACTRAIL_` is read as a factrail name, and refused when it names no setting."""
CONFIG_ENV = "FACTRAIL_CONFIG"
SECRET_FIELDS = frozenset({"admin_key", "judge_api_key", "outputs_secret"})
HIDDEN = "<hidden>"
MIN_ADMIN_KEY_CHARS = 16
"""A gateway bound to anything but loopback needs an admin key at least this long."""
MIN_SECRET_CHARS = 16
"""A shorter `outputs_secret` is refused."""
PRICE_KEYS = frozenset({"cached", "write", "long_context", "long_context_factor"})
MAX_WHOLE = 2**53
"""Larger whole numbers are refused (no setting means anything past it)."""
MAX_SHOWN = 100
"""A value shown in a problem line is cut to this many characters."""
LIST_GRAMMAR = (
    "names separated by commas or newlines, or a JSON array of strings; a name is ASCII"
    " letters, digits, _, - and ."
)
BOOL_WORDS = "true, false, 1 or 0 (in lower case)"
STATE_SCHEMES = ("sqlite", "redis", "rediss", "unix", "memory")
MAX_CONFIG_BYTES = 1 << 20
"""A larger TOML file is refused."""
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:")
_MCP = re.compile(r"[^a-z0-9]")
_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_NOT_IN_A_URL = re.compile(r"[\s\"'`<>]")
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<authority>[^/?#\s\"'`<>]*)")
_URL_TAIL = re.compile(r"[?#][^\s\"'`<>]*")


class SettingsError(ValueError):
    """Settings that may not be used; `problems` holds one line per problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems) or ["the settings are not valid"]
        super().__init__(summary(self.problems))


def summary(problems: Sequence[str]) -> str:
    """One line for all the problems: the first, and how many more there are."""
    more = len(problems) - 1
    if more <= 0:
        return problems[0]
    return f"{problems[0]} (and {more} more: `factrail settings --check` lists them all)"


# -- parsing one value ----------------------------------------------------------------------------


def parse_names(value: Any) -> tuple[str, ...]:
    """A list setting: comma- or newline-separated names, a JSON array of strings, or a list;
    each name plausible (`plausible_name`)."""
    items: Any = value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                items = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise ValueError("not a valid JSON array") from None
        else:
            items = re.split(r"[,\r\n]", text)
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ValueError("a list holds strings only")
    names = tuple(i.strip() for i in items if i.strip())
    for name in names:
        plausible_name(name)
    return names


def plausible_name(name: str) -> str:
    """`name` when it can be one tool, MCP prefix or skill: ASCII letters, digits, `_`, `-`,
    `.`, one `:` between two parts (a plugin and its skill), and one MCP prefix at most;
    otherwise a `ValueError` naming what is wrong (another separator, most often)."""
    bad = next((c for c in name if c not in _NAME_CHARS), None)
    if bad is not None:
        raise ValueError(f"{bad!r} does not separate names and no name holds it (in {name!r})")
    parts = name.split(":")
    if len(parts) > 2 or not all(parts):
        raise ValueError(f"':' does not separate names: only plugin:skill holds one (in {name!r})")
    if any(_MCP.sub("", part.lower()) == "mcp" for part in name.split("__")[1:]):
        raise ValueError(f"{name!r} holds two MCP prefixes: separate names with commas")
    return name


def tool_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """A list of tools or MCP prefixes: no `:` (only a skill is plugin-qualified)."""
    for name in names:
        if ":" in name:
            raise ValueError(f"':' does not separate names and no tool name holds it (in {name!r})")
    return names


def strict_bool(value: Any) -> Any:
    """A boolean setting: `true`, `false`, `1` or `0` exactly (or a bool)."""
    if isinstance(value, bool):
        return value
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ValueError("not a boolean")


def plain_number(value: Any, *, whole: bool) -> Any:
    """A number setting written as text: plain ASCII digits (a whole number), or a plain decimal
    (no `_`, no other script's digits, no `nan` or `inf`)."""
    if isinstance(value, bool):
        raise ValueError("true/false is not a number")
    if isinstance(value, str) and not (_WHOLE if whole else _DECIMAL).fullmatch(value):
        raise ValueError("not plain digits" if whole else "not a plain decimal number")
    return value


def admin_key_text(value: SecretStr) -> SecretStr:
    """The admin key: empty, or printable ASCII without spaces (it travels in a header)."""
    key = value.get_secret_value()
    if key and not all("!" <= c <= "~" for c in key):
        raise ValueError("a space or a character outside printable ASCII")
    return value


def _control(text: str) -> str | None:
    return next((c for c in text if unicodedata.category(c).startswith("C")), None)


def parse_object(value: Any) -> Any:
    """A map setting: a JSON object (or a table of the TOML file)."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise ValueError("not valid JSON") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    if not all(isinstance(k, str) and k.strip() and k == k.strip() for k in value):
        raise ValueError("every key must be a non-blank name without spaces around it")
    return value


def plain_text(value: Any) -> Any:
    """A string setting: no spaces, tabs or line breaks around it, no control characters."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if isinstance(text, str) and (text != text.strip() or _control(text) is not None):
        raise ValueError("spaces or line breaks around it, or a control character in it")
    return value


def whole_in_range(value: Any) -> Any:
    """A whole number no larger than `MAX_WHOLE`."""
    if isinstance(value, int) and abs(value) > MAX_WHOLE:
        raise ValueError(f"larger than {MAX_WHOLE}")
    return value


def http_url(value: str, *, empty: bool = False) -> str:
    """An `http://` or `https://` URL with a host (or, when `empty`, nothing)."""
    if not value and empty:
        return value
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        host = None
    if parts.scheme not in ("http", "https"):
        raise ValueError("no http:// or https:// scheme")
    if not host or _NOT_IN_A_URL.search(value):
        raise ValueError("no host, or a space or quote in it")
    return value


def state_url(value: str) -> str:
    """Empty (the default store), or a state store URL `open_state_store` takes."""
    if not value:
        return value
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in STATE_SCHEMES:
        raise ValueError("an unknown scheme")
    if scheme.lower() == "sqlite" and rest != ":memory:" and not rest.startswith("/"):
        raise ValueError("a SQLite store needs an absolute path")
    if scheme.lower() == "sqlite" and "?" in rest:
        raise ValueError("a SQLite path takes no query")
    return value


def secret_length(value: SecretStr, minimum: int) -> SecretStr:
    """A secret that is empty or at least `minimum` characters long."""
    if 0 < len(value.get_secret_value()) < minimum:
        raise ValueError("too short")
    return value


def price_map(value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """`model_prices`: each entry a price list (`cached` ≤ `write`, both positive)."""
    for prefix, entry in value.items():
        if not {"cached", "write"} <= set(entry) <= PRICE_KEYS:
            raise ValueError(f"{prefix!r} needs cached and write, and no other keys but those")
        if not 0 < entry["cached"] <= entry["write"] or entry.get("long_context", 1) <= 0:
            raise ValueError(f"{prefix!r}: prices must be positive, a read no dearer than a write")
        if entry.get("long_context_factor", 1) < 1:
            raise ValueError(f"{prefix!r}: long_context_factor must be at least 1")
    return {k.lower(): v for k, v in value.items()}


def positive_map(value: dict[str, int]) -> dict[str, int]:
    """A prefix → count map: every count positive; prefixes lower-cased."""
    for prefix, number in value.items():
        if number <= 0:
            raise ValueError(f"{prefix!r} maps to {number}")
    return {k.lower(): v for k, v in value.items()}


# -- what is allowed ------------------------------------------------------------------------------

_URL_WORDS = "an http:// or https:// URL"
ALLOWED = {
    "upstream_url": _URL_WORDS,
    "anthropic_upstream_url": _URL_WORDS,
    "judge_url": f"empty, or {_URL_WORDS}",
    "url": f"empty, or {_URL_WORDS}",
    "state_url": "empty, sqlite:///abs/path.db, sqlite://:memory:, redis://host:6379/0,"
    " rediss://…, unix:///path.sock or memory://",
    "admin_key": "empty, or printable ASCII without spaces (at least"
    f" {MIN_ADMIN_KEY_CHARS} characters to serve beyond loopback)",
    "judge_api_key": "a string with nothing around it",
    "outputs_secret": f"empty, or at least {MIN_SECRET_CHARS} characters",
    "trigger_by_model": 'a JSON object of model-name prefix → whole number > 0, e.g. {"gpt-4.1":'
    " 400000}",
    "context_windows": 'a JSON object of model-name prefix → whole number > 0, e.g. {"gpt-4o":'
    " 128000}",
    "model_prices": 'a JSON object of model-name prefix → {"cached": c, "write": w} (optionally'
    ' "long_context", "long_context_factor"), 0 < c ≤ w',
    "log_level": "one of DEBUG, INFO, WARNING, ERROR, CRITICAL (in any case)",
}
"""What a field accepts, in words, where its type does not say it."""


def allowed(info: FieldInfo, name: str) -> str:
    """What a setting accepts, in words."""
    if name in ALLOWED:
        return ALLOWED[name]
    annotation = info.annotation
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(annotation))
    if annotation is bool:
        return BOOL_WORDS
    if annotation in (int, float):
        kind = "a whole number" if annotation is int else "a finite number"
        bounds = [b for b in (_bound(m) for m in info.metadata) if b]
        if len(bounds) == 2 and bounds[0][0] == "≥" and bounds[1][0] == "≤":
            return f"{kind} from {bounds[0][2:]} to {bounds[1][2:]}"
        return " ".join([kind, " and ".join(bounds)]).strip()
    if annotation == tuple[str, ...]:
        return LIST_GRAMMAR
    return "a string"


def _bound(meta: Any) -> str:
    for kind, sign in (
        (annotated_types.Gt, ">"),
        (annotated_types.Ge, "≥"),
        (annotated_types.Lt, "<"),
        (annotated_types.Le, "≤"),
    ):
        if isinstance(meta, kind):
            return f"{sign} {getattr(meta, kind.__name__.lower())}"
    return ""


# -- where a value came from ----------------------------------------------------------------------


def env_names(fields: Mapping[str, FieldInfo]) -> dict[str, str]:
    """Every environment variable a field is read from → the field."""
    names: dict[str, str] = {}
    for name, info in fields.items():
        choices = getattr(info.validation_alias, "choices", None)
        for env in choices or [ENV_PREFIX + name.upper()]:
            names[str(env)] = name
    return names


class Origins:
    """Where each value came from: keyword arguments, the environment or the TOML file."""

    def __init__(
        self,
        fields: Mapping[str, FieldInfo],
        init: Mapping[str, Any],
        env: Mapping[str, str],
        config: Mapping[str, Any],
        config_path: str,
    ) -> None:
        self.fields = fields
        self.init = init
        self.env = env
        self.config = config
        self.config_path = config_path
        self.by_env = env_names(fields)

    def field_of(self, loc: str) -> str:
        """The field an error location names (a field or one of its aliases)."""
        return self.by_env.get(loc, loc)

    def describe(self, name: str, value: Any = None) -> str:
        """`LABEL=VALUE` for the field as it was given (the value hidden for a secret)."""
        for key in (name, *[e for e, f in self.by_env.items() if f == name]):
            if key in self.init:
                return f"{name}={shown(name, self.init[key])}"
        for env, field in self.by_env.items():
            if field == name and env in self.env:
                return f"{env}={shown(name, self.env[env])}"
        if name in self.config:
            return f"{self.config_path}: {name}={shown_from_file(name, self.config[name])}"
        return f"{name}={shown(name, value)}"

    def source(self) -> str:
        """Where the settings came from, in words."""
        count = sum(1 for k in self.env if k.startswith(ENV_PREFIX))
        parts = [f"{count} FACTRAIL_* variable{'s' if count != 1 else ''} in the environment"]
        parts.append(f"the file {self.config_path}" if self.config_path else "no config file")
        if self.init:
            parts.append(f"{len(self.init)} keyword argument{'s' if len(self.init) != 1 else ''}")
        return ", ".join(parts)


def shown(name: str, value: Any) -> str:
    """A value as a problem line shows it: a secret hidden; a URL without its userinfo, query
    and fragment; the rest redacted (`factrail.core.redact`) and cut."""
    if name in SECRET_FIELDS or isinstance(value, SecretStr):
        secret = value.get_secret_value() if isinstance(value, SecretStr) else value
        return "''" if secret in ("", None) else HIDDEN
    text = masked(value if isinstance(value, str) else orjson_text(value))
    if len(text) > MAX_SHOWN:
        text = text[:MAX_SHOWN] + "…"
    return repr(text) if isinstance(value, str) else text


def shown_from_file(name: str, value: Any) -> str:
    """A value of the TOML file as a problem line shows it: a table or a list by its kind only
    (it may hold anything), a scalar as `shown` does."""
    if name in SECRET_FIELDS:
        return shown(name, value)
    if isinstance(value, dict):
        return "<a table>"
    if isinstance(value, list | tuple):
        return "<a list>"
    return shown(name, value)


def masked(text: str) -> str:
    """`text` with every URL's userinfo (to its last `@`), query and fragment hidden, then
    redacted."""
    from factrail.core.redact import redact  # only when a problem is told: it loads slowly

    text = _URL.sub(_masked_authority, text)
    if "://" in text:
        text = _URL_TAIL.sub(lambda m: m[0][0] + HIDDEN, text)
    return redact(text).text


def _masked_authority(match: re.Match[str]) -> str:
    authority = match["authority"]
    if "@" in authority:
        authority = HIDDEN + authority[authority.rindex("@") :]
    return match["scheme"] + authority


def orjson_text(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)


# -- the problems ---------------------------------------------------------------------------------


def value_problems(err: ValidationError, origins: Origins) -> list[str]:
    """One line per value pydantic refused."""
    lines: list[str] = []
    for item in err.errors():
        loc = str(item["loc"][0]) if item["loc"] else ""
        name = origins.field_of(loc)
        if item["type"] == "extra_forbidden":
            lines.append(f"{loc} is not a setting{_hint(loc, origins.fields)}")
            continue
        info = origins.fields.get(name)
        if info is None:
            lines.append(str(item["msg"]))
            continue
        error = (item.get("ctx") or {}).get("error")
        reason = f"{masked(str(error))}; " if item["type"] == "value_error" and error else ""
        what = f"{reason}{allowed(info, name)}"
        lines.append(f"{origins.describe(name, item.get('input'))} is not allowed: {what}")
    return lines


def unknown_names(env: Mapping[str, str], known: Collection[str]) -> list[str]:
    """A line for every variable that reads as a factrail name (`factrail_name`) but names no
    setting, with the closest known one; its value is never shown (it may be a secret)."""
    lines = []
    for name in sorted(env):
        if name in known:
            continue
        folded = factrail_name(name)
        if folded is None:
            continue
        if name.upper() in known:
            hint = f": did you mean {name.upper()}? (names are upper case)"
        else:
            hint = _hint(folded, known)
        lines.append(f"{name}={HIDDEN} is not a setting{hint}")
    return lines


def factrail_name(name: str) -> str | None:
    """`name` as a factrail name (NFKC, upper case, `-` as `_`, the prefix spelled right) when
    it reads as one: its first characters at least `PREFIX_LIKENESS` alike to `FACTRAIL_`."""
    folded = unicodedata.normalize("NFKC", name).strip().upper().replace("-", "_")
    head = folded[: len(ENV_PREFIX)]
    if head != ENV_PREFIX:
        likeness = difflib.SequenceMatcher(None, head, ENV_PREFIX).ratio()
        if likeness < PREFIX_LIKENESS:
            return None
    rest = folded.split("_", 1)[1] if "_" in head else folded[len(ENV_PREFIX) - 1 :]
    return ENV_PREFIX + rest


def _hint(name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if close:
        return f": did you mean {close[0]}?"
    return ": `factrail settings --markdown` lists them"


def read_config(
    path: str | None, fields: Collection[str], env_only: Collection[str]
) -> tuple[dict[str, Any], list[str]]:
    """The table of the TOML file at `path` (the `[factrail]` table, or the top level) and the
    problems with it: missing, unreadable, not TOML, or a key that names no file setting."""
    if path is None:
        return {}, []
    head = f"{CONFIG_ENV}={path!r}"
    if not path:
        return {}, [f"{head} is not allowed: the path of a TOML file (unset it to read none)"]
    try:
        data = tomllib.loads(_regular_file(path).decode("utf-8"))
    except FileNotFoundError:
        return {}, [f"{head} is not allowed: no such file; the path of a TOML file"]
    except OSError as err:
        return {}, [f"{head} is not allowed: {err.strerror or err}; a readable TOML file"]
    except UnicodeDecodeError:
        return {}, [f"{head} is not allowed: not UTF-8; a UTF-8 TOML file"]
    except tomllib.TOMLDecodeError as err:
        return {}, [f"{head} is not allowed: not TOML ({' '.join(str(err).split())})"]
    table: Any = data.get("factrail", data)
    lines = []
    if not isinstance(table, dict):
        return {}, [f"{path}: factrail is not allowed: a [factrail] table"]
    if table is not data:
        lines += [
            f"{path}: {key} is not allowed: settings go in the [factrail] table"
            for key in data
            if key != "factrail"
        ]
    settable = [f for f in fields if f not in env_only]
    for key in table:
        if key in env_only:
            env = ENV_PREFIX + key.upper()
            lines.append(f"{path}: {key} is not allowed: it is read from the environment ({env})")
        elif key not in fields:
            lines.append(f"{path}: {key} is not a setting{_hint(key, settable)}")
    good = {k: v for k, v in table.items() if k in fields and k not in env_only}
    return good, lines


def _regular_file(path: str) -> bytes:
    """The bytes of the regular file at `path`, opened without blocking (a FIFO, a device or a
    folder is an `OSError`, never a wait), at most `MAX_CONFIG_BYTES`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        data = os.read(fd, MAX_CONFIG_BYTES + 1)
        chunk = data
        while chunk and len(data) <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - len(data))
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise OSError(0, f"larger than {MAX_CONFIG_BYTES} bytes")
    return data


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback bind address: `localhost`, 127.0.0.0/8 or ::1."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def bind_problems(host: str, admin_key: str, described: str) -> list[str]:
    """A bind anyone else can reach needs an admin key of at least `MIN_ADMIN_KEY_CHARS`."""
    if is_loopback(host) or len(admin_key) >= MIN_ADMIN_KEY_CHARS:
        return []
    return [
        f"{described} is not allowed with --host {host} (not a loopback address): saved"
        f" outputs and session reports would answer anyone who can reach it; set"
        f" FACTRAIL_ADMIN_KEY to a random string of at least {MIN_ADMIN_KEY_CHARS} characters"
        " (openssl rand -hex 32), or bind 127.0.0.1"
    ]


CONFIG: ContextVar[Mapping[str, Any] | None] = ContextVar("factrail_settings_config", default=None)
"""The TOML file's table while one `Settings()` is being built (`read_config`)."""


class TomlSource(PydanticBaseSettingsSource):
    """The `[factrail]` table (or top level) of the TOML file named by `FACTRAILCONFIG`, as
    `Settings.__init__` read and checked it."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """One field's value from the file."""
        return (CONFIG.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(CONFIG.get() or {})
