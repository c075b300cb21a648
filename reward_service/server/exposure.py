"""Whether the service listens beyond this host without a token (issue 27, item 7).

The container image listens on ``0.0.0.0``: without ``REWARD_API_TOKEN`` anyone who can reach
the port can score, fill the queue and hold connections. The CLI logs :func:`exposure_warning`
at WARNING when it starts, and ``/v1/info`` reports it under ``warnings``.
"""

from __future__ import annotations

import ipaddress

from reward_service.settings import Settings

__all__ = ["exposure_warning", "is_loopback"]


def is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` or ``localhost``; anything else (``0.0.0.0``, a name) is not."""
    if host.strip().lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(settings: Settings) -> str | None:
    """Why the settings leave the service open to the network, or None."""
    if settings.api_token is None and not is_loopback(settings.host):
        return (f"listening on {settings.host} without REWARD_API_TOKEN: every client that "
                f"can reach the port can use the service (set REWARD_API_TOKEN, or listen "
                f"on 127.0.0.1)")
    return None
