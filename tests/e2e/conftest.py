"""Servers the e2e tests start themselves, for `backend: external` (servers ddbench did not start)."""

from __future__ import annotations

import pytest


@pytest.fixture
def servers(refengine_servers, tmp_path):
    """[AR url, DFlash url]: the shipped pair on the CPU."""
    return refengine_servers.pair(tmp_path)
