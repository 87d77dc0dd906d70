"""Reading and changing single keys: `config get` / `config set`.

``set`` edits the file as written (never the merged view, so environment
overrides and defaults are not baked in), validates the result before
writing, keeps every other key and writes atomically under a lock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.alias_generators import to_camel

from vikingbot.config.loader import (
    ConfigError,
    _put,
    _snake,
    _split,
    describe_validation_error,
    to_field_names,
)
from vikingbot.config.schema import Config
from vikingbot.fsutil import locked_edit
from vikingbot.grammar import closest
from vikingbot.redact import MASK, mask_tree


def get_value(config: Config, key: str) -> Any:
    """The effective value at a dotted key (snake_case or camelCase)."""
    node: Any = config
    walked: list[str] = []
    for part in _split(key):
        walked.append(part)
        if isinstance(node, BaseModel):
            fields = type(node).model_fields
            name = part if part in fields else _from_camel(part, fields)
            if name is None and part in (node.model_extra or {}):  # a plug-in's section
                name = part
            if name is None:
                hint = closest(_snake(part), list(fields))
                also = f"; did you mean {'.'.join([*walked[:-1], hint])}?" if hint else ""
                raise ConfigError(f"{'.'.join(walked)}: unknown key{also}")
            node = getattr(node, name)
        elif isinstance(node, dict):
            if part not in node:
                raise ConfigError(f"{'.'.join(walked)}: not set")
            node = node[part]
        else:
            raise ConfigError(f"{'.'.join(walked)}: {'.'.join(walked[:-1])} has no sub-keys")
    return node


def canonical_key(key: str | list[str]) -> str:
    """``key`` spelled as the schema's fields are (snake_case), checked against it.

    A part the schema does not know raises ``ConfigError`` with the closest known key
    (``bot.heartbeat.interval``: did you mean ``bot.heartbeat.interval_seconds``?).
    Below a free-form part (a dict, a channel or plug-in section) the rest is kept as
    written."""
    node: Any = Config
    walked: list[str] = []
    parts = list(key) if isinstance(key, list) else _split(key)  # a list: already split
    for i, part in enumerate(parts):
        fields = getattr(node, "model_fields", None) if isinstance(node, type) else None
        if fields is None or node.model_config.get("extra") == "allow":
            return ".".join([*walked, *parts[i:]])
        name = part if part in fields else _from_camel(part, fields)
        if name is None:
            hint = _hint(_snake(part), list(fields))
            also = f"; did you mean {'.'.join([*walked, hint])}?" if hint else ""
            raise ConfigError(f"{'.'.join([*walked, part])}: unknown key{also}")
        walked.append(name)
        node = _model_of(fields[name].annotation)
    return ".".join(walked)


def _hint(part: str, fields: list[str]) -> str | None:
    """A close spelling, else the one field that begins with ``part`` (``interval``:
    ``interval_seconds``)."""
    found = closest(part, fields)
    if found is None:
        longer = [f for f in fields if f.startswith(part + "_")]
        found = longer[0] if len(longer) == 1 else None
    return found


def _model_of(annotation: Any) -> Any:
    """The model class an annotation holds (``X``, ``X | None``), else None (a dict or
    list of models is free-form below: its keys are the user's)."""
    from typing import get_args, get_origin

    if get_origin(annotation) in (dict, list):
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if get_origin(arg) in (dict, list):
            return None
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _from_camel(part: str, fields: dict[str, Any]) -> str | None:
    for name in fields:
        if to_camel(name) == part:
            return name
    return None


def to_plain(value: Any, *, reveal: bool = False, name: str = "") -> Any:
    """``value`` as JSON-like data; unless ``reveal``, every secret masked (see ``masking``).

    ``name`` is the key the value sits under (``config get`` of a single value).
    """
    plain = _plain(value, reveal=reveal)
    return plain if reveal else mask_tree(plain, name.rsplit(".", 1)[-1])


def _plain(value: Any, *, reveal: bool) -> Any:
    if isinstance(value, BaseModel):
        if reveal:  # JSON mode would print every SecretStr as '**********'
            return _plain(value.model_dump(mode="python"), reveal=True)
        return mask(value.model_dump(mode="json"), value)
    if isinstance(value, SecretStr):
        return value.get_secret_value() if reveal else MASK
    if isinstance(value, dict):
        return {k: _plain(v, reveal=reveal) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, reveal=reveal) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def mask(dumped: Any, model: Any) -> Any:
    """Replace every SecretStr value in a dumped model with ``***`` (None stays None)."""
    if isinstance(model, BaseModel) and isinstance(dumped, dict):
        out = {}
        for name, val in dumped.items():
            attr = getattr(model, name, None)
            if isinstance(attr, SecretStr):
                out[name] = "***"
            else:
                out[name] = mask(val, attr)
        return out
    if isinstance(model, dict) and isinstance(dumped, dict):
        return {k: mask(v, model.get(k)) for k, v in dumped.items()}
    return dumped


def parse_cli_value(text: str) -> Any:
    """``true``/``false``/numbers/``null``/JSON lists and objects; anything else is a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def set_value(path: Path, key: str | list[str], value: Any) -> dict[str, Any]:
    """Set one key in the config file; validate first; keep every other key.

    The file is changed through ``fsutil.locked_edit``: under its lock, and
    only if nobody saved it between the read and the write (else the key is
    set again on what they saved). ``key`` as a list is the path already split (a
    part may then hold a ``.``, as an MCP server's name may).
    """
    canonical_key(key)  # an unknown key is refused with a did-you-mean
    return _edit(path, key, lambda raw, parts: _put(raw, parts, value))


def append_value(path: Path, key: str, item: Any) -> bool:
    """Add ``item`` to the list at ``key`` (made when missing), under the file's lock, as
    ``set_value`` does. False when the list already held it (nothing written then)."""
    added: list[bool] = []

    def change(raw: dict[str, Any], parts: list[str]) -> None:
        node: Any = raw
        for part in parts[:-1]:
            spelled = next((k for k in node if k in (part, to_camel(part))), part)
            node = node.setdefault(spelled, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{'.'.join(parts)}: {part} is not a section")
        last = next((k for k in node if k in (parts[-1], to_camel(parts[-1]))), to_camel(parts[-1]))
        current = node.get(last) if isinstance(node.get(last), list) else []
        added[:] = [item not in current]
        node[last] = current if item in current else [*current, item]

    _edit(path, key, change)
    return added[0]


def remove_value(path: Path, key: str | list[str]) -> dict[str, Any]:
    """Remove one key from the config file (``ConfigError`` when it is not there)."""
    return _edit(path, key, _drop)


def _drop(raw: dict[str, Any], parts: list[str]) -> None:
    node: Any = raw
    for part in parts[:-1]:
        node = node.get(part, node.get(to_camel(part))) if isinstance(node, dict) else None
    last = parts[-1]
    spelled = next((k for k in node or {} if k in (last, to_camel(last))), None)
    if not isinstance(node, dict) or spelled is None:
        raise ConfigError(f"{'.'.join(parts)}: not set in the config file")
    del node[spelled]


def _edit(path: Path, key: str | list[str], change: Any) -> dict[str, Any]:
    parts = list(key) if isinstance(key, list) else _split(key)
    result: list[dict[str, Any]] = []

    def edit(text: str) -> str:
        raw = _parse_raw(path, text)
        change(raw, parts)
        from pydantic import ValidationError

        try:
            Config.model_validate(to_field_names(raw, Config))
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, str(path))) from exc
        result[:] = [raw]
        return json.dumps(raw, indent=2, ensure_ascii=False) + "\n"

    locked_edit(path, edit, error=ConfigError, mode=0o600)
    return result[0]


def _parse_raw(path: Path, text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object with a 'bot' section")
    return data
