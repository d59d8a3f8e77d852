"""Which session a request belongs to."""

from __future__ import annotations

import hashlib
import re

from factrail.core.formats.base import Document
from factrail.core.model import is_prompt


def session_key(header: str | None, doc: Document, model: str) -> str:
    """The caller's `X-Factrail-Session`, else a hash of the transcript's stable head (system
    texts, first user message, model family). Nothing is kept in clear."""
    if header and header.strip():
        return "h-" + hashlib.blake2b(header.strip().encode(), digest_size=12).hexdigest()
    first_user = next((m.text for m in doc.messages if is_prompt(m)), "")
    family = re.split(r"[-:@/]", model.lower(), maxsplit=1)[0] if model else ""
    head = "\x00".join([*doc.system_texts, first_user, family])
    return "s-" + hashlib.blake2b(head.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
