"""Model output is untrusted: scripts, styles, handlers and javascript: URLs must come out inert."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from agentstack_lab.notebook.sanitize import escape, markdown_to_html, sanitize_html

HOSTILE = """# Report <script>alert("xss")</script>

<img src=x onerror="alert(1)"> and <style>body { display: none }</style>

[click me](javascript:alert(2)) <a href="JaVaScRiPt:alert(3)">raw link</a>
<a href=" javascript:alert(4)">spaced</a> <a href="data:text/html,<script>alert(5)</script>">data</a>
<div onclick="alert(6)" style="position:fixed">styled</div>
<svg onload="alert(7)"></svg><iframe src="https://evil.example"></iframe>
<a href="https://example.com/ok">fine</a>
"""


class _Audit(HTMLParser):
    """Collects every element and attribute a browser would see."""

    def __init__(self):
        super().__init__()
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "img", "svg", "iframe", "object", "embed", "form", "input", "math"):
            self.problems.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name == "style":
                self.problems.append(f"{tag}[{name}]")
            if name in ("href", "src", "action") and not re.match(r"(https?|mailto):", (value or "").strip(), re.I):
                self.problems.append(f"{tag}[{name}={value!r}]")


def _dangerous(html: str) -> list[str]:
    audit = _Audit()
    audit.feed(html)
    return audit.problems


def test_hostile_markdown_is_inert_but_text_survives():
    html = markdown_to_html(HOSTILE)
    assert _dangerous(html) == []
    assert "<h1>Report" in html
    assert 'href="https://example.com/ok"' in html
    assert "fine" in html and "styled" in html  # text kept, dangerous attributes dropped
    assert 'alert("xss")' not in html and "display: none" not in html  # script/style bodies are dropped


def test_markdown_features_render():
    html = markdown_to_html("| a | b |\n|---|---|\n| 1 | 2 |\n\n~~old~~ **bold** `code`\n\n```python\nx = 1\n```")
    assert "<table>" in html and "<td>1</td>" in html
    assert "<s>old</s>" in html and "<strong>bold</strong>" in html
    assert '<code class="language-python">' in html


@pytest.mark.parametrize("fragment", [
    '<a href="vbscript:msgbox(1)">x</a>',
    "<object data='x'></object><embed src='x'>",
    '<form action="https://evil"><input name=a></form>',
    "<math><mi xlink:href=\"javascript:alert(1)\">x</mi></math>",
])
def test_other_vectors_are_removed(fragment):
    html = sanitize_html(fragment)
    assert _dangerous(html) == []
    assert not re.search(r"vbscript:|javascript:|xlink", html, re.I)


def test_escape_and_empty():
    assert escape('<b a="1">') == "&lt;b a=&quot;1&quot;&gt;"
    assert markdown_to_html("") == ""


def test_audit_catches_what_it_looks_for():
    assert _dangerous('<img src=x onerror="a()"><a href="javascript:x">y</a><p style="x">z</p>') == [
        "<img>", "img[src='x']", "img[onerror]", "a[href='javascript:x']", "p[style]"]
