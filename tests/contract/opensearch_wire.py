"""``FakeCluster`` (``tests/contract/fake_opensearch.py``) behind the adapter's own client.

``OpenSearchWire(cluster, endpoint).installed()`` answers the HTTPS requests ``requests`` sends to
``endpoint`` (``OpenSearchVectorIndex.connect`` builds opensearch-py's ``RequestsHttpConnection``
with SigV4 auth, as in a Lambda): each request arrives signed, is authorized by ``authorize`` (the
IAM harness: ``aoss:APIAccessAll`` and the data-access policy, or ``es:ESHttp*``) and is served by
the fake cluster; a refused one is answered 403 as the service answers it. Requests to any other
host go on as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.contract.fake_opensearch import FakeCluster

# (method, path, signing service from the Authorization header) -> raises Forbidden when refused
Authorize = Callable[[str, str, str], None]


class Forbidden(Exception):
    pass


class OpenSearchWire:
    def __init__(self, cluster: FakeCluster, endpoint: str, authorize: Authorize | None = None) -> None:
        self.cluster = cluster
        self.host = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}").hostname
        self.authorize = authorize
        self.services: list[str] = []  # the SigV4 service of each request (aoss / es)

    @contextmanager
    def installed(self) -> Iterator[None]:
        import requests

        send = requests.Session.send
        wire = self

        def routed(session: requests.Session, prepared: Any, **kwargs: Any) -> Any:
            if urlsplit(prepared.url).hostname != wire.host:
                return send(session, prepared, **kwargs)
            return wire._serve(prepared)

        requests.Session.send = routed  # type: ignore[method-assign, assignment]
        try:
            yield
        finally:
            requests.Session.send = send  # type: ignore[method-assign]

    def _serve(self, prepared: Any) -> Any:
        split = urlsplit(prepared.url)
        method, path = prepared.method, split.path
        auth = prepared.headers.get("Authorization", "")
        scope = auth.split("Credential=", 1)[-1].split(",", 1)[0].split("/")
        service = scope[3] if len(scope) > 3 else ""  # key/date/region/service/aws4_request
        self.services.append(service)
        if not auth.startswith("AWS4-HMAC-SHA256"):
            return self._response(prepared, 403, {"message": "Missing Authentication Token"})
        if self.authorize is not None:
            try:
                self.authorize(method, path, service)
            except Forbidden as exc:
                return self._response(
                    prepared, 403, {"status": 403, "error": {"reason": str(exc), "type": "Forbidden"}}
                )
        body = prepared.body
        size = len(body) if isinstance(body, bytes) else len((body or "").encode())
        if size > self.cluster.max_request_bytes:
            self.cluster.refused.append((413, path))
            return self._response(prepared, 413, {"message": f"Request size {size} exceeded"})
        text = body.decode() if isinstance(body, bytes) else body
        parsed: Any = text
        if text and not path.endswith("_bulk"):
            parsed = json.loads(text)
        status, data = self.cluster.handle(method, path, dict(parse_qsl(split.query)), parsed)
        return self._response(prepared, status, data)

    @staticmethod
    def _response(prepared: Any, status: int, data: Any) -> Any:
        import requests

        response = requests.Response()
        response.status_code = status
        response._content = (data if isinstance(data, str) else json.dumps(data)).encode()
        response.headers["content-type"] = "application/json"
        response.url = prepared.url
        response.request = prepared
        return response
