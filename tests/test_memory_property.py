"""Any text is a valid query in every search mode: no exception, no SQL error surfaces."""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentstack_lab.workspace import Workspace

FRAGMENTS = ['"', "'", "(", ")", "-", ":", "*", "^", "+", "NEAR", "NEAR(", "AND", "OR", "NOT", "{", "}", "[",
             "]", ",", ".", "\\", "%", "_", "\0", "éü", "東京", "🙂", "\u0300", "col:", "-x", "a*b", '""', " "]

queries = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet="abc xyz", max_size=5)), max_size=40)
    .map("".join),
    st.sampled_from(FRAGMENTS).map(lambda f: f * 2000),
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    with Workspace.open(tmp_path_factory.mktemp("prop"), announce=False) as ws:
        ws.memory.store_many([{"key": f"k{i}", "content": c} for i, c in enumerate(
            ["alpha beta", "NEAR the AND gate", "quote \" and paren (", "東京 tower", "col: value - minus"])])
        yield ws.memory


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries)
@example(query="")
@example(query="x" * 10_000)
@example(query=" ".join(["NEAR(a b)", '"unbalanced', "col:val", "-neg", "pre*", "^start", "AND OR NOT"] * 400))
@example(query="a " * 5000)
def test_search_never_raises(memory, query):
    for mode in ("fts", "vector", "hybrid"):
        results = memory.search(query, mode, limit=5)
        assert isinstance(results, list)
        assert all(0.0 <= r.score <= 1.0 + 1e-6 for r in results)
