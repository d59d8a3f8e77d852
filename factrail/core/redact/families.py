"""The provider key families: gitleaks' default rules for what a coding session holds (cloud,
forge, registry, chat, payment and AI keys, PEM/PuTTY/age keys, JWTs, webhook URLs), each led by
a literal anchor that must occur in the text for its pattern to run at all."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    """Literals one of which must occur in the text for the pattern to match at all."""
    any_case: re.Pattern[str] | None = None
    """Set for case-insensitive families: then `pattern` (lower-case) and the anchors are matched
    over the lower-cased text, and this one over text whose lower-casing changes its length."""
    keeps_label: bool = False
    """Group 1 is a label that stays; only the value, group 2, is replaced."""


def standalone(literal: str, width: int, before: str = r"\w") -> str:
    """`literal` (matching `width` chars) not preceded by a char of class `before`. The check is
    a lookbehind placed after the literal so that the regex engine can scan for the literal; a
    leading lookbehind or `\\b` makes it try every offset of the text."""
    return f"{literal}(?<!{before}.{{{width}}})"


_SK_BEFORE = r"[A-Za-z0-9-]"
"""Keys of the `sk-` families stand alone: `task-…` or `desk-ant-…` is not a key (§9.16)."""


def _family(name: str, regex: str, *anchors: str, flags: int = 0, label: bool = False) -> Family:
    return Family(
        name,
        re.compile(regex, flags & ~re.IGNORECASE),
        anchors,
        re.compile(regex, flags) if flags & re.IGNORECASE else None,
        keeps_label=label,
    )


_VALUE_TAIL = r"[^\s\"'`<>&;,()\[\]{}|\\]*"
"""The rest of a labelled value past its key-shaped part (`.`, `-`, `_`…): it goes too."""

_B64 = r"[A-Za-z0-9+/_-]"
"""A char that may precede a prefix inside base64/base64url text, where it is not a key."""


def _prefixed(name: str, literal: str, body: str, before: str = _B64) -> Family:
    """A key that is `literal` (a plain string, regex-escaped here) then `body`, standing alone."""
    return _family(name, standalone(re.escape(literal), len(literal), before) + body, literal)


FAMILIES: tuple[Family, ...] = (
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
    _family("sk-ant", standalone("sk-ant-", 7, _SK_BEFORE) + r"[A-Za-z0-9_-]{8,}", "sk-ant-"),
    _family("sk-proj", standalone("sk-proj-", 8, _SK_BEFORE) + r"[A-Za-z0-9_-]{20,}", "sk-proj-"),
    _family("sk-or-v1", standalone("sk-or-v1-", 9, _SK_BEFORE) + r"[A-Za-z0-9]{30,}", "sk-or-v1-"),
    _family(
        "sk", standalone("sk-", 3, _SK_BEFORE) + r"(?:svcacct-|admin-)?[A-Za-z0-9_.-]{16,}", "sk-"
    ),
    _family(
        "stripe",
        standalone("[sr]k_(?:live|test|prod)_", 8) + r"[A-Za-z0-9]{16,}",
        "_live_",
        "_test_",
        "_prod_",
    ),
    _prefixed("stripe", "whsec_", r"[A-Za-z0-9]{24,}"),
    _family("github-pat", r"github_pat_[A-Za-z0-9_]{16,}", "github_pat_"),
    _family(
        "gh-token",
        standalone("gh[pousr]_", 4) + r"[A-Za-z0-9]{16,}",
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
    _family("hf", standalone("hf_", 3) + r"[A-Za-z0-9]{20,}", "hf_"),
    _prefixed("hf", "api_org_", r"[A-Za-z]{30,}"),
    _family("npm", standalone("npm_", 4) + r"[A-Za-z0-9]{20,}", "npm_"),
    _prefixed("pypi", "pypi-AgEIcHlwaS5vcmc", r"[\w-]{30,}"),
    _prefixed("rubygems", "rubygems_", r"[a-f0-9]{40,}"),
    _prefixed("nuget", "oy2", r"[a-z0-9]{43}(?![A-Za-z0-9])"),
    _prefixed("docker", "dckr_pat_", r"[A-Za-z0-9_-]{20,}"),
    _prefixed("docker", "dckr_oat_", r"[A-Za-z0-9_-]{20,}"),
    _family("nia", standalone("nk_", 3) + r"[A-Za-z0-9]{20,}", "nk_"),
    _family("google-api", r"AIza[0-9A-Za-z_-]{30,}", "AIza"),
    _prefixed("google-oauth", "GOCSPX-", r"[A-Za-z0-9_-]{20,}"),
    _prefixed("google-oauth", "ya29.", r"[0-9A-Za-z_-]{30,}"),
    _family("slack", standalone("xox[abeoprs]-", 5) + r"[0-9A-Za-z-]{10,}", "xox"),
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
        standalone("A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA)", 4) + r"[0-9A-Z]{16}\b",
        *("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA"),
    ),
    _family(
        "aws-secret",
        r"((?:aws_secret_access_key|secret access key)[\"'`\]\s=:]+)([A-Za-z0-9/+=]{30,}"
        rf"{_VALUE_TAIL})",
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
    _family(
        "azure-sas",
        rf"([?&;]sig=)([A-Za-z0-9%+/]{{20,}}(?:=|%3[dD]){{0,2}}{_VALUE_TAIL})",
        "sig=",
        label=True,
    ),
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
    _family("nostr-nsec", standalone("nsec1", 5) + r"[02-9ac-hj-np-z]{20,}", "nsec1"),
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


def is_placeholder(body: str) -> bool:
    """`sk-xxxxxxxx…`-style stand-ins: nothing, or one repeated character, after the prefix."""
    rest = _PROVIDER_PREFIX.sub("", body, count=1)
    return len(set(rest)) <= 1 or _REPEATED_TAIL.search(body) is not None
