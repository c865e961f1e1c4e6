import json

import pytest

from agentstack_lab.config import Config, ConfigError, find_config_file, load_config
from agentstack_lab.workspace import Workspace


def write(path, data):
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_defaults_without_a_file(workdir):
    cfg = load_config()
    assert cfg.source is None
    assert cfg.memory.embedder == "hash" and cfg.memory.vector.dimensions == 384
    assert cfg.memory.hybrid.rrf_k == 60 and cfg.providers.default == "scripted"
    assert cfg.agents.max_depth == 2 and cfg.workflows.max_iterations == 3


@pytest.mark.parametrize("data, message", [
    ({"memory": {"vector": {"dimensions": "many"}}}, "memory.vector.dimensions: expected int"),
    ({"memory": {"vector": {"dimensions": 3.5}}}, "memory.vector.dimensions: expected int"),
    ({"memory": {"vector": {"dimensions": True}}}, "memory.vector.dimensions: expected int"),
    ({"agents": {"timeout_s": False}}, "agents.timeout_s: expected number"),
    ({"memory": {"vectors": {}}}, "memory.vectors: unknown key"),
    ({"agents": {"executor": "docker"}}, "agents.executor: expected 'live' or 'subprocess'"),
    ({"providers": {"openai": {"timeout": "soon"}}}, "providers.openai.timeout: expected number"),
    ({"agents": {"auto_approve": "perhaps"}}, "agents.auto_approve: expected bool"),
    ({"workflows": {"pool_size": "x"}}, "workflows.pool_size: expected int"),
    ({"monitoring": {"warning_at": 2.0}}, "monitoring: need warning_at <= intervention_at <= termination_at"),
    ({"plugins": {"disabled": "x"}}, "plugins.disabled"),
])
def test_errors_name_the_field(workdir, data, message):
    write(workdir / "agentstack.config.json", data)
    with pytest.raises(ConfigError) as err:
        load_config()
    assert message in str(err.value)


def test_found_walking_up_and_by_env(workdir, monkeypatch):
    write(workdir / "agentstack.config.json", {"agents": {"max_depth": 3}})
    sub = workdir / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert find_config_file() == (workdir / "agentstack.config.json").resolve()
    assert load_config().agents.max_depth == 3
    other = write(workdir / "other.json", {"agents": {"max_depth": 1}})
    monkeypatch.setenv("AGENTSTACK_CONFIG", str(other))
    assert load_config().agents.max_depth == 1
    monkeypatch.setenv("AGENTSTACK_CONFIG", str(workdir / "missing.json"))
    with pytest.raises(ConfigError, match="AGENTSTACK_CONFIG"):
        load_config()


def test_without_a_config_file_the_nearest_workspace_is_found_walking_up(workdir, monkeypatch):
    from agentstack_lab.workspace import Workspace, root_for

    sub = workdir / "project" / "sub"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    with Workspace.open(announce=False) as ws:      # nothing above: a new workspace here
        assert ws.root == sub.resolve()           # (the database is made on first use: none yet)
    assert not (sub / ".agentstack").exists()
    with Workspace.open(workdir / "project", announce=False) as ws:
        ws.memory.store("k", "made at the project's top")
    with Workspace.open(announce=False) as ws:      # the project's, from its sub-folder
        assert ws.root == (workdir / "project").resolve() and ws.memory.get("k") is not None
    # the surfaces serving a folder (the Jupyter server's root, an ACP session's cwd, workflow run --cwd) agree
    assert root_for(sub) == (workdir / "project").resolve()
    write(workdir / "agentstack.config.json", {})
    assert root_for(sub) == workdir.resolve()      # a config file above wins, as for Workspace.open()
    (workdir / "agentstack.config.json").unlink()
    monkeypatch.setenv("HOME", str(workdir / "project"))   # not above the home folder, but in it
    with Workspace.open(announce=False) as ws:
        assert ws.root == sub.resolve()
    monkeypatch.chdir(workdir / "project")
    with Workspace.open(announce=False) as ws:
        assert ws.root == (workdir / "project").resolve()


def test_env_interpolation_and_secret_masking(workdir, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-very-secret")
    write(workdir / "agentstack.config.json", {"providers": {"openai": {"api_key": "${MY_KEY}",
                                                                         "base_url": "${BASE:-http://localhost:1}"}}})
    cfg = load_config()
    assert cfg.providers.openai.api_key.get_secret_value() == "sk-very-secret"
    assert cfg.providers.openai.base_url == "http://localhost:1"
    public = json.dumps(cfg.to_public_dict())
    assert "sk-very-secret" not in public and "***" in public
    assert "sk-very-secret" not in repr(cfg)
    write(workdir / "agentstack.config.json", {"providers": {"openai": {"api_key": "${NOT_SET_ANYWHERE}"}}})
    with pytest.raises(ConfigError, match=r"providers\.openai\.api_key: environment variable NOT_SET_ANYWHERE"):
        load_config()


def test_invalid_json_is_a_clear_error(workdir):
    write(workdir / "agentstack.config.json", "{not json")
    with pytest.raises(ConfigError, match="invalid JSON at line 1"):
        load_config()


def test_workspace_db_next_to_config_and_announced(workdir, monkeypatch, capsys):
    write(workdir / "agentstack.config.json", {})
    sub = workdir / "nb"
    sub.mkdir()
    monkeypatch.chdir(sub)
    with Workspace.open() as ws:
        assert ws.root == workdir.resolve()
        assert ws.db_path == workdir.resolve() / ".agentstack" / "agentstack.db"
        ws.memory.store("k", "v")
        assert ws.db_path.is_file()
    err = capsys.readouterr().err
    assert str(ws.db_path) in err
    with Workspace.open() as ws2:   # once per process
        ws2.memory.count()
    assert str(ws.db_path) not in capsys.readouterr().err


def test_workspace_explicit_folder_and_config(tmp_path):
    cfg = Config.from_dict({"memory": {"vector": {"dimensions": 64}}})
    with Workspace.open(tmp_path / "proj", config=cfg) as ws:
        assert ws.db_path == (tmp_path / "proj" / ".agentstack" / "agentstack.db").resolve()
        assert ws.memory.index.dimensions == 64
