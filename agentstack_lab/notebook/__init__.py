"""The notebook surface: ``%agent``/``%memory`` magics, the AgentTree widget and its text fallbacks.

Nothing is imported here; ``%load_ext agentstack_lab`` loads :mod:`.magics`, and the widget
(ipywidgets, markdown-it, nh3) is imported when a run is first displayed.
"""
