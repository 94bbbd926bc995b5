"""Which engine specs a pool admits: everything locally; on a public deployment, data-only
engines confined to the data folders, and (with LAB_ALLOW_ENGINES=1) model engines, but
never an `openai:` endpoint on a loopback, link-local or private address unless the owner
lists its host in LAB_ENGINE_HOSTS.

Messages never reveal anything about paths outside the data folders (not even whether they
exist): confinement is decided from the resolved path alone, before the file is touched.
"""
from __future__ import annotations

import ipaddress
import math
import socket
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from lab.engines.client.endpoints import api_root
from lab.engines.common import EngineConfig
from lab.engines.loading import is_hub_id
from lab.errors import EngineSpecError
from lab.settings import env

ENGINE_HOSTS_ENV = "LAB_ENGINE_HOSTS"
VISITOR_OPTIONS_FILE = Path(__file__).with_name("visitor_options.yaml")


def allowed_hosts_from_env() -> frozenset[str]:
    """Hosts (names or addresses, comma-separated, case-insensitive) the owner allows in LAB_ENGINE_HOSTS."""
    raw = env(ENGINE_HOSTS_ENV, "")
    return frozenset(h.strip().lower() for h in raw.split(",") if h.strip())


def inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def confined_path(target: str, roots: list[Path], what: str = "stored file",
                  why: str = "stored: engines read result files from there only") -> Path:
    """The resolved `target` when it lies inside one of `roots`; EngineSpecError otherwise, with
    the same message whether or not the outside path exists (only the resolved name is compared)."""
    refused = EngineSpecError(
        f"{what} '{Path(target).name}' is outside the data folders "
        f"({', '.join(r.name + '/' for r in roots) or 'none configured'}); {why}"
    )
    try:
        resolved = Path(target).expanduser().resolve()
    except (OSError, ValueError, RuntimeError):
        raise refused from None
    if not target.strip() or not inside(resolved, roots):
        raise refused
    return resolved


def _is_internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_loopback or ip.is_link_local or ip.is_private or ip.is_reserved or ip.is_multicast
            or ip.is_unspecified or not ip.is_global)


def check_endpoint(base_url: str, allowed_hosts: frozenset[str]) -> None:
    """Refuse an endpoint whose host resolves to any loopback, link-local or private address
    (every resolved address is checked) unless the host is in `allowed_hosts`. A URL without a
    valid host and port (`:abc`, `:99999`) is one line (api_root's), never a ValueError."""
    api_root(base_url)
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise EngineSpecError(f"openai engine: '{base_url}' is not an http(s) URL with a host")
    if host in allowed_hosts:
        return
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80), proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError):
        raise EngineSpecError(f"openai engine: cannot resolve host '{host}'") from None
    addresses = sorted({info[4][0] for info in infos})
    if not addresses or any(_is_internal(a) for a in addresses):
        raise EngineSpecError(
            f"openai engine: host '{host}' is a loopback, link-local or private address; a public deployment "
            f"sends no requests there unless the owner lists the host in {ENGINE_HOSTS_ENV}"
        )


@dataclass
class Admission:
    """The admission policy of one pool.

    - `public=False` (the owner's local lab): everything is admitted, as before (unless the
      owner switched model engines off with LAB_ALLOW_ENGINES=0: then as on a public Space).
    - `public=True`: `stored:` must resolve inside `data_roots`; model kinds need
      `allow_models` (LAB_ALLOW_ENGINES=1); `openai:` hosts must be public or listed."""

    public: bool = False
    allow_models: bool = True
    data_roots: list[Path] = field(default_factory=list)
    allowed_hosts: frozenset[str] = field(default_factory=allowed_hosts_from_env)

    def check(self, config: EngineConfig, visitor: bool = False) -> None:
        """Raise EngineSpecError when `config` may not be loaded here. `visitor`: a visitor of a
        public deployment asks (options from the allow-list only, model paths confined)."""
        if not self.public and self.allow_models:
            return
        from lab.engines.registry import ENGINE_KINDS

        cls = ENGINE_KINDS[config.kind]
        if not cls.answers_from_data and not self.allow_models:
            raise EngineSpecError(
                f"loading '{config.kind}' engines is disabled on this server; only reference and "
                "stored:RESULT_FILE are allowed (the owner can enable engines with LAB_ALLOW_ENGINES=1)"
            )
        if cls.stored_run:
            confined_path(config.target, self.data_roots)
        elif config.kind == "openai":
            for url in config.target.partition("#")[0].split(","):  # every replica, not only the first
                check_endpoint(url, self.allowed_hosts)
        if visitor and self.public:
            check_visitor_options(config, self.data_roots)
            if config.preset_on_target:
                check_visitor_preset(config)
            if config.kind == "openai":
                confined_served_model(config.target, self.data_roots)
            if not cls.answers_from_data and config.kind != "openai" and (config.preset is None or config.preset_on_target):
                confined_model(config.target, self.data_roots)


@lru_cache(maxsize=1)
def visitor_options() -> dict:
    """The allow-list of visitor options (visitor_options.yaml)."""
    return yaml.safe_load(VISITOR_OPTIONS_FILE.read_text(encoding="utf-8"))


def confined_model(target: str, roots: list[Path], what: str = "model") -> None:
    """A visitor's model or adapter: a Hub id (`ORG/NAME`: admitted without looking at the disk;
    the visitor's engine then loads it from the Hub cache only, never a same-named local folder:
    lab.engines.loading.hub_ids_only), or a folder inside the data folders; one message for every
    other path, whether it exists or not."""
    why = "a visitor loads models from the Hub (ORG/NAME), a preset, or the data folders only"
    text = str(target).strip()
    if is_hub_id(text):
        return
    confined_path(text, roots, what=what, why=why)


def check_visitor_preset(config: EngineConfig) -> None:
    """A visitor's `?preset=KEY`: open only while visitor_options.yaml lists `preset`. The preset's
    settings are the owner's, except `trust_remote_code`: it was vetted for the preset's own model, so
    a preset that runs a model's code is never applied to a checkpoint a visitor names."""
    if "preset" not in visitor_options()["options"]:
        raise EngineSpecError("option 'preset' is not open to visitors of this public deployment")
    if config.preset is not None and config.preset.trust_remote_code:
        raise EngineSpecError(
            f"preset '{config.preset.key}' runs its model's own code (trust_remote_code); on this public "
            f"deployment it loads only its own model ({config.preset.key} alone), never another checkpoint"
        )


def confined_served_model(target: str, roots: list[Path]) -> None:
    """The MODEL of a visitor's `openai:URL#MODEL` names the served model and the tokenizer the
    lab renders with: a plain name or a Hub id is fine; anything path-like (`/`, `~`, `.`) must lie
    inside the data folders, like a model path (one message whether it exists or not)."""
    model = target.partition("#")[2].partition("?")[0].strip()
    if model.startswith(("/", "~", ".")):
        confined_path(model, roots, what="tokenizer", why="a visitor's tokenizer is a Hub id or lies in the data folders")


def _number(key: str, value: str, rule: dict, limit: int) -> float:
    if len(value) > limit:
        raise EngineSpecError(f"option '{key}': at most {limit} characters")
    try:
        number = int(value) if rule["type"] == "int" else float(value)
    except ValueError:
        what = "an integer" if rule["type"] == "int" else "a number"
        raise EngineSpecError(f"option '{key}' must be {what}, got '{value[:limit]}'") from None
    if not math.isfinite(number) or not rule.get("min", -math.inf) <= number <= rule.get("max", math.inf):
        raise EngineSpecError(f"option '{key}' must be between {rule.get('min')} and {rule.get('max')}, got '{value}'")
    return number


def check_visitor_options(config: EngineConfig, roots: list[Path]) -> None:
    """Refuse any option a visitor may not give (visitor_options.yaml), or a value out of range."""
    table = visitor_options()
    rules, limit = table["options"], int(table.get("max_value_length", 40))
    for key, raw in config.options.items():
        rule = rules.get(key)
        if rule is None:
            raise EngineSpecError(
                f"option '{key}' is not open to visitors of this public deployment; they may set "
                f"{', '.join(sorted(rules))}"
            )
        value = str(raw)
        kind = rule["type"]
        if kind in ("int", "number"):
            _number(key, value, rule, limit)
        elif kind == "enum" and value not in [str(v) for v in rule["values"]]:
            raise EngineSpecError(f"option '{key}' must be one of {', '.join(map(str, rule['values']))}")
        elif kind == "text" and (len(value) > int(rule["max_length"]) or not value.isprintable()):
            raise EngineSpecError(f"option '{key}': at most {rule['max_length']} printable characters")
        elif kind == "path":
            confined_model(value, roots, what=key)
