import logging
from importlib.metadata import EntryPoint

import pytest

from agentstack_lab import plugins


class _Broken:
    @plugins.hookimpl
    def register_agent_types(self, register):
        raise RuntimeError("kaput")


class _Good:
    @plugins.hookimpl
    def register_agent_types(self, register):
        register({"type": "poet"})


def test_a_broken_plugin_is_skipped_with_a_warning_and_the_rest_load(caplog):
    pm = plugins.load_plugins()
    pm.register(_Broken(), name="broken-pkg")
    pm.register(_Good(), name="good-pkg")
    with caplog.at_level(logging.WARNING):
        calls = plugins.collect("register_agent_types", pm)
    assert plugins.HookCall(plugin="good-pkg", args=({"type": "poet"},), kwargs={}) in calls
    assert "broken-pkg" in caplog.text and "kaput" in caplog.text


def test_an_entry_point_that_fails_to_import_is_named(monkeypatch, caplog):
    bad = EntryPoint(name="ghost", value="agentstack_lab_no_such_module", group=plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [bad])
    with caplog.at_level(logging.WARNING):
        pm = plugins.load_plugins()
    assert pm.get_plugin("default") is not None
    assert "ghost" in caplog.text


@pytest.mark.slow
def test_importing_the_package_has_no_heavy_imports():
    import subprocess
    import sys
    code = ("import sys, agentstack_lab, agentstack_lab.events, agentstack_lab.plugins;"
            "heavy=[m for m in ('pandas','anthropic','openai','nbclient','ipywidgets') if m in sys.modules];"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
