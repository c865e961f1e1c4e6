"""``%memory``'s frames: a readable table in HTML and text, every field kept for code (through run_memory)."""

from __future__ import annotations

import re

import pandas as pd

from agentstack_lab.notebook.args import parse_memory_line
from agentstack_lab.notebook.memory_magic import run_memory


def memory_cmd(ws, line):
    return run_memory(ws.memory, parse_memory_line(line))


def heads(html):
    return re.findall(r"<th\b[^>]*>(.*?)</th>", html)


def test_search_table_html_and_text(ws, capsys):
    ws.memory.store("churn", "Customers who do not <b>order</b> within 90 days rarely come back.", tags=["cx", "risk"])
    ws.memory.store("weather", "Sunny all week.")
    hits = memory_cmd(ws, "search customers order --mode fts")
    assert isinstance(hits, pd.DataFrame) and list(hits.key) == ["churn"]
    assert hits.content[0].startswith("Customers who") and hits.tags[0] == "cx,risk"  # data for code, unchanged
    html = hits._repr_html_()
    assert heads(html) == ["key", "content", "tags", "score"]
    assert "<mark>Customers</mark>" in html and "<mark>order</mark>" in html and "&lt;b&gt;" in html
    assert "<b>" not in html and "**" not in html and ">cx, risk<" in html
    text = repr(hits).splitlines()
    assert text[0].split() == ["key", "content", "tags", "score"]
    assert text[1].startswith("churn  «Customers» who do not <b>«order»</b> within") and "cx, risk" in text[1]
    assert not capsys.readouterr().out  # nothing printed besides the frame


def test_slices_keep_the_table_and_odd_frames_fall_back(ws):
    for i in range(3):
        ws.memory.store(f"k{i}", f"revenue note {i} " + "word " * 80, namespace="team" if i == 2 else None)
    listing = memory_cmd(ws, "list")
    assert heads(listing._repr_html_()) == ["key", "content", "tags", "namespace"]  # one row outside default
    only_default = listing[listing.namespace == "default"]
    assert heads(only_default._repr_html_()) == ["key", "content", "tags"]  # a slice is still the table
    assert all(len(line) < 120 for line in repr(only_default).splitlines())  # excerpts, not whole entries
    assert "…" in repr(only_default)
    bare = listing[["key", "version"]]  # no content column: shown as any DataFrame
    assert "<style scoped>" in bare._repr_html_() and ">version</th>" in bare._repr_html_()  # pandas' own
    empty = memory_cmd(ws, "search nothing-like-this --mode fts")
    assert repr(empty) == "(no matches)" and "(no matches)" in empty._repr_html_()


def test_get_shows_the_whole_entry(ws):
    body = "Line one about churn.\nLine two about retention " + "and more " * 40
    ws.memory.store("long", body, tags=["a"])
    entry = memory_cmd(ws, "get long")
    text = repr(entry)
    assert text.splitlines()[0].split() == ["key", "long"] and text.endswith(body)
    assert "white-space: pre-wrap" in entry._repr_html_() and "and more " * 40 in entry._repr_html_()


def test_chosen_columns_display_exactly_those_columns(ws):
    """Issue 27 item 9: a column selection displays what was selected, in its order (not the curated set)."""
    ws.memory.store("churn", "Customers who do not order within 90 days rarely come back.", tags=["cx", "risk"])
    ws.memory.store("retain", "Customers who order twice stay for years.", tags=["cx"])
    hits = memory_cmd(ws, "search customers order")
    picked = hits[["key", "score", "matched", "content"]]
    html = picked._repr_html_()
    assert heads(html) == ["key", "score", "matched", "content"]  # `matched` shown, `tags` not
    assert ">cx" not in html and "<mark>" not in html  # content as stored, not the search snippet
    rows = re.findall(r"<tr>(.*?)</tr>", html)[1:]
    assert len(rows) == 2 and all(re.findall(r"<td[^>]*>(.*?)</td>", r)[2] in ("fts, vector", "fts", "vector")
                                  for r in rows)  # the matched indexes read as words
    text = repr(picked).splitlines()
    assert text[0].split() == ["key", "score", "matched", "content"] and "matched" not in text[1]
    reordered = hits[["content", "key"]]
    assert heads(reordered._repr_html_()) == ["content", "key"] and repr(reordered).split()[:2] == ["content", "key"]
    wider = hits.assign(length=hits.content.str.len())  # an added column is shown with the frame's others
    assert heads(wider._repr_html_()) == [str(c) for c in wider.columns] and ">snippet</th>" in wider._repr_html_()
    assert heads(hits[hits.score > 0]._repr_html_()) == ["key", "content", "tags", "score"]  # rows only: curated
