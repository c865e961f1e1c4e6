"""Cost in USD (issue 27 item 16): the price table, its config override, and how cost reaches each view.

The expected dollars are worked out here from the table's own entries (or the config's), never typed
in, so a changed list price changes both sides; what is pinned is the arithmetic (cached tokens priced
apart, a sum's lower bound) and the words a person reads ("unknown", "≥ $").
"""

from __future__ import annotations

import json

import fakes_llm
import pytest
from fakes_llm import API_KEY, Reply
from typer.testing import CliRunner

from agentstack_lab.cli import app
from agentstack_lab.config import Config, ConfigError
from agentstack_lab.events import AgentState
from agentstack_lab.notebook.snapshot import SNAPSHOT_MIME, snapshot_bundle
from agentstack_lab.notebook.tree import TreeState, tree_to_text
from agentstack_lab.providers.base import Message, ProviderRequest, Usage, UsageEvent
from agentstack_lab.providers.prices import DEFAULT_PRICES, Cost, PriceTable, price_tree, usd_text
from agentstack_lab.providers.registry import get_provider

fake_llm_server = fakes_llm.fake_llm_server
fake_llm = fakes_llm.fake_llm

SONNET = DEFAULT_PRICES["anthropic"]["claude-sonnet-4-5"]


def usage(inp: int, out: int, basis: str = "reported", **cache: int) -> dict:
    return {"inputTokens": inp, "outputTokens": out, "basis": basis, **cache}


def test_every_shipped_price_has_its_date():
    for provider, models in DEFAULT_PRICES.items():
        for model, price in models.items():
            assert len(price.date) == 10 and price.date[4] == "-", (provider, model)
            assert price.input > 0 and price.output > 0, (provider, model)


def test_a_listed_model_and_its_dated_snapshot_cost_the_same():
    table = PriceTable()
    cost = table.cost(usage(2_000_000, 100_000), "anthropic", "claude-sonnet-4-5")
    assert cost.usd == pytest.approx(2 * SONNET.input + 0.1 * SONNET.output)
    assert cost.text == usd_text(cost.usd) and cost.text.startswith("$")
    assert table.cost(usage(2_000_000, 100_000), "anthropic", "claude-sonnet-4-5-20250929") == cost
    assert table.lookup("openai", "gpt-4o-2024-08-06") is DEFAULT_PRICES["openai"]["gpt-4o"]
    # another model whose name only begins like a listed one is not priced as it
    assert table.lookup("openai", "gpt-4o-audio-preview") is None


@pytest.mark.parametrize(("provider", "model"), [("anthropic", "claude-unreleased-9"), ("scripted", None),
                                                 ("ollama", "llama3.2"), ("claude", None), (None, None)])
def test_no_price_is_unknown(provider, model):
    cost = PriceTable().cost(usage(1000, 10), provider, model)
    assert cost == Cost(usd=None, basis="unknown") and cost.text == "unknown"


def test_no_usage_is_unknown_and_no_call_yet_is_nothing():
    table = PriceTable()
    assert table.cost({"inputTokens": 0, "outputTokens": 0, "basis": "unknown"}, "anthropic",
                      "claude-sonnet-4-5").text == "unknown"
    assert table.cost(usage(0, 0, "none"), "anthropic", "claude-sonnet-4-5").text == ""
    assert table.cost(None, "anthropic", "claude-sonnet-4-5").text == ""


def test_cache_reads_and_writes_are_priced_apart():
    cost = PriceTable().cost(usage(1_000_000, 0, cacheReadTokens=600_000, cacheWriteTokens=300_000),
                             "anthropic", "claude-sonnet-4-5")
    assert SONNET.cache_read is not None and SONNET.cache_write is not None
    assert cost.usd == pytest.approx(0.1 * SONNET.input + 0.6 * SONNET.cache_read + 0.3 * SONNET.cache_write)
    assert cost.usd != pytest.approx(SONNET.input)  # the cache changes the price


def test_a_sum_with_an_unknown_part_is_a_lower_bound():
    table = PriceTable()
    known = table.cost(usage(1000, 1000), "anthropic", "claude-sonnet-4-5")
    total = known + table.cost(usage(500, 5, "unknown"), "anthropic", "claude-sonnet-4-5")
    assert total.basis == "partial" and total.usd == known.usd
    assert total.text == "≥ " + usd_text(known.usd)
    both_unknown = table.cost(usage(1, 1), "scripted", None) + table.cost(usage(1, 1), "scripted", None)
    assert both_unknown.text == "unknown"
    assert table.cost(usage(1_000_000, 0, "estimated"), "anthropic", "claude-sonnet-4-5").text.startswith("~$")


def test_config_prices_override_the_table_and_price_any_model():
    cfg = Config.from_dict({"prices": {
        "anthropic": {"claude-sonnet-4-5": {"input": 1, "output": 2, "date": "2026-01-01"}},
        "scripted": {"*": {"input": 10, "output": 20}}}})
    table = PriceTable.from_config(cfg)
    assert table.cost(usage(1_000_000, 1_000_000), "anthropic", "claude-sonnet-4-5").usd == pytest.approx(3)
    assert table.lookup("anthropic", "claude-sonnet-4-5").date == "2026-01-01"
    assert table.cost(usage(100_000, 0), "scripted", None).usd == pytest.approx(1)
    assert table.lookup("scripted", None).date == "config"
    # untouched entries keep the shipped price
    assert table.lookup("openai", "gpt-4o") is DEFAULT_PRICES["openai"]["gpt-4o"]
    assert PriceTable().cost(usage(100_000, 0), "scripted", None).text == "unknown"


@pytest.mark.parametrize(("prices", "said"), [
    ({"anthropic": {"m": {"input": -1, "output": 2}}}, "prices.anthropic.m.input: input should be greater than"),
    ({"anthropic": {"m": {"output": 2}}}, "prices.anthropic.m.input: field required"),
    ({"anthropic": {"m": {"input": 1, "output": 2, "cached": 1}}}, "prices.anthropic.m.cached: unknown key"),
    ({"anthropic": {"m": {"input": True, "output": 2}}}, "prices.anthropic.m.input: expected number"),
    ({"anthropic": 3}, "prices.anthropic: expected object"),
])
def test_bad_prices_are_one_line_naming_the_key(prices, said):
    with pytest.raises(ConfigError) as err:
        Config.from_dict({"prices": prices})
    assert str(err.value).startswith(said) and "\n" not in str(err.value)


# --- where the usage comes from: the providers' usage events ----------------------------------------
async def _usage_event(provider) -> UsageEvent:
    events = [ev async for ev in provider.stream(ProviderRequest(messages=[Message(role="user", content="hi")]))]
    return next(e for e in events if isinstance(e, UsageEvent))


async def test_anthropic_usage_carries_prompt_cache_tokens(fake_llm):
    pytest.importorskip("anthropic")
    fake_llm.queue(Reply(text="ok", usage=(100, 9), cache=(700, 200)))
    provider = get_provider("anthropic", base_url=fake_llm.url, api_key=API_KEY, model="claude-sonnet-4-5", timeout=5)
    ev = await _usage_event(provider)
    assert (ev.input_tokens, ev.cache_read_tokens, ev.cache_write_tokens) == (1000, 700, 200)
    total = Usage()
    total.add(ev)
    total.add(ev)
    assert (total.input_tokens, total.cache_read_tokens, total.cache_write_tokens) == (2000, 1400, 400)


async def test_openai_usage_carries_cached_tokens(fake_llm):
    pytest.importorskip("openai")
    fake_llm.queue(Reply(text="ok", usage=(1000, 9), cache=(640, 0)))
    provider = get_provider("openai", base_url=f"{fake_llm.url}/v1", api_key=API_KEY, model="gpt-4o", timeout=5)
    ev = await _usage_event(provider)
    assert (ev.input_tokens, ev.cache_read_tokens, ev.cache_write_tokens) == (1000, 640, 0)


# --- the views: the notebook fold, the saved tree, agent list ----------------------------------------
def _events(provider: str, model: str | None, child_basis: str = "reported") -> list[AgentState]:
    meta = {"provider": provider, **({"model": model} if model else {})}
    return [
        AgentState(agent_id="root", state={"id": "root", "parentId": None, "type": "researcher", "status": "completed",
                                            "subagents": ["kid"], "metadata": meta, "ownUsage": usage(400_000, 20_000, cacheReadTokens=100_000)}),
        AgentState(agent_id="kid", state={"id": "kid", "parentId": "root", "type": "analyst", "status": "completed",
                                           "metadata": {}, "ownUsage": usage(50_000, 5_000, child_basis)}),
    ]


def test_the_notebook_fold_prices_each_subtree_with_the_runs_model():
    state = TreeState()
    state.extend(_events("anthropic", "claude-sonnet-4-5"))
    table = PriceTable()
    own = table.cost(usage(400_000, 20_000, cacheReadTokens=100_000), "anthropic", "claude-sonnet-4-5")
    kid = table.cost(usage(50_000, 5_000), "anthropic", "claude-sonnet-4-5")
    assert state.subtree_cost("kid") == kid
    assert state.subtree_cost("root").usd == pytest.approx(own.usd + kid.usd)
    tree = state.to_tree()
    assert tree[0]["cost"]["text"] == usd_text(own.usd + kid.usd)
    assert f"cost {tree[0]['cost']['text']}" in tree_to_text(tree).splitlines()[0]
    # a child whose provider reported nothing leaves the run's figure a lower bound
    partial = TreeState()
    partial.extend(_events("anthropic", "claude-sonnet-4-5", child_basis="unknown"))
    assert partial.to_tree()[0]["cost"]["text"] == "≥ " + usd_text(own.usd)
    # the workspace's table is the one used
    overridden = TreeState(prices=PriceTable({"anthropic": {"claude-sonnet-4-5": {"input": 0, "output": 0}}}))
    overridden.extend(_events("anthropic", "claude-sonnet-4-5"))
    assert overridden.to_tree()[0]["cost"]["text"] == "$0.0000"
    # the subtree costs a widget update asks for are kept until the next event or another price table
    first = state.subtree_cost("root")
    assert state.subtree_cost("root") is first
    state.apply(AgentState(agent_id="kid", state={"ownUsage": usage(60_000, 5_000)}))
    more = table.cost(usage(60_000, 5_000), "anthropic", "claude-sonnet-4-5")
    assert state.subtree_cost("root").usd == pytest.approx(own.usd + more.usd)
    state.prices = PriceTable({"anthropic": {"claude-sonnet-4-5": {"input": 0, "output": 0}}})
    assert state.subtree_cost("root").usd == 0


def test_the_saved_tree_shows_the_cost_in_every_representation():
    state = TreeState()
    state.extend(_events("openai", "gpt-4o"))
    text = state.to_tree()[0]["cost"]["text"]
    bundle = snapshot_bundle(state.to_tree(), run_id="r1")
    assert bundle[SNAPSHOT_MIME]["roots"][0]["cost"]["text"] == text
    assert f"cost {text}" in bundle["text/html"] and f"cost {text}" in bundle["text/plain"]
    assert f"cost {text}" in bundle["text/markdown"]
    unknown = TreeState()
    unknown.extend(_events("scripted", None))
    assert "cost unknown" in snapshot_bundle(unknown.to_tree(), run_id="r2")["text/html"]


def test_price_tree_prices_a_rebuilt_tree_from_own_usage():
    from agentstack_lab.engine.state import tree_from_events

    tree = price_tree(tree_from_events(_events("anthropic", "claude-sonnet-4-5")), PriceTable())
    state = TreeState()
    state.extend(_events("anthropic", "claude-sonnet-4-5"))
    assert tree["cost"] == state.to_tree()[0]["cost"]
    assert tree["children"][0]["cost"] == state.to_tree()[0]["children"][0]["cost"]


def test_agent_list_shows_cost_unknown_then_priced_by_the_config(tmp_path, monkeypatch):
    """A scripted run (estimated tokens, no shipped price): unknown; a config price for it: "~$" per agent and run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # the table's headers on one line
    runner = CliRunner()
    ran = runner.invoke(app, ["agent", "run", "what is a monad?"])
    assert ran.exit_code == 0, ran.output
    listed = runner.invoke(app, ["agent", "list", "--json"])
    rows = json.loads(listed.stdout)
    assert len(rows) > 1 and {r["cost"]["text"] for r in rows} == {"unknown"}
    plain = runner.invoke(app, ["agent", "list"])
    assert "cost (this agent)" in plain.stdout and "unknown" in plain.stdout

    (tmp_path / "agentstack.config.json").write_text(json.dumps(
        {"prices": {"scripted": {"*": {"input": 3, "output": 15}}}}))
    rows = json.loads(runner.invoke(app, ["agent", "list", "--json"]).stdout)
    table = PriceTable({"scripted": {"*": {"input": 3, "output": 15}}})
    for r in rows:
        expected = table.cost({"inputTokens": r["inputTokens"], "outputTokens": r["outputTokens"],
                               "basis": r["tokenBasis"]}, "scripted", None)
        assert r["cost"]["text"] == expected.text and r["cost"]["text"].startswith("~$")
    runs = json.loads(runner.invoke(app, ["agent", "list", "--runs", "--json"]).stdout)
    assert len(runs) == 1
    assert runs[0]["runCost"]["usd"] == pytest.approx(sum(r["cost"]["usd"] for r in rows))
    shown = runner.invoke(app, ["agent", "list", "--runs"])
    assert "cost (whole run)" in shown.stdout and runs[0]["runCost"]["text"] in shown.stdout
    tree = runner.invoke(app, ["agent", "tree", runs[0]["runId"]])
    assert f"cost {runs[0]['runCost']['text']}" in tree.stdout


@pytest.mark.slow
def test_a_headless_notebook_and_its_nbconvert_exports_show_the_cost(tmp_path, monkeypatch):
    """nbclient runs ``%agent --wait`` in a folder whose config prices the scripted model; the saved output's
    snapshot, and ``jupyter nbconvert --to markdown`` / ``--to html`` of it, carry the run's cost."""
    import re

    import nbformat

    from agentstack_lab.engine.activity import run_costs
    from agentstack_lab.store.connection import SQLiteDatabase
    from tests.notebook_helpers import run_cells
    from tests.test_notebook_export import _export

    price = {"input": 3, "output": 15}
    (tmp_path / "agentstack.config.json").write_text(json.dumps({"prices": {"scripted": {"*": price}}}))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)  # a kernel no Jupyter Server session started
    nb = run_cells({"load": "%load_ext agentstack_lab",
                    "run": "run = %agent --wait --auto-approve --provider scripted How are sales trending?\nrun"},
                   tmp_path, timeout=180, allow_errors=False, store_widget_state=True)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "executed.ipynb")
    db = SQLiteDatabase(tmp_path / ".agentstack" / "agentstack.db")
    try:
        (run_id,) = [r[0] for r in db.query("SELECT id FROM agents WHERE parent_id IS NULL")]
        cost = run_costs(db, [run_id], PriceTable({"scripted": {"*": price}}))[run_id].text
    finally:
        db.close()
    assert cost.startswith("~$"), cost
    out = next(o for o in nb.cells[1].outputs if SNAPSHOT_MIME in o.get("data", {}))
    assert out["data"][SNAPSHOT_MIME]["roots"][0]["cost"]["text"] == cost
    md = _export(tmp_path / "executed.ipynb", "markdown")
    assert f"cost {cost}" in md.splitlines()[md.splitlines().index("```text") + 1]  # on the root's line
    page = _export(tmp_path / "executed.ipynb", "html")
    assert f"cost {cost}" in re.sub(r"<[^>]+>", "", page)
