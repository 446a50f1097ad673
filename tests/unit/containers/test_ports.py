"""Server ports leave room for the ports SGLang derives from --port (gRPC: port + 10000 <= 65535)."""

import socket

import pytest

from containers.bringup import PORT_RANGE, free_port
from containers.ready import BringUpError


def test_ports_come_from_the_range_and_leave_room_above():
    ports = {free_port() for _ in range(50)}
    assert all(PORT_RANGE[0] <= p < PORT_RANGE[1] for p in ports)
    assert max(ports) + 10000 <= 65535
    assert len(ports) > 1  # picked, not one fixed port that a second server would collide on


def test_a_port_in_use_is_skipped():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        with pytest.raises(BringUpError, match=f"no free port in {busy}..{busy}"):
            free_port(busy, busy + 1, tries=3)
