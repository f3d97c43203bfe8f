"""The reward service's access token (``aka_core.service.access_token``): who may use the
service, where the token comes from, and that the service refuses everyone else."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from aka_core.service import access_token
from aka_core.service.client import ServiceClient, ServiceError

from .conftest import candidate

httpx = pytest.importorskip("httpx")

TASK = "triton2triton/gelu"


def test_a_service_makes_its_token_once_readable_by_its_user_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(access_token.ENV)
    token, source = access_token.for_service(8123)
    path = access_token.token_file(8123)
    assert source == str(path) and path.read_text().strip() == token and len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # A restarted service keeps it (its clients go on); a client of that port reads it.
    assert access_token.for_service(8123)[0] == token
    assert access_token.for_client("http://127.0.0.1:8123") == token
    assert access_token.for_client("http://localhost:8124/") is None
    assert [p.name for p in path.parent.iterdir()] == ["8123"]  # nothing half written left


def test_the_operators_token_wins_and_is_never_written(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(access_token.ENV, "an-operators-token-1234")
    assert access_token.for_service(8123) == ("an-operators-token-1234",
                                              f"${access_token.ENV}")
    assert access_token.for_client("http://10.0.0.7:8123") == "an-operators-token-1234"
    assert not (tmp_path / ".aka").exists()
    monkeypatch.setenv(access_token.ENV, "short")
    with pytest.raises(ValueError, match="at least 16"):
        access_token.for_service(8123)
    with pytest.raises(ServiceError, match="at least 16"):
        ServiceClient("http://127.0.0.1:8123")


def test_only_the_exact_token_is_let_in() -> None:
    token = "s3cret-token-of-the-service"
    assert access_token.allowed(f"Bearer {token}", token)
    for given in (None, "", token, f"Basic {token}", f"Bearer {token[:-1]}",
                  f"Bearer {token}x", "Bearer "):
        assert not access_token.allowed(given, token), given


@pytest.mark.slow
def test_without_the_token_nothing_but_health_is_served(service: Any) -> None:
    with ServiceClient(service.url) as client:
        done = client.evaluate(TASK, candidate("scored", reward=1.5), id="theirs")
    assert done["reward"] == 1.5
    for headers in ({}, {"Authorization": "Bearer not-the-token-at-all"},
                    {"Authorization": service.headers["Authorization"] + "x"}):
        refused = [
            httpx.post(service.url + "/v1/evaluations", headers=headers, timeout=30,
                       json={"task": TASK, "files": candidate("scored", reward=9.0)}),
            httpx.get(service.url + "/v1/evaluations/theirs", headers=headers, timeout=30),
            httpx.delete(service.url + "/v1/evaluations/theirs", headers=headers, timeout=30),
            httpx.get(service.url + "/v1/stats", headers=headers, timeout=30),
        ]
        assert [r.status_code for r in refused] == [401] * 4, [r.text for r in refused]
        assert refused[0].json()["field"] == "authorization"
        assert refused[0].headers["WWW-Authenticate"] == "Bearer"
    assert httpx.get(service.url + "/v1/health", timeout=30).json()["ok"] is True
    with ServiceClient(service.url, token="not-the-token-at-all") as stranger:
        with pytest.raises(ServiceError) as refusal:
            stranger.get("theirs")
        assert refusal.value.status == 401 and "access token" in str(refusal.value)
    with ServiceClient(service.url) as client:
        assert client.get("theirs")["state"] == "scored"  # untouched by the strangers
        stats = httpx.get(service.url + "/v1/stats", headers=service.headers, timeout=30)
        assert stats.json()["states"] == {"scored": 1}
