# Test certificates: a CA, a server certificate for 127.0.0.1/localhost, and
# client certificates (a good one, an expired one, one from another CA, one
# whose subject no mapping rule takes), written as PEM files. Made with the
# `cryptography` package, which can date a certificate in the past.

import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

import ipaddress


def _name(cn, ou=None, o="rutomq"):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path, key, key_format):
    """PKCS#8, or the key type's own format: SEC1 for EC, PKCS#1 for RSA."""
    fmt = {"pkcs8": serialization.PrivateFormat.PKCS8,
           "traditional": serialization.PrivateFormat.TraditionalOpenSSL}[key_format]
    with open(path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()))


def _write_cert(path, *certs):
    with open(path, "wb") as f:
        for c in certs:
            f.write(c.public_bytes(serialization.Encoding.PEM))


class Certs:
    """PEM files under `dir`: ca, server_cert/server_key, and per client
    `client(name)` -> (cert, key) paths."""

    def __init__(self, dir, existing=False):
        self.dir = str(dir)
        if existing:
            # The files another process made: paths only, nothing written.
            self.ca, self.other_ca = self._path("ca.pem"), self._path("other-ca.pem")
            self.server_cert, self.server_key = self._path("server.pem"), self._path("server.key")
            self.clients = None
            return
        os.makedirs(self.dir, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        self._now = now
        self.ca_key, self.ca_cert = self._ca("rutomq test CA")
        self.ca = self._path("ca.pem")
        _write_cert(self.ca, self.ca_cert)
        self.other_ca_key, self.other_ca_cert = self._ca("someone else's CA")
        self.other_ca = self._path("other-ca.pem")
        _write_cert(self.other_ca, self.other_ca_cert)
        self.server_cert, self.server_key = self.issue(
            "server", _name("localhost", "brokers"), server=True)
        self.clients = {}

    def _path(self, name):
        return os.path.join(self.dir, name)

    def _ca(self, cn):
        key = _key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(self._now - datetime.timedelta(days=1))
                .not_valid_after(self._now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        return key, cert

    def issue(self, file_stem, subject, *, server=False, expired=False, other_ca=False,
              days=30, rsa_key=False, key_format="pkcs8"):
        """Writes `<file_stem>.pem` (the certificate, then the CA) and
        `<file_stem>.key` (a P-256 key, or RSA 2048; PKCS#8 or the key
        type's traditional format); returns their paths."""
        ca_key, ca_cert = ((self.other_ca_key, self.other_ca_cert) if other_ca
                           else (self.ca_key, self.ca_cert))
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if rsa_key else _key()
        if expired:
            before, after = self._now - datetime.timedelta(days=10), self._now - datetime.timedelta(days=1)
        else:
            before, after = self._now - datetime.timedelta(days=1), self._now + datetime.timedelta(days=days)
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(before).not_valid_after(after)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            b = b.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                                critical=False)
        else:
            b = b.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                                critical=False)
        cert = b.sign(ca_key, hashes.SHA256())
        cert_path, key_path = self._path(f"{file_stem}.pem"), self._path(f"{file_stem}.key")
        _write_cert(cert_path, cert, ca_cert)
        _write_key(key_path, key, key_format)
        return cert_path, key_path

    def client(self, name, *, ou="eng", **kw):
        """A client certificate with subject CN=name,OU=ou,O=rutomq."""
        stem = f"client-{name}" + ("-expired" if kw.get("expired") else "") + (
            "-other" if kw.get("other_ca") else "")
        if self.clients is None:
            return self._path(f"{stem}.pem"), self._path(f"{stem}.key")
        if stem not in self.clients:
            self.clients[stem] = self.issue(stem, _name(name, ou), **kw)
        return self.clients[stem]

    def client_pem(self, name, **kw):
        """One file with the client's key and certificate chain (Java's PEM
        keystore)."""
        cert, key = self.client(name, **kw)
        path = self._path(os.path.basename(cert).replace(".pem", "-keystore.pem"))
        with open(path, "w") as out:
            out.write(open(key).read())
            out.write(open(cert).read())
        return path
