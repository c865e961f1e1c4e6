"""Markdown → HTML for untrusted model output.

Model text is rendered with markdown-it-py (CommonMark plus tables and strikethrough) and the
HTML is then cleaned with nh3 (ammonia): an allow-list of tags and attributes, no ``<script>``
or ``<style>`` (their content is dropped too), no event-handler or ``style`` attributes, and only
``http``, ``https`` and ``mailto`` URLs. ``class`` survives only on ``<code>`` and only for
``language-*`` tokens (what a fenced block's info string becomes): a class the page's own CSS
knows (JupyterLab's ``jp-*``, Lumino's ``lm-*``, anything else) could make model output pass for
part of the UI — a fake dialog or toolbar over the real one. The widget shows the result in ``ipywidgets.HTML``,
which front ends insert as-is, so everything that reaches it goes through :func:`markdown_to_html`
or :func:`escape`.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

__all__ = ["markdown_to_html", "sanitize_html", "escape", "ALLOWED_TAGS", "URL_SCHEMES"]

ALLOWED_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "kbd", "li", "mark", "ol", "p", "pre", "s", "span", "strong", "sub",
    "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
})
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "code": {"class"},
    "td": {"align"},
    "th": {"align"},
    "ol": {"start"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,64}")


def _language_classes(value: str) -> str | None:
    """The ``language-*`` tokens of a ``class`` value, or None (drop the attribute) when there are none."""
    kept = [t for t in value.split() if _LANGUAGE_CLASS.fullmatch(t)]
    return " ".join(kept) or None


def _filter_attribute(element: str, attribute: str, value: str) -> str | None:
    if attribute == "class":
        return _language_classes(value) if element == "code" else None
    return value


@lru_cache(maxsize=1)
def _renderer():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])


def sanitize_html(fragment: str) -> str:
    """Clean an HTML fragment down to the allow-list (drops scripts, styles, handlers, bad URLs)."""
    import nh3

    return nh3.clean(
        fragment,
        tags=set(ALLOWED_TAGS),
        attributes={k: set(v) for k, v in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
        attribute_filter=_filter_attribute,
    )


def markdown_to_html(text: str) -> str:
    """Render untrusted Markdown to sanitised HTML."""
    if not text:
        return ""
    return sanitize_html(_renderer().render(text))


def escape(text: str) -> str:
    """Escape plain text for inclusion in HTML."""
    return html.escape(text, quote=True)
