"""Spec → backend documents, through the Jinja templates in ``templates/``: the shared helpers each backend's
``render`` uses. Which backend renders a spec is the registry's to say (``fmcluster.backends.registry.render``):
render sits below the backends."""

from __future__ import annotations

from pathlib import Path

from fmcluster.errors import UsageError
from fmcluster.render.documents import Document, RenderedDocuments


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


__all__ = ["Document", "RenderedDocuments", "write_documents"]
