"""Config providers and the transformer (Kafka's FileConfigProvider, DirectoryConfigProvider,
EnvVarConfigProvider, ConfigTransformer), the worker's own settings resolved through them,
and the masking and redaction helpers, without a worker."""

from __future__ import annotations

import logging

import pytest
from support.secret_connectors import CountingConfigProvider

from kctl.api import ConfigDef, ConfigType
from kctl.errors import ConfigError, ValidationError
from kctl.runtime.config_providers import (
    ConfigResolutionError,
    ConfigTransformer,
    DirectoryConfigProvider,
    EnvVarConfigProvider,
    FileConfigProvider,
    only_placeholders,
    providers_from_config,
)
from kctl.runtime.secrets import (
    HIDDEN,
    REDACTOR,
    Redactor,
    install_log_redaction,
    mask,
    register_secrets,
    restore_hidden,
    secret_keys,
)
from kctl.runtime.worker_config import WorkerConfig

KAFKA = "org.apache.kafka.common.config.provider."


@pytest.fixture
def secrets_dir(tmp_path):
    d = tmp_path / "secrets"
    d.mkdir()
    (d / "db.properties").write_text("# the database\nuser=app\npassword = s3cr3t-from-file\n"
                                     "url: jdbc:postgresql://db/app\n")
    (d / "mounted").mkdir()
    (d / "mounted" / "token").write_text("tok-from-dir\n")
    (d / "mounted" / "nested").mkdir()
    return d


def configured(cls, **params):
    p = cls()
    p.configure(params)
    return p


# -- providers -----------------------------------------------------------------------------


def test_file_provider_reads_the_keys_asked_for_from_a_properties_file(secrets_dir):
    p = configured(FileConfigProvider)
    path = str(secrets_dir / "db.properties")
    assert p.get(path, {"password", "user"}) == {"password": "s3cr3t-from-file", "user": "app"}
    assert p.get(path, {"nope"}) == {}  # absent, not an error: the transformer names it
    assert p.get(path)["url"] == "jdbc:postgresql://db/app"
    assert p.get("", {"password"}) == {}  # Kafka: an empty path has no data


def test_file_provider_names_a_file_it_cannot_read(tmp_path):
    with pytest.raises(ConfigError, match=r"could not read properties from file .*/missing"):
        configured(FileConfigProvider).get(str(tmp_path / "missing"), {"k"})


def test_allowed_paths_limit_what_file_and_dir_can_read(secrets_dir, tmp_path):
    outside = tmp_path / "other.properties"
    outside.write_text("password=elsewhere\n")
    for cls, inside, key in ((FileConfigProvider, secrets_dir / "db.properties", "password"),
                             (DirectoryConfigProvider, secrets_dir / "mounted", "token")):
        p = configured(cls, **{"allowed.paths": f"{secrets_dir},/nonexistent/x"})
        assert key in p.get(str(inside), {key})
        for path in (outside, secrets_dir / ".." / "other.properties"):
            with pytest.raises(ConfigError, match=r"is not in allowed\.paths"):
                p.get(str(path), {"password"})
    with pytest.raises(ConfigError, match="must be absolute"):
        configured(FileConfigProvider, **{"allowed.paths": "relative/dir"})


def test_allowed_paths_are_not_escaped_through_a_symlink(secrets_dir, tmp_path):
    (tmp_path / "private.properties").write_text("password=private\n")
    (secrets_dir / "link.properties").symlink_to(tmp_path / "private.properties")
    p = configured(FileConfigProvider, **{"allowed.paths": str(secrets_dir)})
    with pytest.raises(ConfigError, match=r"is not in allowed\.paths"):
        p.get(str(secrets_dir / "link.properties"), {"password"})


def test_dir_provider_reads_whole_files_and_skips_directories(secrets_dir):
    p = configured(DirectoryConfigProvider)
    mounted = str(secrets_dir / "mounted")
    assert p.get(mounted, {"token", "nested", "absent"}) == {"token": "tok-from-dir\n"}
    assert p.get(mounted) == {"token": "tok-from-dir\n"}
    with pytest.raises(ConfigError, match="is not a directory"):
        p.get(str(secrets_dir / "db.properties"), {"token"})


def test_env_provider_takes_no_path_and_honours_its_allowlist():
    env = {"DB_PASSWORD": "from-env", "HOME": "/root"}
    p = EnvVarConfigProvider(env)
    p.configure({})
    assert p.get("", {"DB_PASSWORD", "MISSING"}) == {"DB_PASSWORD": "from-env"}
    with pytest.raises(ConfigError, match="path is not supported"):
        p.get("/etc", {"DB_PASSWORD"})
    p.configure({"allowlist.pattern": "^DB_"})
    assert p.get("", {"DB_PASSWORD", "HOME"}) == {"DB_PASSWORD": "from-env"}
    with pytest.raises(ConfigError, match=r"allowlist\.pattern"):
        p.configure({"allowlist.pattern": "("})


@pytest.mark.parametrize("name", ["file", "FileConfigProvider", KAFKA + "FileConfigProvider",
                                  "kctl.runtime.config_providers.FileConfigProvider"])
def test_provider_class_names_kafkas_aliases_and_dotted_paths(name):
    providers = providers_from_config({"config.providers": "f",
                                       "config.providers.f.class": name})
    assert isinstance(providers["f"], FileConfigProvider)


def test_provider_settings_that_cannot_work_are_named():
    with pytest.raises(ConfigError, match=r"config\.providers\.vault\.class"):
        providers_from_config({"config.providers": "vault"})
    with pytest.raises(ConfigError, match="not a known provider"):
        providers_from_config({"config.providers": "x", "config.providers.x.class": "Vault"})
    with pytest.raises(ConfigError, match="cannot load it"):
        providers_from_config({"config.providers": "x",
                               "config.providers.x.class": "no.such.module.Provider"})
    with pytest.raises(ConfigError, match=r"allowed\.paths"):
        providers_from_config({"config.providers": "file",
                               "config.providers.file.class": "file",
                               "config.providers.file.param.allowed.paths": "rel"})


# -- the transformer -----------------------------------------------------------------------


@pytest.fixture
def transformer(secrets_dir):
    env = EnvVarConfigProvider({"DB_PASSWORD": "s3cr3t-from-env", "PORT": "5432"})
    env.configure({})
    return ConfigTransformer({
        "env": env,
        "file": configured(FileConfigProvider, **{"allowed.paths": str(secrets_dir)}),
        "dir": configured(DirectoryConfigProvider),
    })


def test_placeholders_of_every_provider_are_resolved(transformer, secrets_dir):
    props = secrets_dir / "db.properties"
    out = transformer.transform({
        "a": "${env:DB_PASSWORD}",
        "b": f"${{file:{props}:password}}",
        "c": f"${{dir:{secrets_dir / 'mounted'}:token}}",
        "url": "jdbc:postgresql://db:${env:PORT}/app?user=${file:" + str(props) + ":user}",
        "plain": "no placeholder, a $ and {braces}",
    })
    assert out.data == {"a": "s3cr3t-from-env", "b": "s3cr3t-from-file", "c": "tok-from-dir\n",
                        "url": "jdbc:postgresql://db:5432/app?user=app",
                        "plain": "no placeholder, a $ and {braces}"}
    assert out.resolved_keys == {"a", "b", "c", "url"}


def test_what_cannot_be_resolved_is_one_line_naming_the_placeholder(transformer, secrets_dir):
    props = secrets_dir / "db.properties"
    cases = {
        "${vault:secret/db:password}": "no config provider 'vault' (config.providers: dir, "
                                       "env, file)",
        f"${{file:{props}:passwd}}": f"no key 'passwd' in {props} (config provider 'file')",
        "${env:NOT_SET}": "no key 'NOT_SET' (config provider 'env')",
        f"${{file:{secrets_dir}/gone.properties:password}}": "could not read properties from "
                                                             "file",
        "${file:/etc/passwd:root}": "is not in allowed.paths",
    }
    for placeholder, why in cases.items():
        config = {"name": "db", "connection.password": placeholder, "other": "${env:DB_PASSWORD}"}
        with pytest.raises(ConfigResolutionError) as e:
            transformer.transform(config, what="connector db")
        message = str(e.value)
        assert message.startswith(f"cannot resolve {placeholder} in connector db key "
                                  "connection.password: "), message
        assert why in message and "\n" not in message
        assert "s3cr3t" not in message  # never a value, not even another key's
        assert e.value.key == "connection.password"


def test_lenient_transform_leaves_what_it_cannot_resolve(transformer):
    out = transformer.transform({"a": "${vault:x:y}", "b": "${env:NOPE}-${env:PORT}"},
                                strict=False)
    assert out.data == {"a": "${vault:x:y}", "b": "${env:NOPE}-5432"}


def test_one_provider_call_per_path_whatever_the_number_of_keys():
    providers = providers_from_config({
        "config.providers": "count",
        "config.providers.count.class": "support.secret_connectors.CountingConfigProvider",
        "config.providers.count.param.prefix": "v:"})
    CountingConfigProvider.calls.clear()
    out = ConfigTransformer(providers).transform(
        {"a": "${count:/p:x}", "b": "${count:/p:y}-${count:/q:x}"})
    assert out.data == {"a": "v:/p/x", "b": "v:/p/y-v:/q/x"}
    assert sorted(CountingConfigProvider.calls) == [("/p", frozenset({"x", "y"})),
                                                    ("/q", frozenset({"x"}))]


def test_reverse_puts_placeholders_back_into_generated_task_configs(transformer):
    raw = {"connection.password": "${env:DB_PASSWORD}", "port": "${env:PORT}", "topic": "t"}
    resolved = transformer.transform(raw).data
    generated = {**resolved, "task.index": "0", "copied.secret": "s3cr3t-from-env",
                 "also.5432": "5432"}
    back = transformer.reverse(raw, resolved, {"connection.password"}, generated)
    assert back == {"connection.password": "${env:DB_PASSWORD}", "port": "${env:PORT}",
                    "topic": "t", "task.index": "0", "copied.secret": "${env:DB_PASSWORD}",
                    "also.5432": "5432"}  # only secret values are followed to other keys


def test_only_placeholders():
    assert only_placeholders("${env:A}") and only_placeholders("${env:A}${file:/p:k}")
    assert not only_placeholders("x${env:A}") and not only_placeholders("plain")
    assert not only_placeholders("")


# -- worker settings through providers -----------------------------------------------------


def test_worker_settings_may_use_providers(tmp_path, monkeypatch):
    monkeypatch.setenv("KCTL_TEST_FLUSH_MS", "1234")
    (tmp_path / "w.properties").write_text("sasl.jaas.config=secret-jaas-line\n")
    cfg = WorkerConfig({
        "state.dir": str(tmp_path / "state"),
        "config.providers": "env,file",
        "config.providers.env.class": KAFKA + "EnvVarConfigProvider",
        "config.providers.file.class": KAFKA + "FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(tmp_path),
        "offset.flush.interval.ms": "${env:KCTL_TEST_FLUSH_MS}",
        "producer.sasl.jaas.config": f"${{file:{tmp_path}/w.properties:sasl.jaas.config}}",
    })
    assert cfg.get_int("offset.flush.interval.ms") == 1234
    assert cfg.with_prefix("producer.") == {"sasl.jaas.config": "secret-jaas-line"}
    assert cfg.config_transformer.transform({"x": "${env:KCTL_TEST_FLUSH_MS}"}).data == \
        {"x": "1234"}
    # a worker secret, resolved or literal, is redacted from logs like a connector's
    assert REDACTOR.redact("jaas: secret-jaas-line") == "jaas: [hidden]"
    WorkerConfig({"state.dir": str(tmp_path / "state"),
                  "consumer.ssl.key.password": "literal-worker-pw"})
    assert REDACTOR.redact("literal-worker-pw") == "[hidden]"
    assert REDACTOR.redact("1234") == "1234"  # not a secret key: not redacted


def test_worker_settings_that_cannot_be_resolved_stop_the_worker(tmp_path):
    with pytest.raises(ValidationError) as e:
        WorkerConfig({"state.dir": str(tmp_path), "config.providers": "env",
                      "config.providers.env.class": "env",
                      "offset.flush.interval.ms": "${env:KCTL_TEST_NOT_SET_ANYWHERE}",
                      "producer.ssl.key.password": "${vault:kv:pw}"}, "w.yaml")
    assert set(e.value.errors) == {"offset.flush.interval.ms", "producer.ssl.key.password"}
    assert "cannot resolve ${env:KCTL_TEST_NOT_SET_ANYWHERE} in worker config key " \
           "offset.flush.interval.ms" in str(e.value)
    with pytest.raises(ValidationError, match=r"config\.providers\.vault\.class"):
        WorkerConfig({"state.dir": str(tmp_path), "config.providers": "vault"})


# -- masking and redaction -----------------------------------------------------------------

DEFINITION = (ConfigDef()
              .define("connection.password", ConfigType.PASSWORD, None)
              .define("password.policy", ConfigType.STRING, "strict"))


def test_secret_keys_are_password_typed_or_undeclared_and_named_like_one():
    config = ["connection.password", "password.policy", "producer.override.ssl.key.password",
              "consumer.override.sasl.jaas.config", "topic"]
    assert secret_keys(config, DEFINITION) == {"connection.password",
                                               "producer.override.ssl.key.password",
                                               "consumer.override.sasl.jaas.config"}


def test_mask_hides_literal_secrets_and_shows_placeholders():
    config = {"connection.password": "literal-pw", "password.policy": "strict",
              "producer.override.ssl.key.password": "${file:/s:key}", "topic": "t"}
    assert mask(config, DEFINITION) == {**config, "connection.password": HIDDEN}
    assert mask({"connection.password": "pre-${env:X}"}, DEFINITION) == \
        {"connection.password": HIDDEN}  # a literal part is part of the secret


def test_hidden_in_a_write_keeps_the_stored_secret():
    stored = {"connection.password": "literal-pw", "password.policy": "x"}
    incoming = {"connection.password": HIDDEN, "password.policy": HIDDEN, "topic": "t"}
    assert restore_hidden(incoming, stored, DEFINITION) == {
        "connection.password": "literal-pw", "password.policy": HIDDEN, "topic": "t"}
    assert restore_hidden(incoming, None, DEFINITION) == incoming
    changed = {"connection.password": "new-pw"}
    assert restore_hidden(changed, stored, DEFINITION) == changed


def test_redactor_replaces_secrets_and_their_escaped_forms():
    r = Redactor()
    assert not r and r.redact("nothing known") == "nothing known"
    r.add(["pa'ss\\word", "abc", "pa'ss"])
    assert r.redact("x pa'ss\\word y") == f"x {HIDDEN} y"  # longest first
    assert r.redact(repr("pa'ss\\word")) == f'"{HIDDEN}"'
    assert r.redact("abc stays: too short to hide anything") == \
        "abc stays: too short to hide anything"


def test_log_records_never_carry_a_registered_secret(caplog):
    install_log_redaction()
    register_secrets({"connection.password": "log-secret-42"}, DEFINITION)
    log = logging.getLogger("kctl.test.secrets")
    with caplog.at_level(logging.INFO, logger="kctl.test.secrets"):
        log.info("logging in with %s", "log-secret-42")
        try:
            raise RuntimeError("refused: log-secret-42")
        except RuntimeError as e:
            log.error("failed", exc_info=e)
    assert "log-secret-42" not in caplog.text
    assert f"logging in with {HIDDEN}" in caplog.text
    assert f"RuntimeError: refused: {HIDDEN}" in caplog.text
