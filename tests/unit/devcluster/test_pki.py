import ipaddress

import yaml
from cryptography import x509

from netsched.devcluster.pki import (
    FRONT_PROXY_CLIENT,
    USERS,
    read_tokens,
    serving_certificate,
    write_kubeconfig,
    write_pki,
)


def test_apiserver_certificate_is_signed_by_the_ca_and_names_local_addresses(tmp_path):
    pki = write_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(pki.apiserver_cert.read_bytes())

    server.verify_directly_issued_by(ca)  # raises if not
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert oct(pki.ca_key.stat().st_mode & 0o777) == "0o600"


def test_every_user_gets_a_distinct_token_and_a_kubeconfig(tmp_path):
    pki = write_pki(tmp_path)
    tokens = read_tokens(pki)
    assert set(tokens) == {u.name for u in USERS}
    assert len(set(tokens.values())) == len(USERS)

    path = write_kubeconfig(tmp_path / "a.kubeconfig", "https://127.0.0.1:1", pki.ca_cert, "admin",
                            tokens["admin"])
    config = yaml.safe_load(path.read_text())
    assert config["users"][0]["user"]["token"] == tokens["admin"]
    assert config["clusters"][0]["cluster"]["certificate-authority"] == str(pki.ca_cert)


def test_the_front_proxy_client_is_signed_by_a_ca_of_its_own(tmp_path):
    pki = write_pki(tmp_path)
    proxy_ca = x509.load_pem_x509_certificate(pki.front_proxy_ca_cert.read_bytes())
    client = x509.load_pem_x509_certificate(pki.front_proxy_client_cert.read_bytes())

    client.verify_directly_issued_by(proxy_ca)
    assert client.subject.rfc4514_string() == f"CN={FRONT_PROXY_CLIENT}"
    assert proxy_ca.subject != x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()).subject
    assert oct(pki.front_proxy_client_key.stat().st_mode & 0o777) == "0o600"


def test_a_serving_certificate_comes_with_the_ca_that_signed_it():
    ca_pem, cert_pem, key_pem = serving_certificate("svc.ns.svc", ["svc", "svc.ns.svc"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["svc", "svc.ns.svc"]
    assert key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----")


def test_a_serving_certificate_can_name_ip_addresses():
    _, cert_pem, _ = serving_certificate("kueue-webhook", ["localhost"], ip_addresses=("127.0.0.1",))
    sans = x509.load_pem_x509_certificate(cert_pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
