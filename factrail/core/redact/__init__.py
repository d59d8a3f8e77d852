"""Credential redaction for everything that leaves the process or reaches disk.

`redact` replaces known values, provider key families (gitleaks' default rules for what a coding
session holds: cloud, forge, registry, chat, payment and AI keys, PEM/PuTTY/age keys, JWTs,
webhook URLs), auth-scheme values (`Authorization:` with any scheme word), URL passwords and
tokens, `curl -u` passwords, and the values of keys that name a credential by one of their
words (`DB_PASSWORD=`, `password: |`, `"apiKey": …`, `github_pat=`, `?api_key=`,
`client-key-data:`, `- name: DB_PASSWORD` / `value: …`), cookies wherever written (headers,
`curl -b`, cookie jars) and secret CLI flags with `[REDACTED:<label>]`, counting each
replacement per label; a text holding string escapes is read as what they encode.
Placeholders (`<your key>`, `xxx`, `${TOKEN}`, `changeme`, `your-api-key-here`) and code naming
a value (`os.environ["API_KEY"]`, `password = user_password`) stay; docs/redaction.md has the
table and what is not caught. `secret_spans` says where in a text those replacements fall.

Modules: `families` (the key families), `names` (whether a key names a credential), `forms`
(how a value is written; whether a line is code), `values` (whether a slot's value is a
credential), `slots` (named slots, flags), `pairs` (key/value pair objects), `headers`
(cookies, `Authorization:`), `escapes` (a text with its escapes undone) and `engine` (the pass
over a text).
"""

from factrail.core.redact.engine import (
    _K,
    FAMILY_LABELS,
    Redacted,
    RedactionCounts,
    anchors_in,
    redact,
    redact_value,
    secret_spans,
)
from factrail.core.redact.families import FAMILIES

_FAMILIES = FAMILIES
_anchors_in = anchors_in

__all__ = [
    "FAMILY_LABELS",
    "_FAMILIES",
    "_K",
    "Redacted",
    "RedactionCounts",
    "_anchors_in",
    "redact",
    "redact_value",
    "secret_spans",
]
