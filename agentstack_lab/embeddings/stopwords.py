"""English stop words: what keyword search ignores and the hash embedder leaves out of a query."""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "content_words"]

_WORD = re.compile(r"\w+")

STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below between
both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few for from
further had hadn't has hasn't have haven't having he her here hers herself him himself his how i if in into is
isn't it it's its itself just let me more most mustn't my myself no nor not now of off on once only or other ought
our ours ourselves out over own same shan't she should shouldn't so some such than that the their theirs them
themselves then there these they this those through to too under until up very was wasn't we were weren't what
when where which while who whom why will with won't would wouldn't you your yours yourself yourselves s t d ll m
re ve y
""".split())
"""English function words: a keyword hit on these alone is no hit (the usual list of Lucene / NLTK)."""


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are not stop words (lower-cased, in order)."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOP_WORDS]
