"""Settings: defaults < docsctl.toml < DOCSCTL_* environment < CLI flags; the password never shows."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pytest

from docsctl.config import Settings, load_settings
from docsctl.errors import ConfigError

SETTING_NAMES = [f.name for f in fields(Settings) if f.name != "sources"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No DOCSCTL_* setting from the caller's shell, and no ./docsctl.toml: each test starts bare."""
    for name in [*SETTING_NAMES, "config"]:
        monkeypatch.delenv(f"DOCSCTL_{name.upper()}", raising=False)
    monkeypatch.chdir(tmp_path)


def write_toml(folder: Path, text: str) -> Path:
    path = folder / "docsctl.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_file_environment_or_flags():
    settings = load_settings()
    assert settings == Settings()
    assert settings.backend_name == "sqlite"
    assert settings.opensearch_port == 9200


def test_each_layer_overrides_the_one_below(tmp_path, monkeypatch):
    write_toml(tmp_path, 'model = "from-toml"\nindex_alias = "from-toml"\nshards = 2\nopensearch_port = 9300\n')
    monkeypatch.setenv("DOCSCTL_INDEX_ALIAS", "from-env")
    monkeypatch.setenv("DOCSCTL_OPENSEARCH_PORT", "9400")
    settings = load_settings(opensearch_port=9500, model=None)  # None means "flag not given"

    assert settings.replicas == 0  # default
    assert settings.shards == 2  # toml
    assert settings.model == "from-toml"  # toml: the flag was not given
    assert settings.index_alias == "from-env"  # env over toml
    assert settings.opensearch_port == 9500  # flag over env


def test_environment_values_are_typed_and_empty_ones_ignored(monkeypatch):
    monkeypatch.setenv("DOCSCTL_OPENSEARCH_VERIFY", "no")
    monkeypatch.setenv("DOCSCTL_DATA_DIR", "~/docs-data")
    monkeypatch.setenv("DOCSCTL_MODEL", "")
    settings = load_settings()
    assert settings.opensearch_verify is False
    assert settings.data_dir == Path("~/docs-data").expanduser()
    assert settings.model == Settings().model


def test_config_file_from_flag_and_from_environment(tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    explicit = write_toml(other, 'index_alias = "explicit"\n')
    assert load_settings(explicit).index_alias == "explicit"
    monkeypatch.setenv("DOCSCTL_CONFIG", str(explicit))
    assert load_settings().index_alias == "explicit"


def test_an_opensearch_url_selects_the_opensearch_backend(monkeypatch):
    monkeypatch.setenv("DOCSCTL_OPENSEARCH_URL", "http://127.0.0.1:9200")
    assert load_settings().backend_name == "opensearch"


def test_relative_source_paths_are_resolved_against_the_config_file(tmp_path):
    path = write_toml(tmp_path, '[[source]]\nname = "docs"\npath = "corpus/docs"\n')
    (source,) = load_settings(path).sources
    assert source.name == "docs"
    assert Path(source.path) == (tmp_path / "corpus" / "docs").resolve()


def test_password_is_masked_in_describe_and_absent_from_repr(monkeypatch):
    monkeypatch.setenv("DOCSCTL_OPENSEARCH_PASSWORD", "s3cret-pass")
    settings = load_settings(opensearch_user="admin")
    assert settings.opensearch_password == "s3cret-pass"
    assert settings.describe()["opensearch_password"] == "********"
    assert "s3cret-pass" not in repr(settings)
    assert "s3cret-pass" not in str(settings.describe())


def test_describe_shows_no_password_when_none_is_set():
    assert load_settings().describe()["opensearch_password"] is None


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("DOCSCTL_SHARDS", "three", "shards"),
        ("DOCSCTL_OPENSEARCH_PORT", "92OO", "opensearch_port"),
        ("DOCSCTL_OPENSEARCH_VERIFY", "maybe", "opensearch_verify"),
        ("DOCSCTL_BACKEND", "elastic", "backend"),
        ("DOCSCTL_QUERY_RUNTIME", "tensorflow", "query_runtime"),
    ],
)
def test_bad_environment_values_are_config_errors(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=message):
        load_settings()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("shards = 2.5\n", "shards"),
        ('no_such_setting = "x"\n', "unknown setting"),
        ("model = \n", "cannot read"),
        ('source = "docs"\n', "array of tables"),
        ('[[source]]\nname = "docs"\n', "name and a path"),
    ],
)
def test_bad_config_files_are_config_errors(tmp_path, text, message):
    write_toml(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load_settings()


def test_missing_config_files_are_config_errors(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml")
    monkeypatch.setenv("DOCSCTL_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(ConfigError, match="DOCSCTL_CONFIG"):
        load_settings()


def test_unknown_flag_and_opensearch_backend_without_url_are_config_errors():
    with pytest.raises(ConfigError, match="unknown setting"):
        load_settings(no_such_flag=1)
    with pytest.raises(ConfigError, match="needs an OpenSearch URL"):
        load_settings(backend="opensearch")


def test_settings_from_the_caller_do_not_leak_between_tests():
    assert not any(key.startswith("DOCSCTL_") and key[8:].lower() in SETTING_NAMES for key in os.environ)
