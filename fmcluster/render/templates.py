"""The Jinja environment over ``templates/`` and the parse-back that every rendered document goes through."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import yaml


def templates_dir() -> Path:
    """Where the templates are: inside the installed package, or at the root of a source checkout."""
    packaged = Path(__file__).resolve().parent.parent / "templates"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "templates"
    if checkout.is_dir():
        return checkout
    raise RuntimeError(f"fmcluster's templates are missing (looked in {packaged} and {checkout}); reinstall fmcluster")


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_text(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def render_yaml(template: str, **context: Any) -> tuple[str, Any]:
    """Render a YAML template and parse it back, so a layout mistake fails here and not at AWS."""
    text = render_text(template, **context)
    try:
        return text, yaml.safe_load(text)
    except yaml.YAMLError as exc:  # a template bug, not a user error
        raise RuntimeError(f"template {template} rendered invalid YAML: {exc}") from exc
