"""Kubernetes as the jobs part of the gpuaas service uses it (its own ServiceAccount):
Jobs, their input and result ConfigMaps and token Secrets in the teams' namespaces.

Everything answers plain JSON dicts (raw responses), ``None`` for a 404 where that is an answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["JobsKube", "JobsKubeClient"]

MERGE = "application/merge-patch+json"


async def _body(resp: Any) -> dict[str, Any]:
    """The JSON of a raw (``_preload_content=False``) response, which the client never checks:
    an error status raises ApiException here."""
    from kubernetes_asyncio.client.rest import ApiException

    raw = await resp.read()
    if resp.status >= 400:
        raise ApiException(status=resp.status, reason=raw.decode("utf-8", "replace")[:500])
    out: dict[str, Any] = json.loads(raw)
    return out


class JobsKube(Protocol):
    async def create(
        self, kind: str, namespace: str, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    async def delete(self, kind: str, namespace: str, name: str) -> bool: ...

    async def list_jobs(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...


class JobsKubeClient:
    """:class:`JobsKube` over ``kubernetes_asyncio`` (``kind``: job, configmap, secret)."""

    def __init__(self, api: Any = None, *, timeout: float = 20.0) -> None:
        self._api = api
        self.timeout = timeout

    def _client(self, kind: str) -> Any:
        from kubernetes_asyncio import client

        group = "BatchV1Api" if kind == "job" else "CoreV1Api"
        if self._api is None:
            from kubespawner.clients import shared_client

            return shared_client(group)
        return getattr(client, group)(self._api)

    @staticmethod
    def _method(kind: str, verb: str) -> str:
        return f"{verb}_namespaced_{'config_map' if kind == 'configmap' else kind}"

    async def _call(self, kind: str, verb: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        api = self._client(kind)
        resp = await getattr(api, self._method(kind, verb))(
            *args, _preload_content=False, _request_timeout=self.timeout, **kwargs
        )
        return await _body(resp)

    async def create(self, kind: str, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._call(kind, "create", namespace, dict(body))

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes_asyncio.client.rest import ApiException

        try:
            return await self._call(kind, "read", name, namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        api = self._client(kind)
        resp = await getattr(api, self._method(kind, "patch"))(
            name,
            namespace,
            dict(body),
            _content_type=MERGE,
            _preload_content=False,
            _request_timeout=self.timeout,
        )
        return await _body(resp)

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Delete (dependents in the background: the Job's pods, Workload, ConfigMaps and
        Secret go with it); ``False`` if it was not there."""
        from kubernetes_asyncio.client.rest import ApiException

        try:
            await self._call(
                kind, "delete", name, namespace, body={"propagationPolicy": "Background"}
            )
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True

    async def list_jobs(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        api = self._client("job")
        resp = await api.list_namespaced_job(
            namespace,
            label_selector=selector,
            _preload_content=False,
            _request_timeout=self.timeout,
        )
        items: list[dict[str, Any]] = (await _body(resp))["items"]
        return items
