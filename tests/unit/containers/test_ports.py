"""Server ports leave room for the ports SGLang derives from --port (gRPC: port + 10000 <= 65535) and stay out
of the kernel's ephemeral range, where the host's outgoing connections take theirs."""

import socket

import pytest

from containers.bringup import DERIVED_SPAN, FALLBACK_RANGE, PORT_RANGE, ephemeral, free_port, port_range, port_taken
from containers.ready import BringUpError


def test_ports_come_from_the_range_and_leave_room_above():
    ports = {free_port() for _ in range(50)}
    assert all(PORT_RANGE[0] <= p < PORT_RANGE[1] for p in ports)
    assert max(ports) + DERIVED_SPAN <= 65535
    assert len(ports) > 1  # picked, not one fixed port that a second server would collide on


def test_ports_and_their_derived_ports_stay_below_this_hosts_ephemeral_range():
    e = ephemeral()
    if e is None:
        pytest.skip("no /proc/sys/net/ipv4/ip_local_port_range here")
    assert PORT_RANGE[1] + DERIVED_SPAN <= e[0] or PORT_RANGE[0] > e[1]


@pytest.mark.parametrize("kernel, expected", [
    ("32768\t60999\n", (20000, 22768)),   # Linux's default: below, port + 10000 below 32768 too
    ("1024 40000", (40001, 55536)),       # no room below: above, with room for the derived ports
    ("1024 65000", FALLBACK_RANGE),       # no room on either side
    ("garbage", FALLBACK_RANGE),
])
def test_the_range_follows_the_kernels_ephemeral_range(tmp_path, kernel, expected):
    f = tmp_path / "ip_local_port_range"
    f.write_text(kernel)
    assert port_range(f) == expected


def test_an_unreadable_ephemeral_range_falls_back(tmp_path):
    assert port_range(tmp_path / "absent") == FALLBACK_RANGE


def test_a_port_in_use_is_skipped():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        with pytest.raises(BringUpError, match=f"no free port in {busy}..{busy}"):
            free_port(busy, busy + 1, tries=3)


def test_a_taken_port_is_told_from_other_bring_up_failures():
    uvicorn = ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 44302): "
               "address already in use")
    assert port_taken(BringUpError("arm 'tree' exited with code 3 before it was ready", uvicorn))
    assert port_taken(RuntimeError("Bind for 0.0.0.0:20001 failed: port is already allocated"))  # Docker's words
    assert not port_taken(BringUpError("arm 'tree' exited with code 1 before it was ready", "CUDA out of memory"))
