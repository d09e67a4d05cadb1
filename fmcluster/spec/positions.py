"""Load YAML while remembering where every value came from.

pydantic only sees plain Python data, so the loader returns that data together with a map from each
field path (a tuple of keys and list indices) to its 1-based line and column in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fmcluster.errors import SpecError, SpecProblem
from fmcluster.spec.reading import compose_bounded, read_spec_text
from fmcluster.spec.yaml_numbers import yaml11_number_problem

Path_ = tuple[str | int, ...]


@dataclass
class PositionedDocument:
    """Plain data from a YAML file plus the position of every node in it."""

    file: str
    data: Any
    positions: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    # Positions of mapping keys (an unknown key is best reported at the key, not at its value).
    key_positions: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def position(self, path: Path_, at_key: bool = False) -> tuple[int | None, int | None]:
        """Position of ``path`` (its key when ``at_key``), or of its nearest ancestor in the file."""
        if at_key and path in self.key_positions:
            return self.key_positions[path]
        for end in range(len(path), -1, -1):
            prefix = tuple(path[:end])
            if prefix in self.positions:
                return self.positions[prefix]
        return None, None

    def problem(self, path: Path_, message: str, at_key: bool = False) -> SpecProblem:
        line, column = self.position(path, at_key)
        return SpecProblem(self.file, line, column, format_path(path), message)


def format_path(path: Path_) -> str:
    """``('queues', 0, 'nodes')`` → ``queues[0].nodes``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def load_yaml_with_positions(path: str | Path) -> PositionedDocument:
    """Read ``path`` as one YAML mapping. Every failure is a :class:`SpecError`, with a position where the
    file has one; hostile files (pipes, devices, alias bombs, deep nesting) fail fast (see ``reading``)."""
    return document_from_text(read_spec_text(path), str(path))


def document_from_text(text: str, name: str) -> PositionedDocument:
    """Compose ``text`` (within the loader's bounds) into one positioned YAML mapping named ``name``."""

    def fail(message: str, line: int | None = None, column: int | None = None) -> SpecError:
        return SpecError([SpecProblem(name, line, column, "", message)])

    if not text.strip():
        raise fail("is empty; a spec needs at least name, region, backend and queues")
    node = compose_bounded(text, name)
    if node is None:
        raise fail("is empty; a spec needs at least name, region, backend and queues")
    if not isinstance(node, yaml.MappingNode):
        kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
        raise fail(f"the top level must be a mapping of keys (name:, region:, …), not {kind}",
                   node.start_mark.line + 1, node.start_mark.column + 1)

    document = PositionedDocument(file=name, data=None)
    document.data = _to_python(node, (), document)
    return document


def _to_python(node: yaml.Node, path: Path_, document: PositionedDocument) -> Any:
    document.positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise SpecError([document.problem(path, "YAML merge keys (<<) are not supported in a spec")])
            key = _scalar(key_node, path, document)
            if isinstance(key, bool):
                # YAML 1.1 reads a bare `on:`/`yes:` key as a boolean; a spec's keys are names (`bootstrap[].on`).
                key = key_node.value
            if not isinstance(key, str):
                key = str(key)
            child = (*path, key)
            if key in result:
                line, column = key_node.start_mark.line + 1, key_node.start_mark.column + 1
                raise SpecError([SpecProblem(document.file, line, column, format_path(child),
                                             "duplicate key (it appears earlier in this mapping)")])
            document.key_positions[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = _to_python(value_node, child, document)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*path, index), document) for index, item in enumerate(node.value)]
    return _scalar(node, path, document)


def _scalar(node: yaml.Node, path: Path_, document: PositionedDocument) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise SpecError([document.problem(path, "a mapping key must be a plain value")])
    line, column = node.start_mark.line + 1, node.start_mark.column + 1
    try:
        value = yaml.SafeLoader("").construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise SpecError([SpecProblem(document.file, line, column, format_path(path), str(exc))]) from None
    problem = yaml11_number_problem(node.tag, node.value, value) if node.style is None else None
    if problem:
        raise SpecError([SpecProblem(document.file, line, column, format_path(path), problem)])
    return value
