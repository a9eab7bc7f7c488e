"""Fixtures of the API black-box suite (see weir_harness for the pieces)."""

import uuid

import pytest

from weir_harness import Api, Weir, backends


@pytest.fixture
def make_weir(tmp_path_factory):
    """Factory of fresh, unstarted installations; all are stopped afterwards."""
    made = []

    def make(backend: str = "sqlite") -> Weir:
        w = Weir(tmp_path_factory.mktemp("weir"), backend)
        made.append(w)
        return w

    yield make
    for w in made:
        w.cleanup()


@pytest.fixture(scope="session", params=backends())
def server(request, tmp_path_factory):
    """One running server per backend for the whole session."""
    w = Weir(tmp_path_factory.mktemp(f"weir-{request.param}"), request.param)
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def api(server) -> Api:
    """A client with a fresh all-permission key in a fresh workspace (tests never
    see each other's records)."""
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    return Api(server.url, server.create_key(workspace=ws))


