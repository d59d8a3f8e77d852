"""Credential redaction for everything that leaves the process or reaches disk.

`redact` replaces known values, provider key families (gitleaks' default rules for what a coding
session holds: cloud, forge, registry, chat, payment and AI keys, PEM/PuTTY/age keys, JWTs,
webhook URLs), auth-scheme values, URL passwords, `curl -u` passwords, named secret slots
(`PASSWORD=`, `"api_key": …`, `DB_PASS:`, `*_KEY=`) and secret CLI flags with
`[REDACTED:<label>]`, counting each replacement per label. Placeholders (`<your key>`, `xxx`,
`${TOKEN}`, `changeme`, `your-api-key-here`) and code naming a value (`os.environ["API_KEY"]`,
`password = user_password`) stay; docs/redaction.md has the table and what is not caught.

Every pattern is compiled once and skipped outright when its literal anchor is absent (one pass
finds the anchors), because this runs over every saved output (megabytes) and every judge
request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ahocorasick import Automaton

from factrail.core.kernels import active

_K = active()


class Redacted(NamedTuple):
    """Redacted text, the number of replacements and their count per label."""

    text: str
    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose
    families: dict[str, int]


class RedactionCounts(NamedTuple):
    """Replacement counts of a redacted JSON value, in total and per label."""

    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose
    families: dict[str, int]


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    """Literals one of which must occur in the text for the pattern to match at all."""
    any_case: re.Pattern[str] | None = None
    """Set for case-insensitive families: then `pattern` (lower-case) and the anchors are matched
    over the lower-cased text, and this one over text whose lower-casing changes its length."""
    keeps_label: bool = False
    """Group 1 is a label that stays; only the value, group 2, is replaced."""


def _standalone(literal: str, width: int, before: str = r"\w") -> str:
    """`literal` (matching `width` chars) not preceded by a char of class `before`. The check is
    a lookbehind placed after the literal so that the regex engine can scan for the literal; a
    leading lookbehind or `\\b` makes it try every offset of the text."""
    return f"{literal}(?<!{before}.{{{width}}})"


_SK_BEFORE = r"[A-Za-z0-9-]"
"""Keys of the `sk-` families stand alone: `task-…` or `desk-ant-…` is not a key (§9.16)."""


def _family(name: str, regex: str, *anchors: str, flags: int = 0, label: bool = False) -> _Family:
    return _Family(
        name,
        re.compile(regex, flags & ~re.IGNORECASE),
        anchors,
        re.compile(regex, flags) if flags & re.IGNORECASE else None,
        keeps_label=label,
    )


_B64 = r"[A-Za-z0-9+/_-]"
"""A char that may precede a prefix inside base64/base64url text, where it is not a key."""


def _prefixed(name: str, literal: str, body: str, before: str = _B64) -> _Family:
    """A key that is `literal` (a plain string, regex-escaped here) then `body`, standing alone."""
    return _family(name, _standalone(re.escape(literal), len(literal), before) + body, literal)


_FAMILIES: tuple[_Family, ...] = (
    _family(
        "private-key",
        r"-----BEGIN ([A-Z0-9 ]{0,40})PRIVATE KEY((?: BLOCK)?)-----"
        r".*?(?:-----END \1PRIVATE KEY\2-----|\Z)",
        "-----BEGIN ",
        flags=re.DOTALL,
    ),
    _family(
        "private-key",
        r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:[ \t]*[0-9a-fA-F]+|\Z)",
        "PuTTY-User-Key-File-",
        flags=re.DOTALL,
    ),
    _prefixed("private-key", "AGE-SECRET-KEY-1", r"[02-9AC-HJ-NP-Z]{40,}"),
    _family("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyJ"),
    _prefixed("grafana", "eyJrIjoi", r"[A-Za-z0-9]{40,}={0,3}"),
    _family("sk-ant", _standalone("sk-ant-", 7, _SK_BEFORE) + r"[A-Za-z0-9_-]{8,}", "sk-ant-"),
    _family("sk-proj", _standalone("sk-proj-", 8, _SK_BEFORE) + r"[A-Za-z0-9_-]{20,}", "sk-proj-"),
    _family("sk-or-v1", _standalone("sk-or-v1-", 9, _SK_BEFORE) + r"[A-Za-z0-9]{30,}", "sk-or-v1-"),
    _family(
        "sk", _standalone("sk-", 3, _SK_BEFORE) + r"(?:svcacct-|admin-)?[A-Za-z0-9_.-]{16,}", "sk-"
    ),
    _family(
        "stripe",
        _standalone("[sr]k_(?:live|test|prod)_", 8) + r"[A-Za-z0-9]{16,}",
        "_live_",
        "_test_",
        "_prod_",
    ),
    _prefixed("stripe", "whsec_", r"[A-Za-z0-9]{24,}"),
    _family("github-pat", r"github_pat_[A-Za-z0-9_]{16,}", "github_pat_"),
    _family(
        "gh-token",
        _standalone("gh[pousr]_", 4) + r"[A-Za-z0-9]{16,}",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
    ),
    _family("glpat", r"glpat-[A-Za-z0-9_-]{20,}", "glpat-"),
    *(
        _prefixed("gitlab", f"gl{kind}-", r"[0-9a-zA-Z_-]{20,}")
        for kind in ("cbt", "dt", "ffct", "ft", "imt", "agent", "oas", "ptt", "rt", "soat")
    ),
    _prefixed("atlassian", "ATATT3", r"[A-Za-z0-9_=-]{60,}"),
    _prefixed("atlassian", "ATBB", r"[A-Za-z0-9_=.-]{24,}"),
    _family("hf", _standalone("hf_", 3) + r"[A-Za-z0-9]{20,}", "hf_"),
    _prefixed("hf", "api_org_", r"[A-Za-z]{30,}"),
    _family("npm", _standalone("npm_", 4) + r"[A-Za-z0-9]{20,}", "npm_"),
    _prefixed("pypi", "pypi-AgEIcHlwaS5vcmc", r"[\w-]{30,}"),
    _prefixed("rubygems", "rubygems_", r"[a-f0-9]{40,}"),
    _prefixed("nuget", "oy2", r"[a-z0-9]{43}(?![A-Za-z0-9])"),
    _prefixed("docker", "dckr_pat_", r"[A-Za-z0-9_-]{20,}"),
    _prefixed("docker", "dckr_oat_", r"[A-Za-z0-9_-]{20,}"),
    _family("nia", _standalone("nk_", 3) + r"[A-Za-z0-9]{20,}", "nk_"),
    _family("google-api", r"AIza[0-9A-Za-z_-]{30,}", "AIza"),
    _prefixed("google-oauth", "GOCSPX-", r"[A-Za-z0-9_-]{20,}"),
    _prefixed("google-oauth", "ya29.", r"[0-9A-Za-z_-]{30,}"),
    _family("slack", _standalone("xox[abeoprs]-", 5) + r"[0-9A-Za-z-]{10,}", "xox"),
    _prefixed("slack", "xapp-", r"\d-[A-Za-z0-9-]{20,}"),
    _family(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
        "hooks.slack.com/",
    ),
    _family(
        "discord-webhook",
        r"discord(?:app)?\.com/api/webhooks/\d{5,}/[A-Za-z0-9_-]{20,}",
        "/api/webhooks/",
    ),
    _family(
        "aws-akia",
        _standalone("A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA)", 4) + r"[0-9A-Z]{16}\b",
        *("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA"),
    ),
    _family(
        "aws-secret",
        r"((?:aws_secret_access_key|secret access key)[\"'`\]\s=:]+)([A-Za-z0-9/+=]{30,})",
        "aws_secret_access_key",
        "secret access key",
        flags=re.IGNORECASE,
        label=True,
    ),
    _family(
        "azure-storage",
        r"((?:account|sharedaccess)key[ \t]*=[ \t]*)([A-Za-z0-9+/]{20,}={0,2})",
        "accountkey",
        "sharedaccesskey",
        flags=re.IGNORECASE,
        label=True,
    ),
    _family("azure-sas", r"([?&;]sig=)([A-Za-z0-9%+/]{20,}(?:=|%3[dD]){0,2})", "sig=", label=True),
    _family("azure-ad", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", "Q~"),
    _prefixed("alibaba", "LTAI", r"[A-Za-z0-9]{20}(?![A-Za-z0-9])"),
    *(_prefixed("digitalocean", f"do{k}_v1_", r"[a-f0-9]{64}") for k in "opr"),
    _prefixed("vault", "hvs.", r"[\w-]{24,}"),
    _prefixed("vault", "hvb.", r"[\w-]{24,}"),
    _prefixed("databricks", "dapi", r"[a-f0-9]{32}(?:-\d)?(?![A-Za-z0-9])"),
    _prefixed("heroku", "HRKU-", r"[0-9A-Za-z_-]{40,}"),
    _prefixed("linear", "lin_api_", r"[A-Za-z0-9]{32,}"),
    _prefixed("linear", "lin_oauth_", r"[A-Za-z0-9]{32,}"),
    _prefixed("notion", "ntn_", r"[A-Za-z0-9]{40,}"),
    _prefixed("notion", "secret_", r"[A-Za-z0-9]{43}(?![A-Za-z0-9_])"),
    *(_prefixed("doppler", f"dp.{k}.", r"[A-Za-z0-9_-]{40,}") for k in ("pt", "st", "sa", "ct")),
    _prefixed("pulumi", "pul-", r"[a-f0-9]{40}(?![A-Za-z0-9])"),
    _family("terraform", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", ".atlasv1."),
    _prefixed("postman", "PMAK-", r"[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    *(_prefixed("newrelic", f"NR{k}-", r"[A-Za-z0-9]{19,}") for k in ("AK", "II", "JS", "AA")),
    _prefixed("grafana", "glc_", r"[A-Za-z0-9+/]{32,}={0,3}"),
    _prefixed("grafana", "glsa_", r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    *(_prefixed("shopify", f"shp{k}_", r"[a-fA-F0-9]{32}") for k in ("at", "ca", "pa", "ss")),
    _prefixed("square", "sq0atp-", r"[\w-]{22,}"),
    _prefixed("square", "sq0csp-", r"[\w-]{40,}"),
    _prefixed("square", "EAAA", r"[\w-]{60,}"),
    _family(
        "paypal",
        r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}",
        "access_token$",
    ),
    _prefixed("mailgun", "key-", r"[a-f0-9]{32}(?![A-Za-z0-9])", r"[A-Za-z0-9_-]"),
    _family(
        "mailchimp",
        r"[0-9a-f]{32}-us\d{1,2}(?![A-Za-z0-9])",
        *(f"-us{d}" for d in range(1, 10)),
    ),
    _family("sentry", r"(://)([0-9a-f]{32}(?::[0-9a-f]{32})?)(?=@)", "://", label=True),
    _prefixed("sentry", "sntrys_", r"[A-Za-z0-9+/=_]{40,}"),
    _prefixed("sentry", "sntryu_", r"[a-f0-9]{64}"),
    _prefixed("twilio", "SK", r"[0-9a-fA-F]{32}(?![A-Za-z0-9])", r"[A-Za-z0-9]"),
    _prefixed("replicate", "r8_", r"[A-Za-z0-9]{37}(?![A-Za-z0-9])"),
    _prefixed("supabase", "sbp_", r"[a-f0-9]{40}(?![A-Za-z0-9])"),
    _prefixed("flyio", "fo1_", r"[\w-]{40,}"),
    _prefixed("flyio", "fm2_", r"[A-Za-z0-9+/]{100,}={0,3}"),
    _family("nostr-nsec", _standalone("nsec1", 5) + r"[02-9ac-hj-np-z]{20,}", "nsec1"),
    _family("pplx", r"pplx-[A-Za-z0-9]{20,}", "pplx-"),
    _family("xai", r"xai-[A-Za-z0-9]{20,}", "xai-"),
    _family("groq", r"gsk_[A-Za-z0-9]{20,}", "gsk_"),
    # a dozen alphanumerics first: `fish_complete_directories` is a shell function
    _family("sakana", r"fish_(?=[A-Za-z0-9]{12})[A-Za-z0-9_]{20,}", "fish_"),
    _family("keenable", r"keen_(?=[A-Za-z0-9]{12})[A-Za-z0-9_]{20,}", "keen_"),
    _family("sendgrid", r"SG\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", "SG."),
    _family("telegram", r"\d(?<!\w\d)\d{7,11}:AA[A-Za-z0-9_-]{30,}", ":AA"),
)

_PROVIDER_PREFIX = re.compile(r"^[A-Za-z]+[_-](?:[a-z0-9]+-)?")
_REPEATED_TAIL = re.compile(r"^(?:[A-Za-z0-9]{1,10}[_-])*(.)\1{7,}\Z|[/.](.)\2{7,}\Z")
"""`sk-xxxxxxxx`, `…/XXXXXXXXXXXXXXXXXXXXXXXX`: a stand-in that ends in one repeated char."""

_TOKEN_SCHEME = _standalone("Token", 5, r"[\w-]")
"""`SPL-Token …` is a name, not the `Token` scheme."""
_AUTH = re.compile(
    rf"({_standalone('Bearer', 6)}|{_standalone('Basic', 5)}|{_TOKEN_SCHEME})"
    r"([ \t]{1,4})([A-Za-z0-9._~+/=-]{8,})"
)
_URL_CREDENTIALS = re.compile(r"://([^\s/@:\"'<>`]{0,64}):([^\s@\"'<>`]{1,128})@")
"""`scheme://user:password@`: the user may be empty (`redis://:pw@host`) and the password may
hold `/` (raw base64), which `_url_password_is_secret` tells from a port and a path."""
_URL_SCHEME = re.compile(r"\b[a-z][a-z0-9+.-]{1,15}\Z", re.IGNORECASE)
"""A URL scheme ending right before `://` (searched backwards from each `://` match)."""
_PORT_THEN_PATH = re.compile(r"(?:[^/]*:)?\d*\]?")
"""What precedes the first `/` of a `host:8080/path@x` "password": a port, not a secret."""

_CURL_USER = re.compile(
    r"curl\b(?:[^\n]|\\\n){0,400}?[ \t](?:-u|--user)(?:=|[ \t]{1,4})"
    r"([\"']?)([^\s:\"']{1,64}):([^\s\"']{1,128})\1(?=\s|\Z)"
)
"""`curl … -u user:password` (gitleaks' curl-auth-user): the password, group 3, goes."""

_SLOT_VALUE = r"[^\s\"'`<>{}()\[\],;\\]{8,}"
_CLI_FLAG = re.compile(
    r"--([A-Za-z0-9-]{1,52}+)(?:=|[ \t]{1,3})[\"']?"  # possessive: no backtracking on the name
    rf"({_SLOT_VALUE})"
)
_FLAG_KEYWORD = re.compile(r"api-?key|secret|token|passw(?:or)?d", re.IGNORECASE)
"""A secret flag's name holds one of these (within 30 chars before and 20 after)."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NOT_SECRET_WORDS = _words(
    """true false null undefined none required optional string number enabled disabled yes no
    auto default include omit same-origin str text bytes any object boolean bool integer int
    unknown never void hidden visible nullable secretstr"""
)

_SLOT_VALUE_CHARS = r"[^\s\"'`<>{}()\[\],;\\&|]"
_ENDS_A_KEY = ('"', "'", " ", "\t", ":", "=", "\\")
"""What may follow a key name (a quote, a space, the separator): `pass` and `pwd` stand alone."""
_SLOT_KEYWORDS = (
    (
        ("passw", "passphrase", *(f"pass{c}" for c in _ENDS_A_KEY)),
        r"pass(?:w(?:or)?d|phrase|(?<![a-z]pass)(?![a-z]))",
    ),
    (tuple(f"pwd{c}" for c in _ENDS_A_KEY), r"pwd(?<![a-z]pwd)(?![a-z])"),
    (("secret",), r"secret"),
    (("token",), r"token"),
    (
        ("_key", "-key", "apikey", "privatekey", "accesskey"),
        r"key(?:(?<=[a-z0-9][_-]key)|(?<=apikey)|(?<=privatekey)|(?<=accesskey))",
    ),
    (
        ("authorization", "auth_", "auth-", *(f"auth{c}" for c in _ENDS_A_KEY)),
        r"auth(?:orization|(?<![a-z]auth)(?![a-z]))",
    ),
    (("credential",), r"credentials?"),
)
"""A slot's keyword (`PASSWORD`, `DB_PASS`, `PWD`, `x-api-key`, `STRIPE_KEY`, `AUTH`) and the
lower-case literals one of which its match holds: one pattern each, each run only on a text
holding one of its literals (found in the same pass as the case-insensitive families'), since a
pattern starting with a literal is scanned for far faster than an alternation."""
_SLOT_REST = (
    r"(?P<suffix>[\w-]{0,24}?)"
    r"(?P<sep>(?:\\?[\"']\]?)?[ \t]{0,3}(?::=|=>|[:=])[ \t]{0,3}"
    r"(?:(?:bearer|basic|token|digest)[ \t]+)?)"
    r"(?P<quote>\\?[\"'`])?"
    rf"(?P<value>[^\s\"'`<>{{}}()\[\],;\\&|=:]{_SLOT_VALUE_CHARS}{{3,}})"
)
_NAMED_SLOTS = tuple(
    (frozenset(anchors), re.compile(f"(?P<kw>{kw}){_SLOT_REST}")) for anchors, kw in _SLOT_KEYWORDS
)
"""Matched over the lower-cased text (a case-insensitive pattern is far slower)."""
_NAMED_SLOTS_ANY_CASE = tuple(
    (frozenset(anchors), re.compile(f"(?P<kw>{kw}){_SLOT_REST}", re.IGNORECASE))
    for anchors, kw in _SLOT_KEYWORDS
)
"""For the rare text whose lower-casing changes its length (`İ`), so offsets would not map."""
SlotPatterns = tuple[tuple[frozenset[str], re.Pattern[str]], ...]
_SLOT_ANCHORS = frozenset(a for anchors, _ in _SLOT_KEYWORDS for a in anchors)

_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase"})
_STRONG_KEY_WORDS = re.compile(
    r"(?:^|[_.-])(?:api|access|private|secret|client|encryption|encrypt|signing|sign|master|"
    r"auth|app|account|license|service|webhook|admin|session|jwt|hmac|cookie|crypto|aes|"
    r"consumer|merchant)[_.-]?$"
)
"""Words that make a bare `*_KEY` name a credential's (`ENCRYPTION_KEY`, `app_key`, `apikey`)."""
_NOT_CREDENTIAL_NAME = re.compile(
    r"[_.-](?:id|ids|name|names|type|types|url|uri|urls|endpoint|file|files|path|paths|dir|"
    r"length|len|size|count|limit|max|min|expiry|expires|expiration|expire|ttl|field|header|"
    r"env|var|label|prefix|suffix|format|hint|policy|usage|budget|provider|mode|kind|source|"
    r"store|manager|location|ref|arn|version|algorithm|alg|scope|scopes|index|enabled|"
    r"required|regex|pattern|rotation|created|updated|reset|strength|rule|rules|placeholder|"
    r"input|help|description|title|message|error|generator|hash|hashed|fingerprint|pub|"
    r"public)(?=$|[_.-])"
)
"""A part after the keyword that names something about a credential, not the credential
(`token_count`, `password_reset_url`, `secret_name`, `api_key_id`)."""
_NOT_CREDENTIAL_PREFIX = re.compile(
    r"(?:^|[_.-])(?:public|primary|foreign|sort|partition|cache|page|next|prev|previous|"
    r"continuation|cursor|pagination|max|min|num|total|input|output|prompt|completion|bos|"
    r"eos|pad|unk|mask|sep|cls|special|idempotency|row|column|unique|composite|lookup|dict|"
    r"map|hash|range|registry|ssh|gpg|pgp|public[_.-]?key|file|object|s3|node|item|record|"
    r"dedupe|group|lock|table|i18n|translation|message|storage|redis|routing|shard|bucket|"
    r"event|list|query|search|index|order|state|data|entity|model|field|attr|prop|react|sub|"
    r"parent)[_.-]?(?:key|token|keys|tokens)$"
)
"""Key names for what is not a credential although it ends in `key`/`token` (`cache_key`,
`next_page_token`, `eos_token`, `primary_key`)."""

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
_VALUE_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VALUE_REFERENCE = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+(?:\(\))?")
"""`config.secret_value`, `self.password`, `vault.toBase58()`: code naming a value."""
_PATH_VALUE = re.compile(r"(?:/[\w.@+~:=,-]*)+")
_FILE_NAME = re.compile(
    r"[\w.-]+\.(?:json|pem|key|crt|cer|p12|pfx|txt|ya?ml|env|cfg|conf|ini|toml|js|ts|py|rs|sh)"
)
"""`credentials.json`, `server.key`: where a credential is, not what it is."""
_RANDOM_SEGMENT = re.compile(r"(?=[^/]*[a-z])(?=[^/]*[A-Z])(?=[^/]*\d)[A-Za-z0-9+=_-]{12,}")
_KEY_WORDS = re.compile(r"pwd|secret|token|key|auth|cred", re.IGNORECASE)
_CAMEL_REFERENCE = re.compile(r"[a-z]+[A-Z][A-Za-z0-9]*")
_WORDS_NAME = re.compile(r"[a-z]+(?:_[a-z]+)*|[A-Z]+(?:_[A-Z]+)*")
_VALUE_TEMPLATES = ("${", "{{", "%(", "process.env", "os.environ", "getenv", "env(", "secrets.")


def _is_placeholder_value(value: str) -> bool:
    """`changeme`, `your-api-key-here`, `xxxxxxxx`, `<…>`, `$VAR`, `${VAR}`, `{{ var }}`…"""
    lower = value.lower()
    if len(set(lower)) <= 2 or lower in _NOT_SECRET_WORDS:
        return True
    if any(t in lower for t in _VALUE_TEMPLATES) or lower.startswith(("[redacted", "[masked")):
        return True
    parts = [p for p in _PLACEHOLDER_SPLIT.split(lower) if p]
    return all(p in _PLACEHOLDER_PARTS or len(set(p)) == 1 for p in parts)


def _looks_random(value: str) -> bool:
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


def _slot_value_is_secret(value: str, tier: str, literal: bool) -> bool:
    """Whether the value of a named slot is a credential.

    `tier` is `password` (word-like values count: `PASSWORD=CorrectHorseBatteryStaple`),
    `secret` (api keys, tokens, secrets) or `key` (a bare `*_KEY`: only random-looking values).
    `literal` says the value is written as data (quoted, or `NAME=value` as in a shell or a
    `.env` file) rather than as code naming another value (`password = user_password`).
    """
    if len(value) < (6 if tier == "password" else 8) or value[0] in "$%~.{<*#@!?(-+":
        return False
    if _is_placeholder_value(value) or "://" in value or _FILE_NAME.fullmatch(value):
        return False
    if value[0] == "/":  # a path, unless a segment reads as key material (base64 with `/`)
        return _PATH_VALUE.fullmatch(value) is None or _RANDOM_SEGMENT.search(value) is not None
    if _VALUE_REFERENCE.fullmatch(value):
        return False
    if tier == "key":
        return _looks_random(value)
    if value.isdigit():
        return tier == "password" and literal
    if _VALUE_IDENTIFIER.fullmatch(value) is None:
        return True
    # A bare word: data when quoted or in `NAME=value`; in code, a variable unless it reads
    # as a password would (no `_` joining words, no camelCase, no credential word in it).
    if literal:  # data, unless it names a credential (`"authorization"`, `'api_key'`)
        return not (_KEY_WORDS.search(value) and _WORDS_NAME.fullmatch(value))
    if "_" in value.strip("_") or _CAMEL_REFERENCE.fullmatch(value) is not None:
        return False  # `user_password`, `hashedPassword`: a variable
    if value.lstrip("_")[:1].isupper():
        return False  # `password: SecretStr`, `password: Annotated[…]`: a type
    if tier == "password":
        return True  # `password: petpass` (YAML)
    return any(c.isdigit() for c in value) and not _KEY_WORDS.search(value)


def _slot_tier(kw: str, name: str, suffix: str) -> str | None:
    """The tier of a named slot from its keyword, full key name and what follows the keyword
    in it, or None for a name that is not a credential's (`token_count`, `cache_key`)."""
    if _NOT_CREDENTIAL_NAME.search(suffix) or _NOT_CREDENTIAL_PREFIX.search(name):
        return None
    if kw in _PASSWORD_WORDS or kw.startswith("passw"):
        return "password"
    if kw == "key":
        prefix = name[: -len("key")] if name.endswith("key") else name
        return "secret" if _STRONG_KEY_WORDS.search(prefix) else "key"
    return "secret"


_SUFFIX_OK = ("", "key", "keys", "token", "secret", "value", "str", "string", "b64", "base64")


def _key_name(text: str, start: int, end: int) -> str:
    """The whole key name around the keyword at `start` (`DB_PASSWORD`, `x-api-key`), as
    written."""
    begin = start
    while (
        begin > 0 and start - begin < 60 and (text[begin - 1].isalnum() or text[begin - 1] in "_.-")
    ):
        begin -= 1
    return text[begin:end].lstrip("._-")


def _slot_matches(scan: str, patterns: SlotPatterns, present: set[str]) -> list[re.Match[str]]:
    """The slot matches in `scan` (lower-cased unless `patterns` ignore case) of the patterns
    one of whose literals is `present`, in text order."""
    found = [
        m for anchors, p in patterns if not anchors.isdisjoint(present) for m in p.finditer(scan)
    ]
    if len(found) > 1:
        found.sort(key=lambda m: m.start())
    return found


def _named_slots(
    text: str, scan: str, patterns: SlotPatterns, present: set[str], tally: dict[str, int]
) -> str:
    """Replace the credential values of `name: value`, `NAME=value`, `"name": "value"` slots."""
    marker = _marker("named")
    pieces: list[str] = []
    last = 0
    for m in _slot_matches(scan, patterns, present):
        suffix = m.group("suffix")
        if suffix and suffix[0] not in "_.-" and suffix.lower() not in _SUFFIX_OK:
            continue
        name = _key_name(text, m.start(), m.end("suffix"))
        tier = _slot_tier(m.group("kw").lower(), name.lower(), suffix.lower())
        if tier is None:
            continue
        start, end = m.span("value")
        quote = m.group("quote")
        sep = m.group("sep")
        kw = m.group("kw").lower()
        if kw in ("pass", "pwd") and (
            suffix or (name == kw and not sep.startswith(("'", '"', "\\")))
        ):
            continue  # `First pass: x`, `pass_fds: x`; unlike `PASS=`, `db_pass:`, `"pass":`
        if not quote and text.startswith("(", end):
            continue  # `token = b64encode(…)`: a call
        if quote and tier == "password":  # a quoted password may hold a few spaces
            close = text.find(quote[-1], end, end + 64)
            if close > end and "\n" not in text[end:close] and text.count(" ", end, close) <= 4:
                end = close
        literal = bool(quote) or (sep.strip() in ("=", ":") and name.isupper())
        if start < last or not _slot_value_is_secret(text[start:end], tier, literal):
            continue
        pieces += (text[last:start], marker)
        last = end
        tally["named"] = tally.get("named", 0) + 1
    return "".join((*pieces, text[last:])) if pieces else text


FAMILY_LABELS: tuple[str, ...] = tuple(
    dict.fromkeys(
        ("known", *(f.name for f in _FAMILIES), "bearer", "url-password", "curl-user", "named")
    )
)
"""Every label `redact` can count: a bounded set, fit for a metric label."""


def _marker(label: str) -> str:
    return f"[REDACTED:{label}]"


def _is_placeholder(body: str) -> bool:
    """`sk-xxxxxxxx…`-style stand-ins: nothing, or one repeated character, after the prefix."""
    rest = _PROVIDER_PREFIX.sub("", body, count=1)
    return len(set(rest)) <= 1 or _REPEATED_TAIL.search(body) is not None


Replace = Callable[[str, re.Match[str]], str | None]
"""The replacement of a match (positions taken in `text`), or None to leave it as it is."""


def _sub(
    pattern: re.Pattern[str],
    text: str,
    replace: Replace,
    label: str,
    tally: dict[str, int],
    scan: str | None = None,
) -> str:
    """Replace the matches of `pattern` in `scan` (same offsets as `text`, default `text`)."""
    pieces: list[str] = []
    last = 0
    for m in pattern.finditer(text if scan is None else scan):
        new = replace(text, m)
        if new is not None:
            pieces += (text[last : m.start()], new)
            last = m.end()
            tally[label] = tally.get(label, 0) + 1
    return "".join((*pieces, text[last:])) if pieces else text


def _value_replacer(group: int, is_secret: Callable[[str], bool], label: str) -> Replace:
    """Keep what precedes `group`, replace the group with the marker when `is_secret`."""
    marker = _marker(label)

    def replace(text: str, m: re.Match[str]) -> str | None:
        start, end = m.span(group)
        if not is_secret(text[start:end]):
            return None
        return text[m.start() : start] + marker + text[end : m.end()]

    return replace


def _url_is_credential(text: str, m: re.Match[str]) -> bool:
    start = m.start()
    return _URL_SCHEME.search(text, max(0, start - 16), start) is not None


def _url_password_is_secret(password: str) -> bool:
    """A URL password unless a placeholder, a masked value or (with a `/`) a port and a path:
    `host:8080/users/x@y.z` is no `user:password@`."""
    if "[REDACTED" in password or password[0] in "$%<{[*" or _is_placeholder_value(password):
        return False
    if "/" in password:
        head = password.split("/", 1)[0]
        return not (_PORT_THEN_PATH.fullmatch(head) or password.endswith("/"))
    return True


def _url_replacer() -> Replace:
    password = _value_replacer(2, _url_password_is_secret, "url-password")

    def replace(text: str, m: re.Match[str]) -> str | None:
        if "[REDACTED" in m.group(1) or not _url_is_credential(text, m):
            return None
        return password(text, m)

    return replace


def _curl_password_is_secret(password: str) -> bool:
    return password[0] not in "$%<{[*" and not _is_placeholder_value(password)


def _family_replacer(family: _Family) -> Replace:
    if family.keeps_label:
        return _value_replacer(2, lambda v: not _is_placeholder(v), family.name)
    marker = _marker(family.name)
    return lambda text, m: None if _is_placeholder(text[m.start() : m.end()]) else marker


def _auth_value_is_secret(value: str) -> bool:
    """An auth-scheme value is a credential unless it reads as a word (`Bearer authentication`,
    `Token based`, `SPL-Token Command-line`): all ASCII letters (words may be joined by `-`),
    and either short or in one ordinary case."""
    value = value.rstrip(".,;:")  # `HTTP Basic authentication.`
    if ("-" in value or "_" in value) and value.isascii():  # `Command-line`, `access_token`
        parts = value.replace("_", "-").split("-")
        return not all(p.isalpha() and (p.islower() or p.istitle()) for p in parts)
    if not (value.isascii() and value.isalpha()):
        return True
    return len(value) > 24 or not (value.islower() or value.istitle() or len(value) <= 16)


_AUTH_REPLACER = _value_replacer(3, _auth_value_is_secret, "bearer")
_CURL_REPLACER = _value_replacer(3, _curl_password_is_secret, "curl-user")


def _flag_replacer(text: str, m: re.Match[str]) -> str | None:
    """A `--…token…` flag's value, when the name holds a keyword at the allowed distances, as a
    word of its own (`--tokenizer` is no token), and names no credential's attribute
    (`--secret-name`)."""
    name = m.group(1)
    hit = _FLAG_KEYWORD.search(name)
    if hit is None or hit.start() > 30 or len(name) - hit.end() > 20:
        return None
    rest = name[hit.end() :].lower()
    if (rest and rest[0] != "-") or _NOT_CREDENTIAL_NAME.search(rest):
        return None
    start, end = m.span(2)
    tier = "password" if hit.group().lower().startswith("passw") else "secret"
    if not _slot_value_is_secret(text[start:end], tier, literal=True):
        return None
    return text[m.start() : start] + _marker("named") + text[end : m.end()]


_URL_REPLACER = _url_replacer()


_CASE_ANCHOR_LIST = tuple(
    dict.fromkeys(a for f in _FAMILIES if f.any_case is None for a in f.anchors)
)
"""The anchors of the case-sensitive families (ASCII, 2 chars or more)."""


_LOWER_ANCHOR_LIST = tuple(
    dict.fromkeys(
        (
            *(a for f in _FAMILIES if f.any_case is not None for a in f.anchors),
            *(a for anchors, _ in _SLOT_KEYWORDS for a in anchors),
        )
    )
)
"""The anchors looked for in the lower-cased text: the case-insensitive families' and the named
slots' (ASCII, 2 chars or more)."""


def _automaton(anchors: tuple[str, ...]) -> Automaton:
    auto = Automaton()
    for anchor in anchors:
        auto.add_word(anchor, anchor)
    auto.make_automaton()
    return auto


_ANY_CASE_FAMILIES = tuple(f for f in _FAMILIES if f.any_case is not None)
"""The families that run on a text holding no case-sensitive anchor (most texts)."""
_CASE_ANCHORS = _automaton(_CASE_ANCHOR_LIST)
"""The same anchors found in one pass (most outputs hold none), when the C kernel is absent."""
_LOWER_ANCHORS = _automaton(_LOWER_ANCHOR_LIST)


def _anchors_in(text: str) -> set[str]:
    """The case-sensitive families' anchors that occur in `text`."""
    if (kernel := _K.anchors_in) is not None:
        return kernel(text, _CASE_ANCHOR_LIST)
    return {anchor for _, anchor in _CASE_ANCHORS.iter(text)}


def _lower_anchors_in(lowered: str) -> set[str]:
    """The case-insensitive families' and named slots' anchors that occur in `lowered`."""
    if (kernel := _K.anchors_in) is not None:
        return kernel(lowered, _LOWER_ANCHOR_LIST)
    return {anchor for _, anchor in _LOWER_ANCHORS.iter(lowered)}


def redact(text: str, known: Iterable[str] = ()) -> Redacted:
    """Replace every secret-shaped string in `text`; `known` values (≥ 8 bytes) go first."""
    tally: dict[str, int] = {}
    for value in sorted({k for k in known if len(k.encode()) >= 8}, key=len, reverse=True):
        hits = text.count(value)
        if hits:
            text = text.replace(value, _marker("known"))
            tally["known"] = tally.get("known", 0) + hits
    present = _anchors_in(text)
    lowered, lowered_of = text.lower(), text
    low = _lower_anchors_in(lowered)  # the lower-case anchors, of `lowered_of`
    for family in _FAMILIES if present else _ANY_CASE_FAMILIES:
        if family.any_case is None:
            if present.isdisjoint(family.anchors):
                continue
            scan = text
        else:
            if lowered_of is not text:
                lowered, lowered_of = text.lower(), text
                low = _lower_anchors_in(lowered)
            if low.isdisjoint(family.anchors):
                continue
            scan = lowered
        before = text
        pattern = family.pattern
        if family.any_case is not None and len(scan) != len(text):  # `İ` moved the offsets
            pattern, scan = family.any_case, text
        text = _sub(pattern, text, _family_replacer(family), family.name, tally, scan)
        if text is not before:
            present = _anchors_in(text)
    if "Bearer" in text or "Basic" in text or "Token" in text:
        text = _sub(_AUTH, text, _AUTH_REPLACER, "bearer", tally)
    if "://" in text:
        text = _sub(_URL_CREDENTIALS, text, _URL_REPLACER, "url-password", tally)
    if "curl" in text:
        text = _sub(_CURL_USER, text, _CURL_REPLACER, "curl-user", tally)
    if lowered_of is not text:
        lowered = text.lower()
        low = _lower_anchors_in(lowered)
    if not low.isdisjoint(_SLOT_ANCHORS):
        if len(lowered) == len(text):
            text = _named_slots(text, lowered, _NAMED_SLOTS, low, tally)
        else:
            text = _named_slots(text, text, _NAMED_SLOTS_ANY_CASE, low, tally)
        if "--" in text:
            text = _sub(_CLI_FLAG, text, _flag_replacer, "named", tally)
    return Redacted(text, sum(tally.values()), tally)


def redact_value(value: Any, known: Iterable[str] = ()) -> tuple[Any, RedactionCounts]:
    """Redact every string inside a JSON value; object keys and non-strings stay as they are."""
    known = tuple(known)
    families: dict[str, int] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            r = redact(v, known)
            for label, n in r.families.items():
                families[label] = families.get(label, 0) + n
            return r.text
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    new = walk(value)
    return new, RedactionCounts(sum(families.values()), families)
