"""TLS to the server: PyMySQL's connection options from the ``[source.tls]`` settings."""

from __future__ import annotations

import functools
import ssl
from typing import Any

import pymysql

from changestream.model.errors import ConfigError
from changestream.model.modes import TlsMode
from changestream.model.record import record
from changestream.model.setting import setting


@record
class TlsConfig:
    """TLS to the server: ``mode`` is one of preferred (the default: encrypted when the
    server offers TLS, certificate not checked), disabled, required (encrypted, certificate
    not checked), verify-ca (the server's certificate is signed by ``ca``) and
    verify-identity (also issued for the host name). ``cert``/``key``: a client
    certificate."""

    mode: TlsMode = setting("preferred", doc=(
        "preferred (encrypted when the server offers TLS, certificate not checked) | "
        "disabled | required (encrypted, certificate not checked) | verify-ca | "
        "verify-identity"))
    ca: str = setting("", doc="CA certificate (PEM) for verify-ca and verify-identity.")
    cert: str = setting("", doc="Client certificate and key (PEM), if the server asks for one.")
    key: str = setting("")


def tls_options(tls: TlsConfig) -> dict[str, Any]:
    """PyMySQL's connection options for ``tls.mode``: ``preferred`` (the default, as the
    MySQL clients': encrypted when the server offers TLS, its certificate not checked) leaves
    PyMySQL's own behaviour, ``disabled`` turns TLS off, the others pass a context."""
    if tls.mode == "preferred":
        return {}
    if tls.mode == "disabled":
        return {"ssl_disabled": True}
    return {"ssl": tls_context(tls)}


def tls_context(tls: TlsConfig) -> ssl.SSLContext:
    """The context for ``tls.mode`` (required, verify-ca or verify-identity)."""
    try:
        context = ssl.create_default_context(cafile=tls.ca or None)
        if tls.mode == "required":
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif tls.mode == "verify-ca":
            context.check_hostname = False
            context.verify_mode = ssl.CERT_REQUIRED
        if tls.cert:
            context.load_cert_chain(tls.cert, tls.key or None)
    except FileNotFoundError as exc:
        raise ConfigError(f"source.tls: {exc.filename}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as exc:  # ValueError: a NUL in a path
        raise ConfigError(f"source.tls: {exc}") from None
    return context


@functools.cache
def _unverified_context() -> ssl.SSLContext:
    """What PyMySQL encrypts with when TLS is only preferred (no certificate checked), made
    once per process and without the system's CA certificates, which it never uses:
    PyMySQL loads them anew for every connection, a CPU cost per connection."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class SourceConnection(pymysql.connections.Connection):
    """PyMySQL's connection, but for the context of ``preferred`` TLS (see
    :func:`_unverified_context`)."""

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if isinstance(sslp, dict) and not sslp:  # preferred: PyMySQL's own defaults
            return _unverified_context()
        context: ssl.SSLContext = super()._create_ssl_ctx(sslp)  # type: ignore[misc]
        return context


def open_connection(**settings: Any) -> Any:
    """``pymysql.connect(**settings)`` with :class:`SourceConnection`."""
    return SourceConnection(**settings)
