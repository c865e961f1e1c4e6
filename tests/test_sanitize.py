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


CLASS_ATTACKS = """<div class="jp-Dialog lm-Widget">fake dialog</div>
<span class="jp-mod-active">span</span> <p class="jp-RenderedHTMLCommon">para</p>
<code class="language-python jp-InputArea lm-Menu">mixed</code>
<code class="jp-OutputArea">only jp</code> <code class="LANGUAGE-x">upper</code>
<code class="language-">empty lang</code> <code class="xlanguage-python">prefixed</code>
<pre class="language-python"><code class="language-js">x</code></pre>
<a href="https://example.com" class="jp-Button">link</a> <table class="lm-DataGrid"><tr><td class="jp-x">c</td></tr></table>

```jp-Dialog lm-Widget
fenced with a hostile info string
```
"""


def _classes(html: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend((tag, value or "") for name, value in attrs if name == "class")

    Collect().feed(html)
    return found


def test_class_survives_only_as_language_tokens_on_code():
    html = markdown_to_html(CLASS_ATTACKS)
    classes = _classes(html)
    assert all(tag == "code" for tag, _ in classes), classes
    assert all(re.fullmatch(r"language-[A-Za-z0-9_+#.-]+", token) for _, value in classes for token in value.split())
    assert not [t for _, v in classes for t in v.split() if t.startswith(("jp-", "lm-"))]
    assert ("code", "language-python") in classes and ("code", "language-js") in classes
    assert ("code", "language-jp-Dialog") in classes  # a fenced block's first word is only ever a language-* class
    for text in ("fake dialog", "only jp", "mixed", "link", "fenced with a hostile info string"):
        assert text in html  # the text stays; only the attribute goes
    assert sanitize_html('<code class="jp-X">a</code>') == "<code>a</code>"
    assert sanitize_html('<code class="  language-rust  lm-Y ">a</code>') == '<code class="language-rust">a</code>'
