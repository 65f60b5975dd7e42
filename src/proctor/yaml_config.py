"""Config files in YAML, read with numbers as YAML users write them.

PyYAML follows YAML 1.1, where a float needs a dot and a signed exponent: `3e-4` and `1e5` are strings there
(`1.0e-5` is a float). YAML 1.2, and every other YAML reader a user is likely to know, read them as numbers, so
`YAMLLoader` does too. Every config file proctor reads goes through `read_yaml_config`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

#: YAML 1.2's exponent floats that YAML 1.1 reads as strings: no dot (`3e-4`, `1e5`), or an unsigned exponent
#: (`1.5e5`); the other floats (`0.5`, `1.0e-5`, `.inf`) YAML 1.1 already reads
EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")


class YAMLLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that reads `3e-4`, `1e5`, `1.5e5` as floats (YAML 1.2), as users write them."""


YAMLLoader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """The YAML document `text`, its numbers read as YAML 1.2 reads them (`YAMLLoader`)."""
    return yaml.load(text, Loader=YAMLLoader)


def read_yaml_config(path: Path) -> dict[str, Any]:
    """The mapping of config fields in the YAML file at `path`. A missing file, invalid YAML or a document that is
    not a mapping raises a `ValueError` (`FileNotFoundError` for the first) of one line naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such config file")
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({' '.join(str(e).split())})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of config fields, got {type(data).__name__}")  # noqa: TRY004
    return data
