"""Whether a key names a credential: the key is split into words (`_`, `-`, `.`, spaces and
camel case: `slackBotToken` → slack, bot, token; `X-Amz-Signature` → x, amz, signature) and
one word must be a credential's (`password`, `token`, `pat`, `jwt`, `cred`…, or one ending in
such a word: `dbpassword`, `apikey`), where that word may stand, and not followed by a word
that names something about the credential (`token_count`, `password_min_length`) nor preceded
by one that makes it something else (`max_tokens`, `cache_key`, `next_page_token`)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

Tier = Literal["password", "secret", "key"]
"""How much a slot's value must look like a credential: `password` takes words, `secret`
8+ chars that are not a name, `key` (a bare `*_KEY`) only random-looking values."""
Where = Literal["slot", "query", "pair"]
"""Where the key is written: a slot (`name: value`), a URL's query or fragment (`?key=…`),
or the name field of a key/value pair object (`{"key": "api_token", "value": …}`)."""

_TOKEN = re.compile(r"[A-Z]+(?![a-z])\d*|[A-Z]?[a-z0-9]+")
_DIGITS = "0123456789"


@lru_cache(maxsize=4096)
def key_words(name: str) -> tuple[str, ...]:
    """The words of a key, lower-cased, without trailing digits: split at every
    non-alphanumeric and at camel case, not at digits (`win32cred` is one word, `password2`
    is `password`)."""
    return tuple(w.lower().rstrip(_DIGITS) or w for w in _TOKEN.findall(name))


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PASSWORD = _words("password passwd passphrase passcode passkey pass pwd")
_SECRET = _words(
    """secret token credential credentials cred creds pat jwt auth authorization session
    sessionid sessid jsessionid phpsessid sid signature sig dsn apikey"""
)
_LAST_ONLY = _words("pass pwd cred creds pat jwt auth session sessid sid sig dsn code")
"""Short or common words that name a credential only as the key's last word (or followed by
a word for its encoding, `_NEUTRAL`): `github_pat`, `db_pass`, `basic_auth`; not `pass_fds`,
`auth_user`, `session_start`."""
_RANDOM_ONLY = _words("pat jwt sid")
"""Words common as other names (`pat` for a pattern, `sid` for an id) that name a credential
only when the value is random-looking, as a token is: the `key` tier."""
_WHOLE_ONLY = _words("sid sig")
"""Words that name a credential only as the whole key: `sid=`, `?sig=`; not `account_sid`
(a public Twilio id) or `utf_8_sig`."""
_NEUTRAL = _words("value str string b64 base64 data raw hex enc encoded plain plaintext")
_EMBEDDED = (
    "password", "passwd", "passphrase", "passcode", "secret", "token", "credential",
    "credentials", "signature", "sessionid", "sessid",
)  # fmt: skip
"""Words a run-together lower-case word may end in: `dbpassword`, `githubtoken`,
`clientsecret`, `jsessionid`."""
_EMBEDDED_TAILS = ("", "key", "value", "str", "string")
"""What may follow an embedded word in one word: `secretkey`, `tokenvalue`."""

_STRONG_KEY = _words(
    """api access private secret client encryption encrypt signing sign master auth app account
    license service webhook admin session jwt hmac cookie crypto aes consumer merchant"""
)
"""Words that make a `*_KEY` name a credential's (`ENCRYPTION_KEY`, `app_key`, `apiKey`);
after another word a `*_KEY` takes only random-looking values."""
_STRONG_KEY_ENDINGS = tuple(sorted(_STRONG_KEY))

_NOT_AFTER = _words(
    """id ids name names type types url uri urls endpoint file files path paths dir length len
    size count limit max min expiry expires expiration expire ttl field header env var label
    prefix suffix format hint policy usage budget provider mode kind source store manager
    location ref arn version algorithm alg scope scopes index enabled required regex pattern
    rotation created updated reset strength rule rules placeholder input help description
    title message error generator hash hashed fingerprint pub public timeout timeouts lifetime
    duration age jar domain secure samesite httponly backend engine factory class handler
    middleware serializer interval delay retries attempts number num state status cache log
    logs stats method methods exposure resolver getter loader callback hook hooks builder cls
    issuer audience claims lock"""
)
"""A word after the credential's that names something about it, not it (`token_count`,
`password_reset_url`, `secret_name`, `api_key_id`, `session_timeout`, `jwt_issuer`)."""
_NOT_BEFORE_KEY = _words(
    """public primary foreign sort partition cache page next prev previous continuation cursor
    pagination input output prompt completion bos eos pad unk mask sep cls special idempotency
    row column unique composite lookup dict map hash range registry ssh gpg pgp file object s3
    node item record dedupe group lock table i18n translation message storage redis routing
    shard bucket event list query search index order state data entity model field attr prop
    react sub parent"""
)
"""A word before `key`/`token` that makes it something else (`cache_key`, `eos_token`,
`primary_key`, `next_page_token`)."""
_COUNTING = _words("max min num total n count")
"""Words before the credential's that make the key a count (`max_tokens`, `num_passwords`)."""
_CODE_BEFORE = _words("auth authorization oauth")
"""`code` names a credential after these (`auth_code`, `authorizationCode`) or alone as a
URL parameter (`?code=`, OAuth's authorization code)."""


def _embedded(word: str) -> Tier | None:
    """`dbpassword`, `githubtoken`, `apikey`: a run-together word ending in a credential's."""
    for tail in _EMBEDDED_TAILS:
        if not word.endswith(tail):
            continue
        head = word[: len(word) - len(tail)]
        for ending in _EMBEDDED:
            if head.endswith(ending):
                return "password" if ending.startswith("pass") else "secret"
        if tail == "key" and head.endswith(_STRONG_KEY_ENDINGS):
            return "secret"
    return None


def _tier_of(words: tuple[str, ...], i: int, where: Where) -> Tier | None:
    """The tier `words[i]` gives the key, or None where it names no credential there."""
    word, before, after = words[i], words[:i], words[i + 1 :]
    if any(w in _NOT_AFTER for w in after) or any(w in _COUNTING for w in before):
        return None
    if word in _WHOLE_ONLY and len(words) != 1:
        return None
    if word in _LAST_ONLY and not all(w in _NEUTRAL or w.isdigit() for w in after):
        return None
    if word in ("key", "keys", "token") and before and before[-1] in _NOT_BEFORE_KEY:
        return None
    if "public" in before or "pub" in before:
        return None  # `publicKeyToken`, `pub_key`: what is published is no secret
    if word == "code":
        if before and before[-1] in _CODE_BEFORE:
            return "secret"
        return "key" if where == "query" and not before else None
    if word in ("key", "keys"):
        if not before:
            return "key" if where == "query" else None
        return "secret" if before[-1] in _STRONG_KEY else "key"
    if word in _RANDOM_ONLY:
        return "key"
    if word in _PASSWORD:
        return "password"
    if word in _SECRET:
        return "secret"
    return _embedded(word)


_RANK: dict[Tier, int] = {"password": 0, "secret": 1, "key": 2}


@lru_cache(maxsize=4096)
def credential_tier(name: str, where: Where = "slot") -> Tier | None:
    """The tier of a key named `name` as written, or None when it names no credential."""
    words = key_words(name)
    best: Tier | None = None
    for i in range(len(words)):
        tier = _tier_of(words, i, where)
        if tier is not None and (best is None or _RANK[tier] < _RANK[best]):
            best = tier
    return best
