"""`martlet certs create`: a CA, and a broker and a client certificate it signs."""

import ssl
import stat

from cryptography import x509

from martlet.tools.certs import FILES, main


def test_create_writes_a_ca_and_certificates_it_signs_and_keeps_what_is_there(tmp_path, capsys):
    folder = tmp_path / "certs"
    assert main(["create", str(folder), "--host", "broker.example", "--host", "10.0.0.7", "--days", "2"]) == 0
    assert sorted(path.name for path in folder.iterdir()) == sorted(FILES)
    for key in ("ca.key", "broker.key", "client.key"):
        assert stat.S_IMODE((folder / key).stat().st_mode) == 0o600
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "broker.pem", folder / "broker.key")  # the key matches the chain
    broker = x509.load_pem_x509_certificate((folder / "broker.pem").read_bytes())
    names = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["broker.example"]
    assert [str(address) for address in names.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    ca = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
    client = x509.load_pem_x509_certificate((folder / "client.pem").read_bytes())
    for leaf in (broker, client):
        leaf.verify_directly_issued_by(ca)
    assert (broker.not_valid_after_utc - broker.not_valid_before_utc).days == 2
    before = (folder / "ca.pem").read_bytes()
    assert main(["create", str(folder)]) == 2
    assert "--force replaces them" in capsys.readouterr().err
    assert (folder / "ca.pem").read_bytes() == before
    assert main(["create", str(folder), "--force"]) == 0
    assert (folder / "ca.pem").read_bytes() != before
