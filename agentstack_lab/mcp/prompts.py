"""The MCP server's prompts: user-chosen starting points (a host's slash commands) that drive the tools.

Each prompt is one user message naming the tools to call, so a host that lists prompts offers the
workspace's main workflows without the user knowing the tool names.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["PROMPTS", "ask_agents", "recall", "review_code"]


def ask_agents(question: Annotated[str, Field(description="What to ask the agent tree.")]) -> str:
    """Ask agentstack-lab's recursive agent tree a question and report its answer."""
    return ("Answer this with agentstack-lab's agent tree: call agent_run with this prompt and wait=true, then "
            "give its result, and from agent_tree say which agents contributed and what each found. If the run "
            "fails asking for approval, tell me so instead of setting auto_approve yourself.\n\n"
            f"Question: {question}")


def recall(topic: Annotated[str, Field(description="What to look for in the workspace memory.")]) -> str:
    """Gather what the workspace memory holds about a topic."""
    return ("Search agentstack-lab's workspace memory for the topic below with memory_search, read the best "
            "entries with memory_get, and summarise what is known, citing each entry's key. Say so plainly if "
            f"nothing relevant is stored.\n\nTopic: {topic}")


def review_code(code: Annotated[str, Field(description="The code or unified diff to review.")]) -> str:
    """Run an adversarial review loop (reviewer verdicts, coder revisions) over some code."""
    return ("Review this code with agentstack-lab's adversarial review loop: start it with review_loop_start, "
            "poll review_loop_status until it is no longer running, then report the outcome, the reviewer's "
            f"findings from review_loop_issues and the final code from review_loop_get_code.\n\n{code}")


PROMPTS = (ask_agents, recall, review_code)
