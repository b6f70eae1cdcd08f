"""Self-signed PKI, static tokens and kubeconfigs for the local control plane.

One CA signs the apiserver's serving certificate; clients authenticate with
bearer tokens from a token file (one user per component) and verify the
apiserver against the CA, so nothing in the dev-cluster runs with TLS checks off.
A second CA, the front proxy's, signs the client certificate the apiserver
presents when it proxies to aggregated servers; the apiserver publishes it in
kube-system/extension-apiserver-authentication, where every component that
delegates authentication (a kube-scheduler in a pod, say) expects to find it.
Two more, the extender's, as the chart makes them: one signs its serving certificate for 127.0.0.1,
the other the client certificate kube-scheduler presents to it (mutual TLS).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

SERVICE_IP = "10.0.0.1"  # first address of the service range; the apiserver's in-cluster IP
NODE_IP = "10.88.0.1"  # the real node's address (`up --real-node`), where it reaches the apiserver
REAL_NODE = "netsched-node"
FRONT_PROXY_CLIENT = "front-proxy-client"  # the apiserver's name as a proxy (--requestheader-allowed-names)
API_DNS_NAMES = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
]


@dataclass(frozen=True)
class User:
    """A static-token identity; `groups` decide what bootstrap RBAC grants it."""

    name: str
    groups: tuple[str, ...] = ()


# Bootstrap RBAC already binds system:kube-scheduler and system:kube-controller-manager.
USERS = (
    User("admin", ("system:masters",)),
    User("system:kube-scheduler"),
    User("system:kube-controller-manager"),
    User("kwok", ("system:masters",)),
    User("netsched-extender"),  # granted netsched:extender by the dev-cluster (cluster/rbac.py)
    User("netsched-operator"),  # granted netsched:operator
    User(f"system:node:{REAL_NODE}", ("system:nodes",)),  # the real node's kubelet (Node authorizer)
    User("system:kube-proxy"),  # bootstrap RBAC binds system:node-proxier
)


def kubeconfig_name(user: User) -> str:
    return user.name.removeprefix("system:") + ".kubeconfig"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _cert(
    subject: str,
    key: rsa.RSAPrivateKey,
    issuer: x509.Name | None,
    issuer_key: rsa.RSAPrivateKey,
    ca: bool,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass(frozen=True)
class Pki:
    """Paths of everything `write_pki` creates under one directory."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.dir / "front-proxy-ca.crt"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.dir / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.dir / "front-proxy-client.key"

    @property
    def service_account_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def token_file(self) -> Path:
        return self.dir / "tokens.csv"

    # the extender's (write_extender_pki)
    @property
    def extender_ca_cert(self) -> Path:
        return self.dir / "extender-ca.crt"

    @property
    def extender_cert(self) -> Path:
        return self.dir / "extender.crt"

    @property
    def extender_key(self) -> Path:
        return self.dir / "extender.key"

    @property
    def extender_client_ca_cert(self) -> Path:
        return self.dir / "extender-client-ca.crt"

    @property
    def scheduler_client_cert(self) -> Path:
        return self.dir / "scheduler-client.crt"

    @property
    def scheduler_client_key(self) -> Path:
        return self.dir / "scheduler-client.key"


def write_pki(directory: Path) -> Pki:
    """Create the CA, the apiserver certificate, the service-account key and tokens."""
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert("netsched-dev-ca", ca_key, None, ca_key, ca=True)
    server_key = _key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in API_DNS_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", SERVICE_IP, NODE_IP)]
    server = _cert("kube-apiserver", server_key, ca.subject, ca_key, ca=False, sans=sans)

    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, pki.ca_key)
    pki.apiserver_cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    _write_key(server_key, pki.apiserver_key)
    _write_key(_key(), pki.service_account_key)

    proxy_ca_key, proxy_key = _key(), _key()
    proxy_ca = _cert("netsched-dev-front-proxy-ca", proxy_ca_key, None, proxy_ca_key, ca=True)
    proxy = _cert(FRONT_PROXY_CLIENT, proxy_key, proxy_ca.subject, proxy_ca_key, ca=False)
    pki.front_proxy_ca_cert.write_bytes(proxy_ca.public_bytes(serialization.Encoding.PEM))
    pki.front_proxy_client_cert.write_bytes(proxy.public_bytes(serialization.Encoding.PEM))
    _write_key(proxy_key, pki.front_proxy_client_key)

    lines = []
    for i, user in enumerate(USERS):
        groups = ",".join(user.groups)
        lines.append(f'{secrets.token_hex(24)},{user.name},uid-{i},"{groups}"')
    pki.token_file.write_text("\n".join(lines) + "\n")
    pki.token_file.chmod(0o600)
    return pki


def write_extender_pki(pki: Pki) -> Pki:
    """The extender's serving certificate for 127.0.0.1 with the CA kube-scheduler trusts for it, and the
    client certificate kube-scheduler presents with the CA the extender trusts for that: two CAs, so a
    serving certificate is never taken for a client's. Neither CA key is kept, as in the chart."""
    ca, cert, key = serving_certificate("127.0.0.1", ["localhost"], ip_addresses=("127.0.0.1",))
    pki.extender_ca_cert.write_bytes(ca)
    pki.extender_cert.write_bytes(cert)
    pki.extender_key.write_bytes(key)
    pki.extender_key.chmod(0o600)
    client_ca, client, client_key = client_certificate("netsched-scheduler")
    pki.extender_client_ca_cert.write_bytes(client_ca)
    pki.scheduler_client_cert.write_bytes(client)
    pki.scheduler_client_key.write_bytes(client_key)
    pki.scheduler_client_key.chmod(0o600)
    return pki


def client_certificate(common_name: str) -> tuple[bytes, bytes, bytes]:
    """A new CA and a client certificate it signs for `common_name`: (CA, certificate, key) as PEM."""
    ca_key, key = _key(), _key()
    ca = _cert(f"{common_name} client CA", ca_key, None, ca_key, ca=True)
    return _pems(ca, _cert(common_name, key, ca.subject, ca_key, ca=False), key)


def _pems(ca: x509.Certificate, cert: x509.Certificate, key: rsa.RSAPrivateKey) -> tuple[bytes, bytes, bytes]:
    pem = serialization.Encoding.PEM
    openssl = serialization.PrivateFormat.TraditionalOpenSSL
    key_pem = key.private_bytes(pem, openssl, serialization.NoEncryption())
    return ca.public_bytes(pem), cert.public_bytes(pem), key_pem


def serving_certificate(common_name: str, dns_names: list[str],
                        ip_addresses: tuple[str, ...] = ()) -> tuple[bytes, bytes, bytes]:
    """A new CA and a server certificate it signs for `dns_names` and `ip_addresses`: (CA, certificate,
    key) as PEM, for a server outside the dev-cluster's own PKI (the certificate a user brings to the
    chart, or a webhook the API server calls at https://127.0.0.1)."""
    ca_key, key = _key(), _key()
    ca = _cert(f"{common_name} CA", ca_key, None, ca_key, ca=True)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    return _pems(ca, _cert(common_name, key, ca.subject, ca_key, ca=False, sans=sans), key)


def read_tokens(pki: Pki) -> dict[str, str]:
    """Map user name -> bearer token from the token file."""
    tokens = {}
    for line in pki.token_file.read_text().splitlines():
        token, name, *_ = line.split(",")
        tokens[name] = token
    return tokens


def write_kubeconfig(path: Path, server: str, ca_cert: Path, user: str, token: str) -> Path:
    """A kubeconfig that verifies the apiserver against our CA and sends `token`."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "netsched-dev", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "netsched-dev", "context": {"cluster": "netsched-dev", "user": user}}],
        "current-context": "netsched-dev",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
