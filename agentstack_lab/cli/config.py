"""``agentstack-lab config show|validate``: the effective configuration, and a check of a config file.

``validate`` is a check: exit 0 when the file is valid, 1 when it is not (the line names the field,
including a provider or embedder name no plugin registered, or a workflow trigger whose notebook is
neither a file beside the config nor a built-in workflow), 2 when there is no such file.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from agentstack_lab.cli.common import EXIT_FAIL, JSON_OPTION, CommandError, fail, print_json

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Show or validate the configuration.")


@app.command("show")
def config_show(ctx: typer.Context, as_json: bool = JSON_OPTION):
    """Print the effective configuration (secrets masked)."""
    from agentstack_lab.workspace import Workspace

    root = ctx.find_root().obj or {}
    ws = Workspace.open(root.get("workspace"))
    data = ws.config.to_public_dict()
    if as_json:
        print_json(data, as_written=True)  # the config file's own keys: this output loads as agentstack.config.json
        return
    from rich.console import Console
    from rich.json import JSON as RichJSON

    src = ws.config.source
    typer.echo(f"# {src if src else 'defaults (no agentstack.config.json found)'}; database {ws.db_path}")
    Console().print(RichJSON(json.dumps(data, default=str)))


@app.command("validate")
def config_validate(path: Path = typer.Argument(None, help="Config file (default: found from cwd)."),
                    as_json: bool = JSON_OPTION):
    """Check a config file; errors name the field (exit 1 when invalid, 2 when there is no such file)."""
    from agentstack_lab.config import ConfigError, check_names, find_config_file, load_config
    from agentstack_lab.hooks import check_trigger_notebooks
    from agentstack_lab.plugins import load_plugins
    from agentstack_lab.workflows.catalog import builtin_workflows
    from agentstack_lab.workspace import build_registries

    file = path or find_config_file()
    if file is not None and not Path(file).is_file():
        raise CommandError(f"{file}: no such file")
    try:
        cfg = load_config(file) if file is not None else load_config(start=Path.cwd())
        known = build_registries(load_plugins())  # the names a workspace would have: built-ins and plugins
        check_names(cfg, providers=known.providers.names(), embedders=known.embedders.names())
        root = Path(file).resolve().parent if file is not None else Path.cwd()  # the workspace folder
        check_trigger_notebooks(cfg, root, builtins=builtin_workflows() if cfg.hooks.triggers else ())
    except ConfigError as exc:
        if as_json:
            print_json({"ok": False, "file": str(Path(file).resolve()) if file else None, "error": str(exc)})
        raise fail(str(exc), EXIT_FAIL) from None
    if as_json:
        print_json({"ok": True, "file": str(Path(file).resolve()) if file else None})
    else:
        typer.echo(f"ok: {file}" if file else "ok: no agentstack.config.json found; using defaults")
