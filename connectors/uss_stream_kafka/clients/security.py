"""Check TLS and SASL against the brokers before the service starts: fail fast, and say why.

kafka-python treats a refused certificate or a wrong SASL password like an unreachable broker: it
retries until its bootstrap timeout (30 s) and then raises ``KafkaTimeoutError: Unable to
bootstrap``, the cause only in its log. :func:`check_security` does the same steps once, on its
own socket, with the service's settings: TCP connect, the TLS handshake (the broker's certificate
checked against ``ssl_cafile`` or the system's CAs, and its host name), then the SASL handshake and
authentication (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512: RFC 5802, on Kafka's SaslHandshake v1 and
SaslAuthenticate v1 requests). A failure is a :class:`SecurityCheckError` with one line that names
the broker, the step and the option to look at.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
from typing import Any

from uss_stream_kafka.clients.config import ClientConfig
from uss_stream_kafka.exceptions import SecurityCheckError

__all__ = ["check_security", "scram_client_final"]

_SASL_HANDSHAKE, _SASL_AUTHENTICATE, _API_VERSIONS = 17, 36, 18
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def check_security(config: ClientConfig, timeout: float = 10.0) -> None:
    """Connect to a bootstrap server as the service's clients will, and authenticate once.

    Tries the bootstrap servers in order until one completes TLS and SASL (``PLAINTEXT``: until
    one answers a Kafka request in plain text); raises :class:`SecurityCheckError` if none does
    because of TLS or SASL, or because a ``PLAINTEXT`` client met a TLS listener (a server that
    cannot be reached is left to the clients, which report it). The SASL mechanisms checked are
    PLAIN and SCRAM; GSSAPI and OAUTHBEARER are left to the clients.
    """
    protocol = config.security_protocol
    failures = []
    for server in [s.strip() for s in config.bootstrap_servers.split(",") if s.strip()]:
        host, _, port = server.rpartition(":")
        host = host.strip("[]")
        try:
            sock = socket.create_connection((host, int(port)), timeout=timeout)
        except (OSError, ValueError):
            continue  # unreachable: the clients say so
        try:
            sock.settimeout(timeout)
            if protocol == "PLAINTEXT":
                _plaintext(sock, host, int(port), server, timeout)
            if protocol in ("SSL", "SASL_SSL"):
                sock = _tls(sock, host, config, server)
            if protocol.startswith("SASL_") and config.sasl_mechanism in ("PLAIN", *_SCRAM_HASHES):
                _authenticate(sock, config, server)
            return
        except SecurityCheckError as error:
            failures.append(error)
        except (OSError, struct.error) as error:  # the broker closed or did not answer
            failures.append(
                SecurityCheckError(
                    f"{server}: the broker closed the connection during the {protocol} handshake "
                    f"({_text(error)}): is {server} a {protocol} listener?"
                )
            )
        finally:
            sock.close()
    if failures:
        raise failures[0]


def _tls(sock: socket.socket, host: str, config: ClientConfig, server: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=config.ssl_cafile)
    context.check_hostname = config.ssl_check_hostname
    if config.ssl_certfile:
        context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile, config.ssl_password)
    if config.ssl_crlfile:
        context.load_verify_locations(config.ssl_crlfile)
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as error:
        trusted = f"the CA in {config.ssl_cafile}" if config.ssl_cafile else "the system's CAs"
        raise SecurityCheckError(
            f"{server}: TLS: the broker's certificate is not trusted by {trusted} ({error.verify_message}): "
            "give the CA that signed it with --ssl-cafile"
            + (" (or check the host name, --no-ssl-check-hostname)" if "hostname" in str(error) else "")
        ) from None
    except ssl.SSLError as error:
        raise SecurityCheckError(f"{server}: TLS handshake failed: {_text(error)}") from None


def _plaintext(sock: socket.socket, host: str, port: int, server: str, timeout: float) -> None:
    """One ApiVersions request in plain text; if the broker closes the connection instead of
    answering, a TLS handshake on the same port tells a TLS listener (a :class:`SecurityCheckError`)
    from a broker that is only unwell (left to the clients)."""
    try:
        _Connection(sock).request(_API_VERSIONS, 0, b"")
        return
    except (OSError, struct.error):
        pass
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only whether the port speaks TLS, nothing is sent
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as probe,
            context.wrap_socket(probe, server_hostname=host),
        ):
            pass
    except (OSError, ValueError):
        return
    raise SecurityCheckError(
        f"{server}: this is a TLS listener and --security-protocol is PLAINTEXT: "
        "use SSL or SASL_SSL (with --ssl-cafile), or the broker's plaintext listener"
    )


def _authenticate(sock: socket.socket, config: ClientConfig, server: str) -> None:
    mechanism = config.sasl_mechanism
    connection = _Connection(sock)
    body = connection.request(_SASL_HANDSHAKE, 1, _string(mechanism))
    error_code, count = struct.unpack_from(">hi", body)
    if error_code:
        offered, offset = [], 6
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", body, offset)
            offered.append(body[offset + 2 : offset + 2 + length].decode())
            offset += 2 + length
        raise SecurityCheckError(
            f"{server}: SASL mechanism {mechanism} is not enabled on this listener "
            f"(it offers {', '.join(offered) or 'none'}): check --sasl-mechanism"
        )
    username, password = config.sasl_username or "", config.sasl_password or ""
    if mechanism == "PLAIN":
        _token(connection, b"\0" + username.encode() + b"\0" + password.encode(), server, username)
        return
    nonce = base64.b64encode(os.urandom(24)).decode()
    first_bare = f"n={_saslname(username)},r={nonce}"
    server_first = _token(connection, f"n,,{first_bare}".encode(), server, username).decode()
    final, expected_signature = scram_client_final(mechanism, password, first_bare, server_first, nonce)
    server_final = _token(connection, final.encode(), server, username).decode()
    if server_final != "v=" + base64.b64encode(expected_signature).decode():
        raise SecurityCheckError(f"{server}: SASL {mechanism}: the broker's signature does not verify")


def scram_client_final(
    mechanism: str, password: str, client_first_bare: str, server_first: str, nonce: str
) -> tuple[str, bytes]:
    """The SCRAM client-final message and the server signature to expect (RFC 5802, section 3).

    Examples
    --------
    RFC 7677's SCRAM-SHA-256 test vector (user ``user``, password ``pencil``):

    >>> final, signature = scram_client_final(
    ...     "SCRAM-SHA-256", "pencil", "n=user,r=rOprNGfwEbeRWgbNEkqO",
    ...     "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    ...     "rOprNGfwEbeRWgbNEkqO")
    >>> final
    'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ='
    >>> base64.b64encode(signature).decode()
    '6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4='

    """
    digest = _SCRAM_HASHES[mechanism]
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    server_nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
    if not server_nonce.startswith(nonce):
        raise SecurityCheckError("SASL SCRAM: the broker's nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={server_nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_signature = hmac.digest(stored_key, auth_message, digest)
    proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
    server_key = hmac.digest(salted, b"Server Key", digest)
    server_signature = hmac.digest(server_key, auth_message, digest)
    return f"{without_proof},p={base64.b64encode(proof).decode()}", server_signature


def _token(connection: _Connection, token: bytes, server: str, username: str) -> bytes:
    """One SaslAuthenticate round trip; the broker's token."""
    body = connection.request(_SASL_AUTHENTICATE, 1, struct.pack(">i", len(token)) + token)
    error_code, length = struct.unpack_from(">hh", body)
    offset = 4
    message = ""
    if length >= 0:
        message = body[offset : offset + length].decode(errors="replace")
        offset += length
    if error_code:
        raise SecurityCheckError(
            f"{server}: SASL authentication of user {username!r} failed: "
            f"{message or f'error code {error_code}'}: check --sasl-username and the password "
            "(USS_KAFKA_SASL_PASSWORD)"
        )
    (size,) = struct.unpack_from(">i", body, offset)
    return body[offset + 4 : offset + 4 + max(size, 0)]


class _Connection:
    """Kafka request/response framing (request header v1, response header v0) on a socket."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.correlation = 0

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + _string("uss-stream-check")
        message = header + body
        self.sock.sendall(struct.pack(">i", len(message)) + message)
        (size,) = struct.unpack(">i", self._read(4))
        response = self._read(size)
        (correlation,) = struct.unpack_from(">i", response)
        if correlation != self.correlation:
            raise OSError(f"response to request {correlation}, expected {self.correlation}")
        return response[4:]

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise OSError("connection closed by the broker")
            data += chunk
        return data


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _text(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
