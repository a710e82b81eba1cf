"""TLS to the server: an ``ssl.SSLContext`` for PyMySQL from the ``[source.tls]`` settings."""

from __future__ import annotations

import ssl

from changestream.model.errors import ConfigError
from changestream.runtime.config import TlsConfig


def tls_context(tls: TlsConfig) -> ssl.SSLContext | None:
    """The context for ``tls.mode`` (``None`` when TLS is disabled)."""
    if tls.mode == "disabled":
        return None
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
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"source.tls: {exc}") from None
    return context
