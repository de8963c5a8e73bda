"""Helpers for tests of listeners and TLS: certificates from `martlet certs create`, a config
with an SSL listener, and the listener lines `martlet serve` prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

WAIT_S = 30.0


def make_certs(folder: Path) -> Path:
    """A development CA with broker and client certificates in `folder` (created)."""
    subprocess.run([sys.executable, "-m", "martlet.cli", "certs", "create", str(folder)], check=True,
                   capture_output=True, timeout=WAIT_S)
    return folder


def ssl_config(certs: Path, client_auth: str = "none", more: str = "") -> str:
    """A config file's text: an SSL listener on localhost (first) and a PLAINTEXT one, both on
    free ports; `more` goes into [tls]."""
    return f"""[gateway]
listeners = ["SSL://localhost:0", "PLAINTEXT://127.0.0.1:0"]

[tls]
certificate = "{certs / 'broker.pem'}"
key = "{certs / 'broker.key'}"
ca = "{certs / 'ca.pem'}"
client_auth = "{client_auth}"
{more}
"""


def listener_addresses(broker: Any, count: int = 2) -> dict[str, str]:
    """{listener name: "host:port" as bound} from the "martlet listener NAME on ADDRESS" lines
    a broker with several listeners prints after its first line."""
    lines = [broker._read_line(WAIT_S, "martlet listener ").split(" ") for _ in range(count)]
    return {words[2]: words[4] for words in lines}


def pem_one_line(path: Path) -> str:
    """A PEM file as a Java properties value (its line breaks escaped)."""
    return path.read_text().strip().replace("\n", "\\n")
