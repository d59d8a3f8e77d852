"""The test servers' ports: each xdist worker's come from a range of its own."""

from __future__ import annotations

import socket

import pytest

from tests import ports


def test_a_worker_hands_out_ports_of_its_own_range_in_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    low = ports.BASE + 3 * ports.SPAN
    first, second = ports.free_port(), ports.free_port()
    assert low <= first < low + ports.SPAN and low <= second < low + ports.SPAN
    assert first != second


def test_a_port_still_bound_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    taken = ports.free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", taken))
        held.listen()
        for _ in range(ports.SPAN - 1):
            assert ports.free_port() != taken


def test_without_workers_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    port = ports.free_port()
    assert port > 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # it was free
