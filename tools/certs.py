"""`martlet certs create DIR`: a development CA and certificates it signs, for trying TLS.

Writes, in DIR (created if needed; existing files are kept unless --force):
  ca.pem                      the CA's certificate: what clients and the broker trust
  ca.key                      its key (keep it to sign more; never give it out)
  broker.pem, broker.key      the broker's chain (its certificate, then the CA's) and key, for
                              the names and addresses given with --host (localhost and
                              127.0.0.1 by default); it also calls other brokers with it
  client.pem, client.key      a client certificate (CN=client) for listeners that ask for one

Keys are EC P-256, unencrypted, readable by their owner only; certificates last --days. This is
for development: a deployment uses certificates from its own CA.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

FILES = ("ca.pem", "ca.key", "broker.pem", "broker.key", "client.pem", "client.key")
DAYS = 365


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(prog="martlet certs", description=__doc__.split("\n\n")[0])
    commands = command.add_subparsers(dest="command", required=True)
    create_cmd = commands.add_parser("create", help="a development CA, a broker and a client certificate")
    create_cmd.add_argument("dir", metavar="DIR")
    create_cmd.add_argument("--host", action="append", metavar="NAME|ADDRESS",
                            help="a name or address clients reach the broker by (repeat; default: localhost, 127.0.0.1)")
    create_cmd.add_argument("--days", type=int, default=DAYS, help=f"how long the certificates last ({DAYS})")
    create_cmd.add_argument("--force", action="store_true", help="replace files already there")
    return command


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    folder = Path(args.dir)
    present = [name for name in FILES if (folder / name).exists()]
    if present and not args.force:
        print(f"martlet certs: {folder} already has {', '.join(present)} (--force replaces them)", file=sys.stderr)
        return 2
    if args.days < 1:
        print("martlet certs: --days must be at least 1", file=sys.stderr)
        return 2
    create(folder, args.host or ["localhost", "127.0.0.1"], args.days)
    print(f"wrote {', '.join(FILES)} to {folder}")
    return 0


def create(folder: Path, hosts: list[str], days: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Martlet development CA")])
    ca = (_builder(ca_name, ca_name, ca_key.public_key(), now, days)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    _write(folder / "ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    _write_key(folder / "ca.key", ca_key)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    # The broker's certificate serves clients and, on an SSL inter-broker listener, calls other brokers.
    leaves: tuple[tuple[str, str, list[x509.ObjectIdentifier], list[x509.GeneralName]], ...] = (
        ("broker", hosts[0], [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], names),
        ("client", "client", [ExtendedKeyUsageOID.CLIENT_AUTH], []))
    for stem, common_name, usages, alternative in leaves:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (_builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]), ca_name,
                            key.public_key(), now, days)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if alternative:
            builder = builder.add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        certificate = builder.sign(ca_key, hashes.SHA256())
        _write(folder / f"{stem}.pem", certificate.public_bytes(serialization.Encoding.PEM) +
               ca.public_bytes(serialization.Encoding.PEM))
        _write_key(folder / f"{stem}.key", key)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
             now: datetime.datetime, days: int) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))  # clocks a little behind still accept it
            .not_valid_after(now + datetime.timedelta(days=days)))


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)
