"""The ``--address`` of a Ray cluster, checked before Ray is asked: one TCP connect with a short timeout.

``ray.init(address=...)`` retries an unreachable head for a long time and then raises with a
traceback of its own; :func:`check_address` answers in at most :data:`CONNECT_TIMEOUT` seconds with
one line naming ``--address``.
"""

from __future__ import annotations

import socket

#: Seconds :func:`check_address` waits for the Ray head's port to answer.
CONNECT_TIMEOUT = 3.0


def check_address(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse a Ray ``address`` whose head cannot be reached, before Ray tries (and retries) it.

    ``HOST:PORT`` and ``ray://HOST:PORT`` are checked with one TCP connect of at most ``timeout``
    seconds; ``auto``, ``local`` and other schemes are left to Ray.

    Parameters
    ----------
    address : str
        The ``--address`` value.
    timeout : float
        Seconds to wait for the connect.

    Raises
    ------
    ValueError
        A malformed address (no port, a port outside 1..65535), or nothing accepts a connection
        at it; one line naming ``--address``.
    """
    text = address.strip()
    if text in ("auto", "local") or ("://" in text and not text.startswith("ray://")):
        return
    text = text.removeprefix("ray://")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"--address {address!r}: expected HOST:PORT (e.g. 10.0.0.1:6379), ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(
            f"--address {address!r}: no Ray head answers at {host}:{port} ({reason}); start one there "
            f"(ray start --head --port {port}) or leave --address out for a local Ray"
        ) from exc


__all__ = ["CONNECT_TIMEOUT", "check_address"]
