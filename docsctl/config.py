"""Settings, read in one place: defaults < docsctl.toml < DOCSCTL_* environment < CLI flags.

The password and the token are kept out of repr() and never printed; `Settings.describe()` is what
may be shown.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from docsctl.errors import ConfigError

# The newest release whose distribution and k-NN plugin both resolve from Maven Central and
# that runs on JDK 21+ (checked 2026-11: 3.7.0 has no k-NN plugin published yet).
OPENSEARCH_VERSION = "3.6.0"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
CONFIG_FILE_NAME = "docsctl.toml"


QUERY_RUNTIMES = ("onnx", "torch")  # how queries are embedded (docsctl.embedding.Embedder)


def check_query_runtime(value: str) -> str:
    """`value` when it names a query runtime; ConfigError otherwise."""
    if value not in QUERY_RUNTIMES:
        raise ConfigError(f"query_runtime must be one of {', '.join(QUERY_RUNTIMES)}, not {value!r}")
    return value


def redact_url(url: str) -> str:
    """`url` fit to show: a password in it (https://user:secret@host) becomes ********."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:********@{host}"


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "docsctl"


def _default_data_dir() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "docsctl"


@dataclass(frozen=True)
class SourceConfig:
    """A documentation source declared in docsctl.toml."""

    name: str
    path: str  # a folder; for git a repository URL or local repository path; for site the start URL
    kind: str = "dir"  # dir | git | site
    refs: tuple[str, ...] = ()  # git: branches, tags or commits; several refs index several versions
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    category_rules: tuple[tuple[str, str], ...] = ()
    base_url: str | None = None
    version: str = ""  # the version label; git sources with several refs are labelled by ref
    version_from_ref: bool = False
    site: SiteSettings | None = None  # kind = "site": how to crawl it


@dataclass(frozen=True)
class SiteSettings:
    """How a website source is crawled; `include`/`exclude` of its SourceConfig are URL path globs."""

    max_pages: int = 10_000
    max_depth: int = 10
    requests_per_second: float = 2.0  # per host; a slower robots.txt Crawl-delay wins
    concurrency: int = 4  # requests in flight per host
    timeout_seconds: float = 30.0
    max_page_mb: float = 10.0
    retries: int = 3  # after the first attempt, on 429, 5xx, timeouts and connection errors
    backoff_seconds: float = 1.0  # the first retry's wait, doubled for each further one (Retry-After wins)
    max_retry_after_seconds: float = 120.0  # a server asking for a longer wait has the page skipped


SITE_KEYS = {
    "max_pages": int,
    "max_depth": int,
    "requests_per_second": float,
    "concurrency": int,
    "timeout_seconds": float,
    "max_page_mb": float,
    "retries": int,
    "backoff_seconds": float,
    "max_retry_after_seconds": float,
}


def site_settings(entry: dict[str, Any], where: str) -> SiteSettings:
    """The crawl settings of one [[source]] table of kind "site"; ConfigError on a bad value."""
    values: dict[str, Any] = {}
    for key, kind in SITE_KEYS.items():
        if key not in entry:
            continue
        raw = entry[key]
        if isinstance(raw, bool) or not isinstance(raw, int | float) or (kind is int and not isinstance(raw, int)):
            raise ConfigError(f"{where}: {key} must be a{'n integer' if kind is int else ' number'}, not {raw!r}")
        if raw < 0 or (raw == 0 and key not in {"retries", "backoff_seconds"}):
            raise ConfigError(f"{where}: {key} must be positive, not {raw!r}")
        values[key] = kind(raw)
    return SiteSettings(**values)


@dataclass(frozen=True)
class Settings:
    backend: str = "auto"  # auto | sqlite | opensearch
    opensearch_url: str | None = None
    opensearch_user: str | None = None
    opensearch_password: str | None = field(default=None, repr=False)
    opensearch_ca_file: str | None = None
    opensearch_verify: bool = True
    index_alias: str = "docsctl-chunks"
    model: str = DEFAULT_MODEL
    query_runtime: str = "onnx"  # onnx | torch: what embeds queries (indexing always uses torch)
    data_dir: Path = field(default_factory=_default_data_dir)
    cache_dir: Path = field(default_factory=default_cache_dir)
    shards: int = 1
    replicas: int = 0
    # The local node that `docsctl opensearch up` manages.
    opensearch_version: str = OPENSEARCH_VERSION
    opensearch_port: int = 9200
    opensearch_heap_min: str = "512m"
    opensearch_heap_max: str = "1g"
    java_home: str | None = None
    maven_repository: str = "https://repo1.maven.org/maven2"
    # A bearer token `docsctl serve --transport http` requires of every request (none: no check).
    token: str | None = field(default=None, repr=False)
    sources: tuple[SourceConfig, ...] = ()

    @property
    def backend_name(self) -> str:
        """The backend in use: OpenSearch once a URL is configured, else the embedded one."""
        if self.backend != "auto":
            return self.backend
        return "opensearch" if self.opensearch_url else "sqlite"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / f"{self.index_alias}.reindex.lock"

    @property
    def embedding_cache_path(self) -> Path:
        return self.cache_dir / "embeddings.sqlite"

    def describe(self) -> dict[str, Any]:
        """Settings safe to print: the password is masked."""
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        for secret in ("opensearch_password", "token"):
            if shown[secret]:
                shown[secret] = "********"
        if shown["opensearch_url"]:
            shown["opensearch_url"] = redact_url(shown["opensearch_url"])
        return {key: str(value) if isinstance(value, Path) else value for key, value in shown.items()}


_SCALARS = {f.name: f for f in fields(Settings) if f.name != "sources"}


def _coerce(name: str, raw: Any) -> Any:
    kind = _SCALARS[name].type
    try:
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            value = str(raw).strip().lower()
            if value in {"1", "true", "yes", "on"}:
                return True
            if value in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if kind == "int":
            if isinstance(raw, bool | float):  # int() would quietly make 2.5 into 2 and true into 1
                raise ValueError(raw)
            return int(raw)
        if kind == "Path":
            return Path(str(raw)).expanduser()
    except ValueError:
        raise ConfigError(f"setting {name!r} has an invalid value {raw!r} (expected {kind})") from None
    return None if raw is None else str(raw)


def _parse_sources(raw: Any, origin: Path) -> tuple[SourceConfig, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{origin}: [[source]] must be an array of tables")
    sources = []
    for entry in raw:
        kind = str(entry.get("kind", "dir")) if isinstance(entry, dict) else ""
        where = "path" if kind != "site" else "url"
        if not isinstance(entry, dict) or "name" not in entry or where not in entry:
            raise ConfigError(f"{origin}: every [[source]] needs a name and a path (a url for kind 'site')")
        rules = tuple((str(glob), str(cat)) for glob, cat in dict(entry.get("categories", {})).items())
        if kind not in {"dir", "git", "site"}:
            raise ConfigError(f"{origin}: source {entry['name']!r} has kind {kind!r}; use 'dir', 'git' or 'site'")
        site = None
        if kind == "site":
            path = str(entry["url"])
            if not path.startswith(("http://", "https://")):
                raise ConfigError(f"{origin}: source {entry['name']!r}: url must start with http:// or https://")
            site = site_settings(entry, f"{origin}: source {entry['name']!r}")
        else:
            unexpected = sorted(key for key in (*SITE_KEYS, "url") if key in entry)
            if unexpected:
                raise ConfigError(f"{origin}: source {entry['name']!r}: {', '.join(unexpected)} is for kind 'site'")
            path = str(entry["path"])
            is_url = "://" in path or "@" in path.split("/")[0]
            if not is_url and not Path(path).expanduser().is_absolute():
                path = str((origin.parent / path).resolve())
        raw_refs = entry.get("ref", entry.get("refs", ()))
        refs = (raw_refs,) if isinstance(raw_refs, str) else tuple(str(ref) for ref in raw_refs)
        if refs and kind != "git":
            raise ConfigError(f"{origin}: source {entry['name']!r}: ref is for git sources only")
        sources.append(
            SourceConfig(
                name=str(entry["name"]),
                path=path,
                kind=kind,
                refs=refs,
                include=tuple(entry.get("include", ())),
                exclude=tuple(entry.get("exclude", ())),
                category_rules=rules,
                base_url=entry.get("base_url"),
                version=str(entry.get("version", "")),
                version_from_ref=bool(entry.get("version_from_ref", len(refs) > 1)),
                site=site,
            )
        )
    names = [source.name for source in sources]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"{origin}: source names must be unique: {', '.join(duplicates)}")
    return tuple(sources)


def find_config_file(explicit: Path | None = None) -> Path | None:
    """The config file in force: --config, else $DOCSCTL_CONFIG, else ./docsctl.toml if present."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file not found: {explicit}")
        return explicit
    from_env = os.environ.get("DOCSCTL_CONFIG")
    if from_env:
        path = Path(from_env).expanduser()
        if not path.is_file():
            raise ConfigError(f"DOCSCTL_CONFIG points to a missing file: {path}")
        return path
    local = Path.cwd() / CONFIG_FILE_NAME
    return local if local.is_file() else None


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings; `overrides` are CLI flags, and None means "not given"."""
    values: dict[str, Any] = {}
    path = find_config_file(config_file)
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        for key, raw in data.items():
            if key == "source":
                values["sources"] = _parse_sources(raw, path)
            elif key in _SCALARS:
                values[key] = _coerce(key, raw)
            else:
                raise ConfigError(f"{path}: unknown setting {key!r}")
    for name in _SCALARS:
        env = os.environ.get(f"DOCSCTL_{name.upper()}")
        if env is not None and env != "":
            values[name] = _coerce(name, env)
    for name, raw in overrides.items():
        if name not in _SCALARS:
            raise ConfigError(f"unknown setting {name!r}")
        if raw is not None:
            values[name] = _coerce(name, raw)
    settings = replace(Settings(), **values)
    if settings.backend not in {"auto", "sqlite", "opensearch"}:
        raise ConfigError(f"backend must be auto, sqlite or opensearch, not {settings.backend!r}")
    check_query_runtime(settings.query_runtime)
    if settings.backend_name == "opensearch" and not settings.opensearch_url:
        raise ConfigError("backend 'opensearch' needs an OpenSearch URL (--opensearch-url or DOCSCTL_OPENSEARCH_URL)")
    return settings
