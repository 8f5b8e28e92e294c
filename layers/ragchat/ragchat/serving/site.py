"""Who may talk to ``ragchat serve`` from a browser (docs/security.md, "The local server").

A local server without a token must not be an open door for every web page its user visits:

- **Host allow-list** (DNS rebinding): a request is served only when its ``Host`` names this server —
  ``localhost``, ``127.0.0.1``, ``[::1]``, the bound address, and ``RAGCHAT_ALLOWED_HOSTS``
  (``*`` turns the check off). Anything else: 421; no ``Host`` at all: 400.
- **CORS**: no wildcard. The server's own origin needs no CORS header; another origin gets one only
  when ``RAGCHAT_CORS_ORIGINS`` lists it (a preflight from any other origin: 403).
- **Cross-site state changes**: a ``POST``/``PUT``/``PATCH``/``DELETE`` whose ``Origin`` is neither
  this server's nor a listed one, or (without ``Origin``) whose ``Sec-Fetch-Site`` says another site,
  is refused (403) before its body is read. Clients that send neither (curl, the CLI) are not
  browsers and pass.
- **JSON-only bodies**: a state-changing request with a body must say ``Content-Type:
  application/json`` (415), except the two routes that take files (``POST /documents`` and the
  upload receiver ``POST /uploads/local/<token>``). The types a page can send cross-site without a
  preflight (``text/plain``, forms) therefore never reach a JSON route.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragchat.domain.file_errors import FILE_ROUTES

Refusal = tuple[int, dict[str, Any], dict[str, str]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE_FETCH = frozenset({"same-origin", "none"})
# Routes whose body is a file, not JSON.
ANY = "*"


class Headers(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (every address it names is loopback)."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return False
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    return bool(addresses) and all(address.is_loopback for address in addresses)


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("", "0.0.0.0", "::")


def host_name(host_header: str) -> str:
    """The name part of a ``Host`` header, lowercased, without the port (``[::1]:8000`` → ``::1``)."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value.rstrip(".")


def machine_names() -> set[str]:
    """This machine's host name and the addresses it resolves to (served when bound to every interface)."""
    names: set[str] = set()
    try:
        hostname = socket.gethostname().lower()
        names.add(hostname)
        for info in socket.getaddrinfo(hostname, None):
            names.add(str(info[4][0]).split("%")[0].lower())
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return names


@dataclass(frozen=True)
class SitePolicy:
    """The browser-facing rules of one local server (module docstring)."""

    hosts: frozenset[str]
    cors_origins: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def for_bind(
        cls, bound: str, allowed_hosts: Iterable[str] = (), cors_origins: Iterable[str] = ()
    ) -> SitePolicy:
        hosts = set(LOOPBACK_NAMES) | {h.strip().lower() for h in allowed_hosts if h.strip()}
        if is_wildcard(bound):
            hosts |= machine_names()
        else:
            hosts.add(bound.strip("[]").lower())
        origins = {o.strip().rstrip("/").lower() for o in cors_origins if o.strip()}
        return cls(frozenset(hosts), frozenset(origins))

    def host_allowed(self, host_header: str) -> bool:
        return ANY in self.hosts or host_name(host_header) in self.hosts

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        """The request's own origin (its ``Host``, which has passed the allow-list) or a listed one."""
        origin = origin.strip().rstrip("/").lower()
        if ANY in self.cors_origins or origin in self.cors_origins:
            return True
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme in ("http", "https") and rest == host_header.strip().lower()

    def refusal(self, method: str, path: str, headers: Headers) -> Refusal | None:
        """Checked before the bearer token and before the body is read."""
        host = str(headers.get("Host") or "")
        if not host:
            return 400, {"error": "Bad request: the Host header is required"}, {}
        if not self.host_allowed(host):
            message = (
                f"Misdirected request: this server does not answer for host {host_name(host)!r} "
                "(add it to RAGCHAT_ALLOWED_HOSTS)"
            )
            return 421, {"error": message}, {}
        origin = headers.get("Origin")
        if method == "OPTIONS" and origin is not None:
            if not self.origin_allowed(origin, host):
                return 403, {"error": f"Origin {origin} is not allowed (RAGCHAT_CORS_ORIGINS)"}, {}
            return None
        if method in SAFE_METHODS:
            return None
        return self._cross_site(method, path, headers, host)

    def _cross_site(self, method: str, path: str, headers: Headers, host: str) -> Refusal | None:
        origin = headers.get("Origin")
        fetch_site = str(headers.get("Sec-Fetch-Site") or "").lower()
        if origin is not None and origin.strip().lower() != "null":
            if not self.origin_allowed(origin, host):
                return 403, {"error": f"Cross-site request refused: origin {origin} is not allowed"}, {}
        elif origin is not None or (fetch_site and fetch_site not in SAME_SITE_FETCH):
            message = "Cross-site request refused: state changes come only from this server's pages"
            return 403, {"error": message}, {}
        if _has_body(headers) and not path.startswith(FILE_ROUTES) and not _is_json(headers):
            ctype = str(headers.get("Content-Type") or "").strip()
            what = f"Unsupported media type {ctype}" if ctype else "No Content-Type"
            return 415, {"error": f"{what}: send the body as application/json"}, {}
        return None

    def cors_headers(self, request: Headers, response: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The response headers with the resolver's CORS headers replaced: ``Access-Control-*`` only
        for an allowed foreign origin, and then naming that origin (never ``*``)."""
        origin = request.get("Origin")
        host = str(request.get("Host") or "")
        kept = [(k, v) for k, v in response if not k.lower().startswith("access-control-")]
        if origin is None or not self.origin_allowed(origin, host) or self._same_origin(origin, host):
            return kept
        cors = [(k, v) for k, v in response if k.lower().startswith("access-control-")]
        cors = [(k, origin if k.lower() == "access-control-allow-origin" else v) for k, v in cors]
        return [*kept, *cors, ("Vary", "Origin")]

    @staticmethod
    def _same_origin(origin: str, host: str) -> bool:
        _scheme, sep, rest = origin.strip().rstrip("/").lower().partition("://")
        return bool(sep) and rest == host.strip().lower()


def _has_body(headers: Headers) -> bool:
    try:
        return int(headers.get("Content-Length") or 0) > 0
    except ValueError:
        return True


def _is_json(headers: Headers) -> bool:
    ctype = str(headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    return ctype == "application/json" or ctype.endswith("+json")
