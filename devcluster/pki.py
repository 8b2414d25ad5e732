"""Certificates and keys of the dev cluster, made fresh for each cluster with ``cryptography``.

Two CAs, as in a kubeadm cluster: the cluster CA (serving certificates and client certificates of
the components) and the front-proxy CA, whose client certificate the apiserver presents to
aggregated APIs (Kueue's visibility server) with the caller's identity in X-Remote-* headers.
All keys are ECDSA P-256: fast to make and accepted by every component.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devcluster.hamischeduler import IDENTITY as HAMI_IDENTITY
from devcluster.provisioner import IDENTITY as PROVISIONER_IDENTITY

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path

    def cert_pem(self) -> bytes:
        return self.cert.read_bytes()

    def key_pem(self) -> bytes:
        return self.key.read_bytes()


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """Signing only (EC keys); a CA also signs certificates and CRLs."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def make_ca(directory: Path, name: str, common_name: str) -> CertPair:
    key = _new_key()
    now = dt.datetime.now(dt.timezone.utc)
    subject = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pair = CertPair(directory / f"{name}.crt", directory / f"{name}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair


def make_cert(
    ca: CertPair,
    directory: Path,
    name: str,
    common_name: str,
    *,
    orgs: tuple[str, ...] = (),
    dns_names: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
) -> CertPair:
    """A leaf certificate signed by ``ca``, for serving, for client auth, or both."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem())
    ca_key = serialization.load_pem_private_key(ca.key_pem(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{ca.key}: expected an EC key")
    key = _new_key()
    now = dt.datetime.now(dt.timezone.utc)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, orgs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = CertPair(directory / f"{name}.crt", directory / f"{name}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair


def make_signing_key(directory: Path, name: str) -> CertPair:
    """A bare key pair (``.key`` private, ``.pub`` public), for ServiceAccount tokens."""
    key = _new_key()
    pair = CertPair(directory / f"{name}.pub", directory / f"{name}.key")
    _write_key(pair.key, key)
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pair


@dataclass(frozen=True)
class ClusterPKI:
    ca: CertPair
    front_proxy_ca: CertPair
    front_proxy_client: CertPair
    apiserver: CertPair
    loopback_serving: CertPair
    service_account: CertPair
    clients: dict[str, CertPair]


# Client identities: name -> (common name, organisations). Authorization is RBAC (and the Node
# authorizer for the node agent), so each component gets only what its identity is bound to.
CLIENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("devcluster-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    # kwok plays the kubelet of many nodes at once; the Node authorizer allows one node per
    # identity, so it runs as an administrator (as kwokctl does).
    "kwok": ("kwok-controller", ("system:masters",)),
    # The volume provisioner: bound to its ClusterRole (devcluster/provisioner.py).
    "provisioner": (PROVISIONER_IDENTITY, ()),
    # HAMi's scheduler extender and webhook: bound to its ClusterRole (devcluster/hamischeduler.py).
    "hami": (HAMI_IDENTITY, ()),
    # Kueue runs with the RBAC of its own manifests: the identity its ClusterRoleBindings name.
    "kueue": (
        "system:serviceaccount:kueue-system:kueue-controller-manager",
        ("system:serviceaccounts", "system:serviceaccounts:kueue-system"),
    ),
}


def node_client(node: str) -> tuple[str, tuple[str, ...]]:
    """A kubelet's identity: the Node authorizer and NodeRestriction admit it for its node."""
    return (f"system:node:{node}", ("system:nodes",))


def make_cluster_pki(directory: Path, agent_nodes: tuple[str, ...]) -> ClusterPKI:
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_ca(directory, "ca", "devcluster-ca")
    front_proxy_ca = make_ca(directory, "front-proxy-ca", "devcluster-front-proxy-ca")
    front_proxy_client = make_cert(
        front_proxy_ca, directory, "front-proxy-client", "front-proxy-client", client=True
    )
    apiserver = make_cert(
        ca,
        directory,
        "apiserver",
        "kube-apiserver",
        dns_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        ips=("127.0.0.1", "10.96.0.1"),
        server=True,
    )
    loopback = make_cert(
        ca,
        directory,
        "loopback-serving",
        "localhost",
        dns_names=("localhost",),
        ips=("127.0.0.1",),
        server=True,
    )
    sa = make_signing_key(directory, "service-account")
    identities = dict(CLIENTS)
    for node in agent_nodes:
        identities[f"node-{node}"] = node_client(node)
    clients = {
        name: make_cert(ca, directory, name, cn, orgs=orgs, client=True)
        for name, (cn, orgs) in identities.items()
    }
    return ClusterPKI(ca, front_proxy_ca, front_proxy_client, apiserver, loopback, sa, clients)
