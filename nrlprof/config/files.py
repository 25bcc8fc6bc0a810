"""NRL_PROFILE_CONFIG=path[:dotted.key]: a bounded, safe read of a YAML file, then its plan."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from nrlprof.config.interpolation import InterpolationTooLarge, check_interpolation_size
from nrlprof.config.plan import Plan
from nrlprof.config.readers import lookup
from nrlprof.config.variables import CONFIG_FILE_VARIABLE
from nrlprof.config.yaml_config import plan_from_section
from nrlprof.errors import ConfigError

FILE_FORM = (
    "'path/to/config.yaml' or 'path/to/config.yaml:dotted.key' naming a readable YAML file whose section is a mapping"
)
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 100
MAX_EXPANDED_NODES = 200_000
MAX_INTERPOLATED_SIZE = 10_000_000


class _YamlTooLarge(Exception):
    """Raised inside the loader; becomes a ConfigError naming the file."""


def _split_spec(spec: str) -> tuple[str, str | None]:
    """`path.yaml:dotted.key` when the part before the last ':' is a file, else the whole spec is the path."""
    head, colon, dotted = spec.rpartition(":")
    if colon and head and (os.path.isfile(head) or (os.path.exists(head) and not os.path.exists(spec))):
        return head, dotted.strip() or None
    if colon and head and not os.path.exists(spec):
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"no file {head!r}")
    return spec, None


def _read_bounded(path: str, spec: str) -> str:
    """At most MAX_FILE_BYTES of a regular file (never a device, a FIFO or a directory)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"cannot read {path!r} (not a regular file)")
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"cannot read {path!r} (not a regular file)")
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"no file {path!r}") from None
    except OSError as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"cannot read {path!r} ({err})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(
            CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"{path!r} is larger than {MAX_FILE_BYTES} bytes (not a config?)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"cannot read {path!r} ({err})") from None


def _expanded_size(node: object, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Nodes the document holds once every alias is expanded, counted without expanding."""
    import yaml

    ident = id(node)
    if ident in sizes:
        return sizes[ident]
    if ident in open_nodes:
        raise _YamlTooLarge("an alias refers to a node that contains it")
    open_nodes.add(ident)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, sizes, open_nodes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        for name, value in node.value:
            size += _expanded_size(name, sizes, open_nodes) + _expanded_size(value, sizes, open_nodes)
    open_nodes.discard(ident)
    sizes[ident] = min(size, MAX_EXPANDED_NODES + 1)
    return sizes[ident]


def _bounded_loader():
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader that refuses deep nesting while composing (PyYAML's composer recurses)."""

        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _YamlTooLarge(f"nested deeper than {MAX_DEPTH} levels")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def _parse_yaml(text: str) -> object:
    """safe_load, with nesting and alias expansion bounded (a "billion laughs" file is refused)."""
    loader = _bounded_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}, set()) > MAX_EXPANDED_NODES:
            raise _YamlTooLarge(f"it holds more than {MAX_EXPANDED_NODES} values once its aliases are expanded")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _load_yaml(path: str, spec: str) -> object:
    import yaml

    text = _read_bounded(path, spec)
    try:
        data = _parse_yaml(text)
    except _YamlTooLarge as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"refused YAML in {path!r}: {err}") from None
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, RecursionError) as err:
        # PyYAML's constructors raise the last three on malformed tagged values such as `!!timestamp x`
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"invalid YAML in {path!r}: {err}") from None
    if "${" in text and isinstance(data, dict):
        data = _resolve_interpolations(data, spec)
    return data


def _resolve_interpolations(data: dict, spec: str) -> dict:
    try:
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException
    except ImportError:
        return data
    try:
        check_interpolation_size(data, MAX_INTERPOLATED_SIZE)
    except InterpolationTooLarge as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"refused YAML: {err}") from None
    except RecursionError:
        detail = "refused YAML: interpolations nest too deeply"
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, detail) from None
    try:
        return OmegaConf.to_container(OmegaConf.create(data), resolve=True)
    except OmegaConfBaseException as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"an interpolation does not resolve: {err}") from None


def load_config_file(spec: str) -> tuple[str, str | None, Mapping]:
    """(path, dotted key or None, the whole document) of an NRL_PROFILE_CONFIG value, read as the plan reads it."""
    path, dotted = _split_spec(spec)
    root = _load_yaml(path, spec)
    if not isinstance(root, Mapping):
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"{path!r} does not hold a mapping")
    return path, dotted, root


def plan_from_file(spec: str, base: Plan | None = None) -> Plan:
    """The plan in `path.yaml` or in the section `path.yaml:dotted.key` (the NRL_PROFILE_CONFIG forms)."""
    path, dotted, root = load_config_file(spec)
    section: object = root
    if dotted is not None:
        found, section = lookup(root, dotted)
        if not found:
            raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"no key {dotted!r} in {path!r}")
        if not isinstance(section, Mapping):
            raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"{dotted!r} in {path!r} is not a mapping")
    prefix = f"{path}:{dotted}" if dotted else f"{path}:"
    return plan_from_section(dict(section), root, prefix, base, f"file:{spec}")


__all__ = ["CONFIG_FILE_VARIABLE", "MAX_FILE_BYTES", "load_config_file", "plan_from_file"]
