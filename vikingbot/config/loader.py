"""Loading the config: file, `.env`, environment, `${VAR}` expansion, clear errors.

Precedence, highest first:

1. environment variables ``VIKINGBOT_<SECTION>__<KEY>`` (``__`` nests),
2. ``.env`` files (``./.env``, then ``<home>/.env``; a real variable wins),
3. the JSON config file (``${VAR}`` inside string values is expanded from
   the environment and the ``.env`` files),
4. the defaults in ``vikingbot.config.schema``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

from dotenv import dotenv_values
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from vikingbot import redact
from vikingbot.config.paths import ENV_PREFIX, Paths, config_path, home_dir
from vikingbot.config.schema import BotConfig, Config, StorageConfig
from vikingbot.errors import ConfigError

# Sections whose ${VAR} references are resolved at use time, not at load time.
_EXPAND_LATER = frozenset(
    {"bot.heartbeat.checkers", "bot.tools.mcp_servers", "bot.tools.mcpServers"}
)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


# ---------------------------------------------------------------- file I/O


def read_raw(path: Path) -> dict[str, Any]:
    """The config file as written (no defaults, no env), or {} when missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from exc
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


def _split(key: str) -> list[str]:
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"bad key {key!r}: expected a dotted path like bot.heartbeat.enabled")
    return parts


def _put(raw: dict[str, Any], parts: list[str], value: Any) -> None:
    node: dict[str, Any] = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        # reuse the spelling already in the file (camelCase or snake_case)
        spelled = next(
            (k for k in node if k == part or to_camel(k) == part or k == to_camel(part)), part
        )
        if last:
            node[spelled] = value
            return
        child = node.get(spelled)
        if child is None:
            child = node[spelled] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(parts[: i + 1])}: is a value, not a section")
        node = child


def write_raw(path: Path, data: Mapping[str, Any]) -> None:
    """Write the config file atomically (temp file, fsync, rename) under a lock."""
    from vikingbot.fsutil import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", mode=0o600)


def default_file_data() -> dict[str, Any]:
    """The config file a first start writes: every default, durations as the README
    writes them (``"2d"``, not ``172800.0``), whole numbers without ``.0``."""
    config = Config()
    data = _as_written(config, config.model_dump(mode="json", exclude={"storage"}))
    data["storage"] = {"workspace": None, "database_url": None}
    return data


def _as_written(model: Any, dumped: Any) -> Any:
    """``dumped`` (``model`` in JSON mode) with each Duration field as text."""
    from vikingbot.grammar import duration_text, to_seconds

    if not isinstance(model, BaseModel) or not isinstance(dumped, dict):
        if isinstance(dumped, float) and dumped.is_integer():
            return int(dumped)
        return dumped
    out = {}
    fields = type(model).model_fields
    for name, value in dumped.items():
        info = fields.get(name)
        is_duration = info is not None and any(
            getattr(m, "func", None) is to_seconds for m in info.metadata
        )
        text = duration_text(value) if is_duration and isinstance(value, float) else None
        out[name] = text if text is not None else _as_written(getattr(model, name, None), value)
    return out


# ---------------------------------------------------------------- expansion


def _expand(value: Any, env: Mapping[str, str], loc: str) -> Any:
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in env:
                raise ConfigError(
                    f"{loc}: environment variable {name} is not set (used as ${{{name}}})"
                )
            return env[name]

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        if loc in _EXPAND_LATER:
            # resolved by the checker itself when it runs (a missing secret fails open)
            return value
        return {k: _expand(v, env, f"{loc}.{k}" if loc else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, f"{loc}[{i}]") for i, v in enumerate(value)]
    return value


def expand_vars(text: str, env: Mapping[str, str], loc: str) -> str:
    """``${VAR}`` in ``text`` from ``env``; a missing variable is a ``ConfigError`` naming
    ``loc`` (sections expanded at use time: checkers, MCP servers)."""
    return str(_expand(text, env, loc))


# ---------------------------------------------------------------- settings


def _build(
    file_data: dict[str, Any], environ: Mapping[str, str], dotenv: Mapping[str, str]
) -> Config:
    """Merge environment, .env and file with pydantic-settings (imported only when needed)."""
    from pydantic_settings import (
        BaseSettings,
        EnvSettingsSource,
        PydanticBaseSettingsSource,
        SettingsConfigDict,
    )

    class MappingEnv(EnvSettingsSource):
        """Environment source over an explicit mapping (the process env or a test's)."""

        def __init__(self, settings_cls: type[BaseSettings], mapping: Mapping[str, str]) -> None:
            self._mapping = {_env_snake(k.lower()): v for k, v in mapping.items()}
            super().__init__(settings_cls)

        def _load_env_vars(self) -> Mapping[str, str | None]:  # type: ignore[override]
            return self._mapping

    class DictSource(PydanticBaseSettingsSource):
        def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
            super().__init__(settings_cls)
            self._data = data

        def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
            return self._data.get(field_name), field_name, False

        def __call__(self) -> dict[str, Any]:
            return self._data

    class Settings(BaseSettings):
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX, env_nested_delimiter="__", case_sensitive=False, extra="forbid"
        )

        bot: BotConfig = BotConfig()
        storage: StorageConfig = StorageConfig()

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (
                MappingEnv(settings_cls, environ),
                MappingEnv(settings_cls, dotenv),
                DictSource(settings_cls, _snake_top(file_data)),
            )

    settings = Settings()
    return Config(bot=settings.bot, storage=settings.storage)


def _env_snake(name: str) -> str:
    """``vikingbot_bot__heartbeat__intervalseconds`` (a camelCase key in capitals) as
    ``..._interval_seconds``: the file's camelCase key becomes its field name too, so the
    two spellings of one key meet as one (the environment wins) instead of clashing."""
    head, _, rest = name.partition("__")
    parts = rest.split("__") if rest else []
    top = Config.model_fields.get(head.removeprefix(ENV_PREFIX.lower()))
    model = _model_of(top.annotation)[1] if top is not None else None
    out = []
    keyed: type[BaseModel] | None = None  # a dict of models: this part is the user's key
    for part in parts:
        if keyed is not None:
            out.append(part)
            model, keyed = keyed, None
            continue
        fields = model.model_fields if model is not None else {}
        name_of = {f.replace("_", ""): f for f in fields}
        field = part if part in fields else name_of.get(part.replace("_", ""))
        out.append(field or part)
        shape, sub = _model_of(fields[field].annotation) if field else ("", None)
        model = sub if shape == "model" else None
        keyed = sub if shape == "dict" else None
    return "__".join([head, *out]) if parts else name


def _snake_top(data: dict[str, Any]) -> dict[str, Any]:
    unknown = [k for k in data if k not in ("bot", "storage")]
    if unknown:
        raise ConfigError(
            f"{unknown[0]}: unknown key{did_you_mean(str(unknown[0]))} "
            "(the top level has only 'bot' and 'storage')"
        )
    return to_field_names(data, Config)


def _model_of(annotation: Any) -> tuple[str, type[BaseModel] | None]:
    """("model", M) for a model field, ("dict", M) for dict[str, M], else ("", None)."""
    for arg in (annotation, *get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return "model", arg
        if get_origin(arg) is dict:
            args = get_args(arg)
            if len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
                return "dict", args[1]
    return "", None


def to_field_names(data: Any, model: type[BaseModel]) -> Any:
    """Rewrite camelCase keys to the model's snake_case field names, recursively.

    User-chosen dict keys (provider and checker names) are left as written.
    """
    if not isinstance(data, dict):
        return data
    by_alias: dict[str, str] = {}
    for fname, finfo in model.model_fields.items():
        by_alias[fname] = fname
        if finfo.alias:
            by_alias[finfo.alias] = fname
    out: dict[str, Any] = {}
    for key, value in data.items():
        target: str = by_alias.get(str(key), str(key))
        field = model.model_fields.get(target)
        if field is not None:
            shape, sub = _model_of(field.annotation)
            if shape == "model" and sub is not None:
                value = to_field_names(value, sub)
            elif shape == "dict" and sub is not None and isinstance(value, dict):
                value = {k: to_field_names(v, sub) for k, v in value.items()}
        out[target] = value
    return out


# ---------------------------------------------------------------- errors


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def known_keys(parts: list[str]) -> list[str]:
    """The keys a config section may hold, given the dotted path of one of its keys
    (``["bot", "heartbeat", "enabeld"]`` -> heartbeat's fields); [] when not a section."""
    model: type[BaseModel] = Config
    named = False  # the part is a name the user chose (a key of a dict of sections)
    for part in parts[:-1]:
        if named:
            named = False
            continue
        field = model.model_fields.get(_snake(part))
        if field is None:
            return []
        shape, sub = _model_of(field.annotation)
        if sub is None or shape not in ("model", "dict"):
            return []
        model, named = sub, shape == "dict"
    return [] if named else list(model.model_fields)


def did_you_mean(dotted: str) -> str:
    """``"; did you mean bot.heartbeat.enabled?"`` for a mistyped key, else ``""``."""
    from vikingbot.grammar import closest

    parts = dotted.split(".")
    found = closest(_snake(parts[-1]), known_keys(parts))
    return f"; did you mean {'.'.join([*parts[:-1], found])}?" if found else ""


def describe_validation_error(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(_snake(str(p)) for p in err["loc"] if not str(p).startswith("function-"))
        etype = err["type"]
        ctx = err.get("ctx") or {}
        value = err.get("input")
        secretish = any(w in loc for w in ("key", "token", "secret", "password"))
        shown = "***" if secretish else json.dumps(value, default=str)
        if etype == "extra_forbidden":
            msg = "unknown key" + did_you_mean(loc)
        elif etype == "greater_than_equal":
            msg = f"must be at least {ctx.get('ge')}, got {shown}"
        elif etype == "greater_than":
            msg = f"must be greater than {ctx.get('gt')}, got {shown}"
        elif etype == "less_than_equal":
            msg = f"must be at most {ctx.get('le')}, got {shown}"
        elif etype == "literal_error":
            msg = f"must be one of {ctx.get('expected')}, got {shown}"
        elif etype == "value_error":
            msg = str(ctx.get("error", err["msg"]))
        else:
            msg = f"{err['msg'][0].lower()}{err['msg'][1:]}, got {shown}"
        lines.append(f"{loc}: {msg}")
    head = f"invalid config ({source}):" if len(lines) > 1 else f"invalid config ({source}): "
    return head + ("\n  " + "\n  ".join(lines) if len(lines) > 1 else lines[0])


# ---------------------------------------------------------------- public


def dotenv_files(home: Path) -> tuple[Path, Path]:
    """The ``.env`` files a home reads, the latter winning: ``<home>/.env``, ``./.env``."""
    return home / ".env", Path.cwd() / ".env"


def dotenv_values_for(home: Path) -> dict[str, str]:
    """Values from ``<home>/.env`` and ``./.env`` (the latter wins)."""
    return _dotenv(home)


def home_environ(home: Path, process: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a home's parts see: its ``.env`` values under the real
    variables (``process``, default ``os.environ``), which win."""
    return {**_dotenv(home), **(os.environ if process is None else process)}


def _dotenv(home: Path) -> dict[str, str]:
    merged: dict[str, str] = {}
    for path in dotenv_files(home):
        if path.is_file():
            merged.update({k: v for k, v in dotenv_values(path).items() if v is not None})
    return merged


def resolve_paths(config: Config, config_file: Path, home: Path) -> Paths:
    data = config.storage.workspace
    if data is None:
        data_dir = home / "data"
    else:
        data = Path(data).expanduser()
        data_dir = data if data.is_absolute() else (config_file.parent / data)
    url = config.storage.database_url or f"sqlite:///{data_dir / 'state.db'}"
    return Paths(home=home, config_file=config_file, data_dir=data_dir, database_url=url)


def load_config(
    config_path_: Path | str | None = None,
    *,
    create: bool = True,
    environ: Mapping[str, str] | None = None,
    changes: Sequence[tuple[str, Any]] = (),
) -> tuple[Config, Paths]:
    """Load and validate the effective config; create the file with defaults if asked.

    ``changes`` (dotted key, value) are set on the file's data first, nothing written:
    the config as every command will see it once ``config set`` has written them.
    """
    env = dict(os.environ if environ is None else environ)
    home = home_dir(env)
    path = config_path(config_path_, env)
    if create and not path.exists():
        write_raw(path, default_file_data())
    raw = read_raw(path)
    for key, value in changes:
        _put(raw, _split(key), value)
    dotenv = _dotenv(home)
    expanded = _expand(raw, {**dotenv, **env}, "")
    prefixed_env = {k: v for k, v in env.items() if k.upper().startswith(ENV_PREFIX)}
    prefixed_dotenv = {k: v for k, v in dotenv.items() if k.upper().startswith(ENV_PREFIX)}
    for name in ("VIKINGBOT_HOME", "VIKINGBOT_CONFIG"):
        prefixed_env.pop(name, None)
        prefixed_dotenv.pop(name, None)
    try:
        if prefixed_env or prefixed_dotenv:
            config = _build(expanded, prefixed_env, prefixed_dotenv)
        else:  # nothing to merge: plain validation, without loading pydantic-settings
            config = Config.model_validate(_snake_top(expanded))
    except ValidationError as exc:
        source = str(path)
        if prefixed_env or prefixed_dotenv:
            source += " + VIKINGBOT_* environment"
        raise ConfigError(describe_validation_error(exc, source)) from exc
    paths = resolve_paths(config, path, home)
    # error text and logs hide these values wherever they turn up (redact.mask_text)
    redact.remember(redact.secrets_in(config.model_dump()))
    redact.remember(redact.secrets_in({**dotenv, "url": paths.database_url}))
    return config, paths
