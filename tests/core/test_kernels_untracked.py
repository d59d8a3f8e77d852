"""The C kernels untrack, at birth, the tuples and frozensets they make of strs and numbers only
(such an object can never be part of a reference cycle), so the cyclic GC never walks the tens of
thousands a compaction keeps; anything holding a container stays tracked."""

from __future__ import annotations

import gc
import sys
from types import ModuleType

from factrail.core import candidate_tokens

TEXT = (
    "ERROR tests/test_api.py::test_items failed at src/app/items.py:42 (req-0042af)\n"
    "  build/app_v2.bin 0x7f3a9c1deadbeef\n"
    "PASSED tests/test_api.py::test_users in 0.12s\n"
)


def test_token_sets_and_scans_are_untracked(native: ModuleType) -> None:
    scan = candidate_tokens.TokenScan(*native.token_scan(TEXT))
    assert scan.occurrences
    assert not any(gc.is_tracked(v) for v in scan.occurrences.values())
    assert not gc.is_tracked(scan.occurrences)  # a dict of untracked values stays untracked
    fields = (scan.digit_starts, scan.digit_found, scan.word_starts, scan.word_found)
    assert all(fields) and not any(gc.is_tracked(f) for f in fields)


def test_spans_are_untracked(native: ModuleType) -> None:
    spans = native.unit_spans(TEXT)
    assert spans and not any(gc.is_tracked(s) for s in spans)


def test_scan_slices_are_untracked_unless_they_hold_a_container(native: ModuleType) -> None:
    """A unit's tokens sliced from a scan (`span_tokens`): untracked when the scan holds strs,
    tracked when a scan made elsewhere holds a container."""
    scan = candidate_tokens.TokenScan(*native.token_scan(TEXT))
    spans = native.unit_spans(TEXT)
    got = native.span_tokens(TEXT, spans, range(len(spans)), scan, 0, candidate_tokens.toks)
    assert got[0] and not any(gc.is_tracked(s) for s in got)
    odd = candidate_tokens.TokenScan({}, (0,), (("a", "tuple"),), (), ())
    (held,) = native.span_tokens("x", [(0, 1, True)], [0], odd, 0, candidate_tokens.toks)
    assert held == {("a", "tuple")} and gc.is_tracked(held)


def test_untracked_objects_are_still_freed(native: ModuleType) -> None:
    """Untracking only hides an object from the cycle collector: reference counting still
    frees it (no leak)."""
    native.token_scan(TEXT)
    native.unit_spans(TEXT)
    before = sys.getallocatedblocks()
    for _ in range(2000):
        native.token_scan(TEXT)
        native.unit_spans(TEXT)
    assert sys.getallocatedblocks() - before < 200
