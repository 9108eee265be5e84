"""The YAML of a settings file (`TrainConfig.load`): YAML's safe loader, refusing a key given twice in
one mapping. YAML itself keeps the last silently, and a setting written twice in a config file is a
mistake, not an override."""

from __future__ import annotations

from typing import Any

import yaml


class RepeatedKey(yaml.YAMLError):
    """A mapping of a YAML file names one key twice."""


class UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, with `RepeatedKey` for a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise RepeatedKey(f"{key!r} is given twice (lines {seen[key] + 1} and {line}); keep one")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, UniqueKeyLoader.construct_mapping)


def read_yaml(text: str) -> Any:
    """The YAML document `text`; `RepeatedKey` (a `yaml.YAMLError`) for a key given twice in a mapping."""
    return yaml.load(text, Loader=UniqueKeyLoader)
