"""A small synchronous client for the cluster's REST API (admin certificate), and kubeconfigs.

``devcluster up`` needs only a handful of calls (readiness, node status, TokenRequest), so it
uses the standard library; ``kubectl`` (the one built with the cluster) applies manifests.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml


class KubeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class Kube:
    def __init__(
        self, server: str, ca_file: Path, cert_file: Path, key_file: Path, timeout: float = 10.0
    ) -> None:
        self.server = server.rstrip("/")
        self.timeout = timeout
        self._ctx = ssl.create_default_context(cafile=str(ca_file))
        self._ctx.load_cert_chain(str(cert_file), str(key_file))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(
                req, context=self._ctx, timeout=timeout or self.timeout
            ) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                text = json.loads(text).get("message", text)
            raise KubeError(e.code, text) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw.decode("utf-8", "replace")

    def get(self, path: str, timeout: float | None = None) -> Any:
        return self.request("GET", path, timeout=timeout)

    def get_text(self, path: str, timeout: float | None = None) -> str:
        req = urllib.request.Request(self.server + path)
        try:
            with urllib.request.urlopen(
                req, context=self._ctx, timeout=timeout or self.timeout
            ) as resp:
                return str(resp.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as e:
            raise KubeError(e.code, e.read().decode("utf-8", "replace")) from None

    def patch_merge(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def create_token(self, namespace: str, service_account: str, seconds: int) -> str:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        out = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            body,
        )
        return str(out["status"]["token"])


def condition(obj: dict[str, Any], ctype: str) -> str | None:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == ctype:
            return str(c.get("status"))
    return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> None:
    creds: dict[str, str] = {}
    if cert_pem is not None and key_pem is not None:
        creds["client-certificate-data"] = _b64(cert_pem)
        creds["client-key-data"] = _b64(key_pem)
    if token is not None:
        creds["token"] = token
    context: dict[str, str] = {"cluster": "gpuaas-dev", "user": user}
    if namespace:
        context["namespace"] = namespace
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gpuaas-dev",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": f"{user}@gpuaas-dev", "context": context}],
        "current-context": f"{user}@gpuaas-dev",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    path.chmod(0o600)


def kubectl(
    kubectl_bin: Path,
    kubeconfig: Path,
    args: Sequence[str],
    *,
    stdin: str | None = None,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubectl_bin), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
