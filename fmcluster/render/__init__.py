"""Spec → backend documents, through the Jinja templates in ``templates/``."""

from __future__ import annotations

from pathlib import Path

from fmcluster.backends.parts import backend_part
from fmcluster.errors import UsageError
from fmcluster.render.documents import Document, RenderedDocuments
from fmcluster.spec.models import Spec


def render(spec: Spec, spec_file: str = "spec.yaml", subnet_id: str | None = None) -> RenderedDocuments:
    """The spec's documents, by its backend's ``render(spec, spec_file, subnet_id=...)`` in
    ``fmcluster/backends/<name>/render.py``."""
    return backend_part(spec.backend, "render").render(spec, spec_file, subnet_id=subnet_id)


def write_documents(rendered: RenderedDocuments, directory: Path) -> list[Path]:
    """Write each document under ``directory`` (created if needed); returns the paths written.

    A path that is not a directory, or one fmcluster cannot write, is a :class:`UsageError` (exit 2)."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"-o {directory}: exists and is not a directory; give a directory for the documents "
                         "(it is created if missing)")
    written = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for document in [*rendered.documents, *rendered.examples]:
            path = directory / document.filename
            path.write_text(document.text)
            written.append(path)
    except OSError as exc:
        where = exc.filename or directory
        raise UsageError(f"-o {directory}: cannot write {where}: {exc.strerror or exc}") from None
    return written


__all__ = ["Document", "RenderedDocuments", "render", "write_documents"]
