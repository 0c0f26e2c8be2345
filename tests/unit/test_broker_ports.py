"""The test broker's port choice: the secure listeners' ports never repeat the broker's or the
controller's, chosen a moment before and not bound yet (a clean-clone CI run once gave the SSL
listener the controller's port, and the broker refused to format its storage)."""

from __future__ import annotations

from streamstate.testing import broker


def test_ports_chosen_later_avoid_those_chosen_before() -> None:
    for _ in range(300):
        first = broker._free_ports(2)
        later = broker._free_ports(4, avoid=tuple(first))
        assert len(later) == 4
        assert len(set(later)) == 4
        assert not set(later) & set(first), (first, later)


def test_without_ports_to_avoid_the_count_is_the_one_asked_for() -> None:
    ports = broker._free_ports(3)
    assert len(ports) == 3 and len(set(ports)) == 3
