"""The Iceberg catalog the sink lands into, from its ``catalog`` option.

``catalog=NAME`` (default ``changestream``): a Hadoop catalog of that name in the
``warehouse`` folder. ``catalog.<property>=VALUE`` options pass Iceberg catalog properties
to ``spark.sql.catalog.<name>.<property>`` (``catalog.type``: ``hadoop``, ``jdbc``,
``hive``; ``catalog.uri``, ...); a value ``env:NAME`` is read from the environment. A JDBC
catalog's driver jar is found among Debian's packages or given as ``catalog.driver_jar``.
docs/lakehouse.md, "Catalogs", has every option."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from changestream.model.errors import SinkError

from ..options import java_cause

DEFAULT_NAME = "changestream"
#: JDBC URI scheme -> (Debian's driver jar, the package that installs it).
JDBC_DRIVERS = {
    "postgresql": ("/usr/share/java/postgresql.jar", "libpostgresql-jdbc-java"),
    "sqlite": ("/usr/share/java/sqlite-jdbc.jar", "libxerial-sqlite-jdbc-java"),
    "mariadb": ("/usr/share/java/mariadb-java-client.jar", "libmariadb-java"),
    "mysql": ("/usr/share/java/mariadb-java-client.jar", "libmariadb-java"),
}
_SECRET_WORDS = ("password", "secret", "token", "credential")


@dataclass(frozen=True)
class CatalogSettings:
    """A catalog: its name in Spark, its Iceberg properties and the jars it needs."""

    name: str
    properties: dict[str, str]
    jars: tuple[Path, ...] = field(default=())

    @property
    def kind(self) -> str:
        return self.properties.get("type") or "custom"

    @property
    def warehouse(self) -> str | None:
        return self.properties.get("warehouse")

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings that make the catalog."""
        prefix = f"spark.sql.catalog.{self.name}"
        return {prefix: "org.apache.iceberg.spark.SparkCatalog",
                **{f"{prefix}.{key}": value for key, value in self.properties.items()}}

    def describe(self) -> str:
        """The catalog in words for messages (no secrets)."""
        shown = {k: ("***" if any(w in k for w in _SECRET_WORDS) else v)
                 for k, v in self.properties.items()}
        details = ", ".join(f"{k}={v}" for k, v in shown.items() if k != "type")
        return f"catalog {self.name} ({self.kind}: {details})"


def open_error(settings: CatalogSettings, exc: BaseException) -> str:
    """One line saying why ``settings``' catalog could not be opened and which option to
    look at, from the deepest cause of ``exc`` (a Py4J error from the catalog's first
    use)."""
    cause = java_cause(exc)
    lowered = cause.lower()
    if any(w in lowered for w in ("password", "authentication", "access denied",
                                  "permission denied for", "role ")):
        option = "catalog.jdbc.user and catalog.jdbc.password"
    elif any(w in lowered for w in ("connect", "unknownhost", "no suitable driver",
                                    "path to", "does not exist", "database")):
        option = "catalog.uri"
    else:
        option = "the catalog.* options"
    return (f"spark sink (iceberg): cannot open {settings.describe()}: {cause} (check "
            f"{option})")


def catalog_settings(catalog: str | Mapping[str, Any] | None,
                     warehouse: str | os.PathLike[str] | None) -> CatalogSettings:
    """The catalog the options ``catalog`` (a name or a mapping of properties) and
    ``warehouse`` name (see the module docstring)."""
    if catalog is None or isinstance(catalog, str):
        name, given = (catalog or DEFAULT_NAME), {}
    else:
        given = _flat(catalog)
        name = str(given.pop("name", DEFAULT_NAME) or DEFAULT_NAME)
    if not name.replace("_", "").isalnum():
        raise SinkError(f"spark sink (iceberg): option catalog.name={name!r}: a catalog "
                        "name is letters, digits and underscores")
    driver = given.pop("driver_jar", None)
    properties = {key: _value(f"catalog.{key}", value) for key, value in given.items()}
    if "catalog-impl" not in properties:
        properties.setdefault("type", "hadoop")
    if warehouse and "warehouse" not in properties:
        properties["warehouse"] = _location(str(warehouse))
    kind = properties.get("type")
    if kind in ("hadoop", "jdbc") and not properties.get("warehouse"):
        raise SinkError(f"spark sink (iceberg): a {kind} catalog needs warehouse=FOLDER "
                        "(or catalog.warehouse=...): where the tables' files go")
    jars: tuple[Path, ...] = ()
    if kind == "jdbc":
        jars = (_driver_jar(properties, driver),)
    elif driver:
        jars = (Path(str(driver)).expanduser(),)
    return CatalogSettings(name, properties, jars)


def _flat(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings (a configuration file's ``jdbc = {user = ...}``) as dotted keys."""
    flat: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _value(option: str, value: Any) -> str:
    """An option's value as text; ``env:NAME`` read from the environment."""
    text = str(value)
    if text.startswith("env:"):
        variable = text[4:]
        if variable not in os.environ:
            raise SinkError(f"spark sink (iceberg): option {option}={text}: environment "
                            f"variable {variable} is not set")
        return os.environ[variable]
    return text


def _location(warehouse: str) -> str:
    """A warehouse given as a local folder made absolute; a URI (``s3://``, ...) as is."""
    if urlparse(warehouse).scheme in ("", "file"):
        return str(Path(warehouse.removeprefix("file:")).expanduser().absolute())
    return warehouse


def _driver_jar(properties: dict[str, str], given: Any) -> Path:
    """The JDBC driver jar of a JDBC catalog: ``catalog.driver_jar``, else Debian's for
    the URI's database."""
    uri = properties.get("uri", "")
    if not uri.startswith("jdbc:"):
        raise SinkError(f"spark sink (iceberg): a jdbc catalog needs catalog.uri=jdbc:... "
                        f"(got {uri or 'none'})")
    if given:
        path = Path(str(given)).expanduser()
        if not path.is_file():
            raise SinkError(f"spark sink (iceberg): option catalog.driver_jar={given}: no "
                            "such file")
        return path
    database = uri[5:].split(":", 1)[0]
    known = JDBC_DRIVERS.get(database)
    if known is None:
        raise SinkError(f"spark sink (iceberg): catalog.uri {uri}: no driver known for "
                        f"{database!r}; give its jar as catalog.driver_jar=PATH")
    path, package = Path(known[0]), known[1]
    if not path.is_file():
        raise SinkError(f"spark sink (iceberg): catalog.uri {uri} needs the {database} JDBC "
                        f"driver ({path}): install Debian's {package}, or give "
                        "catalog.driver_jar=PATH")
    return path
