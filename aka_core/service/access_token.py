"""The reward service's access token: only whoever holds it may submit, read or cancel.

Without one, anything that reaches the service's port could use it. A CLI agent shares the
host's network (it must reach its model), so during its rollout it could send the service
candidates of its own and learn from each verdict whether it passes the held-out cases (an
oracle on what must stay secret), read other rollouts' results, cancel them (their samples
dropped), or fill the queue. Every route but ``/v1/health`` therefore asks for
``Authorization: Bearer <token>``.

Where the token comes from, on both sides:

1. ``AKA_SERVICE_TOKEN``, when set: the operator's own, given to the service and to each
   client (reward workers on other hosts, say); nothing is written.
2. Else the service makes one when it starts (or keeps the one it made before, so that clients
   outlive a restart) in ``~/.aka/service-tokens/<port>`` (mode 0600 in a 0700 folder), and
   clients of a URL on that port read it there. Agents never see it: their sandbox replaces
   ``$HOME``, ``/root`` and ``/home`` with empty folders, and their environment carries no
   ``AKA_SERVICE_TOKEN``.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

ENV = "AKA_SERVICE_TOKEN"
MIN_LENGTH = 16
HEADER = "Authorization"


def token_file(port: int) -> Path:
    """Where the service on ``port`` of this host keeps the token it made."""
    return Path.home() / ".aka" / "service-tokens" / str(port)


def _from_env() -> str | None:
    token = os.environ.get(ENV, "").strip()
    if not token:
        return None
    if len(token) < MIN_LENGTH:
        raise ValueError(f"{ENV} is {len(token)} characters: give at least {MIN_LENGTH} (e.g. "
                         "python3 -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


def for_service(port: int) -> tuple[str, str]:
    """The token a service on ``port`` asks for, and where it came from (for its start line)."""
    token = _from_env()
    if token is not None:
        return token, f"${ENV}"
    path = token_file(port)
    kept = _kept(port)
    if kept is not None:
        return kept, str(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    token = secrets.token_urlsafe(32)
    # Written under a fresh name with its mode, then moved: never readable by others, even
    # for a moment, and never half written.
    staged = path.with_name(f".{path.name}-{secrets.token_hex(4)}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.replace(staged, path)
    return token, str(path)


def for_client(url: str) -> str | None:
    """The token a client of ``url`` sends: ``AKA_SERVICE_TOKEN``, else the one a service on
    that port of this host made, else None (the service then answers 401, saying where to look)."""
    token = _from_env()
    if token is not None:
        return token
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return _kept(port)


def _kept(port: int) -> str | None:
    """The token a service on ``port`` of this host made, or None."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        kept = token_file(port).read_text().strip()
        if len(kept) >= MIN_LENGTH:
            return kept
    return None


def header(token: str | None) -> dict[str, str]:
    return {HEADER: f"Bearer {token}"} if token else {}


def allowed(given: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header's value carries ``token`` (compared in constant time:
    the answer's timing tells nothing of how much of a guess was right)."""
    if not given or not given.startswith("Bearer "):
        return False
    return hmac.compare_digest(given[len("Bearer "):].strip().encode(), token.encode())
