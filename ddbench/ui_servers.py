"""A locustfile with no users: it gives the web UI's live view (loadtests/liveweb.py) the arm's server, brought
up and down by the containers stage as `reproduce` brings them, and the line that starts it. `ddbench ui` hands
it to Locust beside loadtests/locustfile.py; Locust imports it before its init event, when the view installs."""

from __future__ import annotations

from containers import bringup
from containers.launch import server_command
from ddbench.core.profile import Profile
from loadtests import liveweb


def command(profile: Profile, arm: str, port: int | None) -> str:
    return server_command(profile, profile.arm(arm), **({"port": port} if port else {})).shell()


liveweb.SERVERS = liveweb.Servers(up=bringup.up, command=command)
