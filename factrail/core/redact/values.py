"""Whether the value of a secret-named slot is a credential: not a placeholder, a template, a
masked value, a path, a number where a count is, or code naming another value."""

from __future__ import annotations

import re
from collections.abc import Callable


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NOT_SECRET_WORDS = _words(
    """true false null undefined none required optional string number enabled disabled yes no
    auto default include omit same-origin str text bytes any object boolean bool integer int
    unknown never void hidden visible nullable secretstr"""
)

_PLACEHOLDER_PARTS = _words(
    """your my the a an here api key keys secret secrets token password pass pwd passwd
    changeme change me this it in to for of production prod dev development local localhost
    test tests testing example examples sample dummy fake placeholder value xxx xxxx xxxxx foo
    bar baz qux default demo insert enter replace put goes not set none null nil empty redacted
    masked hidden secure insecure super access auth user username admin root db database app
    client string str todo tbd generated random new old real actual valid invalid some own
    abc abcd abcdef 123 1234 12345 123456 1234567 12345678 123456789 xyz private public
    service account personal mine env variable var config configured required optional
    stripe github openai anthropic aws azure google slack twilio here goes"""
)
"""Words a made-up value is built of (`your-api-key-here`, `dummy-key`, `changeme`): a value of
only these words, between `-`, `_` or `.`, is a placeholder and stays."""
_PLACEHOLDER_SPLIT = re.compile(r"[-_.:/@]+")
_VALUE_TEMPLATES = (
    "${",
    "{{",
    "#{",
    "%(",
    "process.env",
    "os.environ",
    "getenv",
    "env(",
    "secrets.",
)

_VALUE_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = r"(?:[a-z]{2,}\d*|\d+)"
_REFERENCE_NAME = re.compile(
    rf"_*(?:[a-z]+\d*(?:_{_WORD})+"  # user_password, access_token_2
    r"|[A-Z]+\d*(?:_[A-Z]{2,}\d*|_\d+)+"  # DEFAULT_PASSWORD
    r"|[a-z]{2,}(?:[A-Z][a-z]{2,})+\d{0,2}"  # hashedPassword, userPwd, toBase58
    r"|(?:[A-Z][a-z]{2,}\d*)+"  # SecretStr, AsyncSession, Uint8Array
    r")_*"
)
"""An identifier that reads as words (a variable, a constant, a type), not as key material:
`user_password`, `hashedPassword`, `SecretStr`. Random letters and digits seldom fit."""
_LOWER_WORD = re.compile(r"_*[a-z]+\d*_*")
_LOWER_WORDS = re.compile(r"_*[a-z]+\d*(?:_+[a-z]+\d*)+_*")
"""`user_password`, `find_file`, `db_pass2`: a name in lower-case words."""
_VALUE_REFERENCE = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+(?:\(\))?")
"""`config.secret_value`, `self.password`, `vault.toBase58()`: code naming a value."""
_DATA_CHAIN = re.compile(
    r"[$_]*[a-z]{2,}(?:_[a-z0-9]+)*"
    r"(?:\.[$_]*(?:[a-z]{2,}(?:_[a-z0-9]+)*|[A-Z]{2,}(?:_[A-Z0-9]+)*|(?:[A-Z][a-z]{2,})+))+"
    r"(?:\(\))?"
)
"""A dotted chain that names a value although written as data: a lower-case name, then
snake-case, constant or capitalised words (`settings.SECRET_KEY`, `contextvars.Token`)."""
_CAMEL_NAME = re.compile(r"_*[a-z]+[A-Z][A-Za-z0-9]*")
_RANDOM_SEGMENT = re.compile(r"(?=[^/]*[a-z])(?=[^/]*[A-Z])(?=[^/]*\d)[A-Za-z0-9+=_-]{12,}")
_FILE_NAME = re.compile(
    r"[\w.-]+\.(?:json|pem|key|crt|cer|p12|pfx|txt|ya?ml|env|cfg|conf|ini|toml|js|ts|py|rs|sh)"
)
"""`credentials.json`, `server.key`: where a credential is, not what it is."""
_PATH_SEGMENT = re.compile(
    r"[a-z0-9._@~,-]*|[A-Z][a-z0-9._@~,-]*|(?:[A-Z][a-z]+)+(?:[._-][a-z0-9]+)*"
)
"""A segment of a file path: lower case (`home`, `.config`, `app-1.2`), Capitalised or words in
camel case (`Users`, `MyProject`); never `+`, `=` or mixed case as in key material."""
_DOT_NAME = re.compile(r"[a-z0-9._-]{1,24}")
_FLAG_LIKE = re.compile(r"--[a-z][a-z0-9-]*(?:=\S*)?|-[A-Za-z]{1,2}|-[a-z]+")
_SIGNED_NUMBER = re.compile(r"[-+]?\d[\d.]*")
_FORMAT = re.compile(r"%[sdr](?![0-9A-Za-z])|\{\}")
"""A printf or `str.format` field (`%s`, `{}`), not a URL escape (`%2F`, `%DF`) nor `%s` inside
key material (`…%sK9…`)."""
_KEY_WORDS = re.compile(
    r"passw|passphrase|pwd|secret|token|key|auth|cred|session|cookie|sig|dsn", re.IGNORECASE
)
_WORDS_NAME = re.compile(r"[a-z]+(?:_[a-z]+)*|[A-Z]+(?:_[A-Z]+)*")
_NOT_SECRET_START = frozenset("{<?(")
"""What a value never starts with: a template, a placeholder, prose, a call."""
_VARIABLE = re.compile(
    r"\$[A-Za-z_{(0-9]|%[A-Za-z_]\w*%(?:[\\/]|\Z)|~(?:/|[a-z_][a-z0-9_-]*(?:/|\Z)|\Z)|\*{3}"
)
"""A value that is a reference or a mask, not data: `$VAR`, `${VAR}`, `$(cmd)`, `%VAR%`,
`%APPDATA%\\…`, `~`, `~/path`, `~user/…`, `***…`."""
_CODE_START = frozenset("*#@!")
"""In code, a value starting with one of these is a dereference, a comment, a decorator or a
negation; written as data (`db_password=#x!…`) it is the value."""


def is_placeholder_value(value: str) -> bool:
    """`changeme`, `your-api-key-here`, `xxxxxxxx`, `<…>`, `$VAR`, `${VAR}`, `{{ var }}`…"""
    lower = value.lower()
    if len(set(lower)) <= 2 or lower in _NOT_SECRET_WORDS:
        return True
    if any(t in lower for t in _VALUE_TEMPLATES) or lower.startswith(("[redacted", "[masked")):
        return True
    parts = [p for p in _PLACEHOLDER_SPLIT.split(lower) if p]
    return all(p in _PLACEHOLDER_PARTS or len(set(p)) == 1 for p in parts)


def looks_random(value: str) -> bool:
    """Key material rather than a name: 16+ chars of at least two of lower, upper and digits,
    and no path or file name."""
    if len(value) < 16 or (_VALUE_IDENTIFIER.fullmatch(value) and "_" in value.strip("_")):
        return False
    if "/" in value and _RANDOM_SEGMENT.search(value) is None:
        return False
    classes = (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
    )
    return classes >= 2


def _is_file_name(value: str) -> bool:
    """`credentials.json`, `id_rsa.pem`, `MyApp.env`: a file's name, in words."""
    return _FILE_NAME.fullmatch(value) is not None and _PATH_SEGMENT.fullmatch(value) is not None


def is_path(value: str) -> bool:
    """A file path (`/run/secrets/db`, `./certs/client.pem`, `.env`), not key material holding
    `/`: every segment reads as words, and there are two of them or the last is a file name."""
    rest = value.lstrip("./")
    segments = [s for s in rest.split("/") if s]
    if not segments or not all(_PATH_SEGMENT.fullmatch(s) for s in segments):
        return False
    if value.startswith(".") and len(segments) == 1 and _DOT_NAME.fullmatch(rest):
        return True  # `.env`, `./secrets`, `../shared`
    return len(segments) >= 2 or _is_file_name(segments[-1])


def _is_reference(value: str) -> bool:
    """A dotted chain naming a value even where it is written as data (`settings.SECRET_KEY`,
    `contextvars.Token`): a lower-case name, then words."""
    return _DATA_CHAIN.fullmatch(value) is not None


def _code_name(value: str) -> bool:
    """A bare name in code: a variable (`user_password`, `hashedPassword`) or a type
    (`SecretStr`, `Ed25519PrivateKey`)."""
    return (
        "_" in value.strip("_")
        or value.lstrip("_")[:1].isupper()
        or _CAMEL_NAME.fullmatch(value) is not None
    )


def slot_value_is_secret(
    value: str, tier: str, literal: bool, code: bool | Callable[[], bool] = True
) -> bool:
    """Whether the value of a named slot is a credential.

    `tier` is `password` (word-like values count: `PASSWORD=CorrectHorseBatteryStaple`),
    `secret` (api keys, tokens, secrets, sessions, signatures) or `key` (a bare `*_KEY`: only
    random-looking values). `literal` says the value is written as data (quoted, `NAME=value`
    as in a shell or a `.env` file, a URL parameter); `code` that, unquoted, it sits in code,
    where a bare or dotted name is a variable or a type (`user_password`, `self.token`,
    `SecretStr`). Elsewhere (`.env`, INI, YAML, a header) only lower-case words read as names.
    `code` may be a function, asked only when the value's form leaves the question open.
    """
    first = value[:1]
    if not first or first in _NOT_SECRET_START or _VARIABLE.match(value):
        return False
    asked: list[bool] = []

    def in_code() -> bool:
        """Whether the value sits in code."""
        if not asked:
            asked.append(code() if callable(code) else code)
        return asked[0]

    def name() -> bool:
        """Whether the value sits unquoted in code, where a name is a variable."""
        return not literal and in_code()

    if first in _CODE_START and (name() or (first == "@" and is_path(value[1:] or "."))):
        return False  # `*ptr`, `# comment`, `@decorator`, `!flag`; `@./body.json` (a file)
    if first == "=" and (_VALUE_IDENTIFIER.fullmatch(value[1:].rstrip(":")) and name()):
        return False  # `token==other`: a comparison
    if first in "-+" and (_FLAG_LIKE.fullmatch(value) or _SIGNED_NUMBER.fullmatch(value)):
        return False  # `--password --verbose`, `-p`, `-1`
    if len(value) < (6 if tier == "password" else 8):
        return False
    if is_placeholder_value(value) or "://" in value or _is_file_name(value):
        return False
    if value[:4].lower() == "urn:":  # a URN (`urn:ietf:params:oauth:token-type:jwt`): a name
        return False
    if _FORMAT.search(value) and in_code():
        return False  # `token = "uint_%d" % n`: a format string
    if first in "/." and is_path(value):
        return False
    if _VALUE_REFERENCE.fullmatch(value) and (tier == "key" or _is_reference(value) or name()):
        return False
    if tier == "key":
        return looks_random(value) and not (_code_name(value) and name())
    if value.isdigit():
        return tier == "password"
    if _VALUE_IDENTIFIER.fullmatch(value) is None:
        return True
    # A bare identifier. One naming a credential (`"authorization"`, `hashedPassword`) is a
    # name; written as data any other is the value. Unquoted, lower-case words are names
    # (`user_password`), but a lone one counts in a password slot (`password: petpass`); in
    # code so are camel-case, capitalised and constant names.
    bare = value.strip("_")
    if _KEY_WORDS.search(bare) and (_WORDS_NAME.fullmatch(bare) or _REFERENCE_NAME.fullmatch(bare)):
        return False
    if literal:
        return True
    if _LOWER_WORD.fullmatch(value):
        return tier == "password"
    if _LOWER_WORDS.fullmatch(value):
        return False
    return not (_code_name(value) and name())
