"""Finding connector plugins: built-ins, the `kctl.connectors` entry points, plugin.path dirs.

`connector.class` may be an alias (`FileSource`), a class name, or a dotted Python path,
matching Kafka Connect's habit of accepting both the simple and the full class name.
Transformations, predicates and converters have their own registries (kctl.transforms.chain,
kctl.runtime.converters); `all_plugins` and `any_plugin` look across all of them, as
Kafka Connect's `GET /connector-plugins?connectorsOnly=false` does.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kctl import __version__
from kctl.api.connector import Connector, SinkConnector, SourceConnector
from kctl.errors import PluginError
from kctl.states import ConnectorType, PluginInfo

# Kafka Connect's PluginType names, in the order its REST API lists them
OTHER_PLUGIN_TYPES = ("transformation", "predicate", "converter", "header_converter")

BUILTIN_CONNECTORS = {
    "DataGen": "kctl.connectors.datagen:DataGenSourceConnector",
    "FileSource": "kctl.connectors.file:FileSourceConnector",
    "FileSink": "kctl.connectors.file:FileSinkConnector",
    "JdbcSink": "kctl.connectors.jdbc:JdbcSinkConnector",
    "JdbcSource": "kctl.connectors.jdbc:JdbcSourceConnector",
}
# Class names configs written for other runtimes use, for the connectors that take their
# configuration (a Confluent JDBC config runs unchanged).
FOREIGN_CLASS_NAMES = {
    "JdbcSink": ("io.confluent.connect.jdbc.JdbcSinkConnector",),
    "JdbcSource": ("io.confluent.connect.jdbc.JdbcSourceConnector",),
}


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that could not be loaded: where it was found and why it failed."""

    where: str  # "entry point NAME (distribution D)" or a plugin.path entry
    error: str

    def __str__(self) -> str:
        return f"{self.where}: {self.error}"


@dataclass(frozen=True)
class ConnectorPlugin:
    cls: type[Connector]
    aliases: tuple[str, ...]

    @property
    def class_name(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    @property
    def type(self) -> ConnectorType:
        if issubclass(self.cls, SourceConnector):
            return ConnectorType.SOURCE
        if issubclass(self.cls, SinkConnector):
            return ConnectorType.SINK
        return ConnectorType.UNKNOWN

    def info(self) -> PluginInfo:
        try:
            version = self.cls().version()
        except Exception:
            version = "unknown"
        return PluginInfo(self.class_name, self.type.value, version, self.aliases)


def _load_ref(ref: str) -> object:
    module, _, attr = ref.partition(":")
    if not attr:
        module, _, attr = ref.rpartition(".")
    obj: object = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _aliases(cls: type, extra: Iterable[str] = ()) -> tuple[str, ...]:
    names = [*extra, cls.__name__]
    if cls.__name__.endswith("Connector"):
        names.append(cls.__name__[: -len("Connector")])
    return tuple(dict.fromkeys(names))


class Plugins:
    """The connector plugins one worker knows, loaded once at start."""

    def __init__(self, plugin_path: Iterable[str] = ()):
        self._by_name: dict[str, ConnectorPlugin] = {}
        self._plugins: list[ConnectorPlugin] = []
        # a name two plugins claim -> the class names claiming it: it resolves to neither
        self.ambiguous: dict[str, list[str]] = {}
        self.broken: list[BrokenPlugin] = []
        self.load_errors: list[str] = []
        for alias, ref in BUILTIN_CONNECTORS.items():
            self._register_ref(ref, (alias, *FOREIGN_CLASS_NAMES.get(alias, ())))
        for ep in importlib.metadata.entry_points(group="kctl.connectors"):
            dist = getattr(getattr(ep, "dist", None), "name", None)
            where = f"entry point {ep.name}" + (f" (distribution {dist})" if dist else "")
            try:
                loaded = ep.load()
            except Exception as e:  # a broken plugin never stops the worker
                self._broken(where, e)
                continue
            self._register(loaded, (ep.name,))
        for d in plugin_path:
            self._scan_dir(Path(d))

    def _broken(self, where: str, e: BaseException) -> None:
        b = BrokenPlugin(where, f"{type(e).__name__}: {e}")
        self.broken.append(b)
        self.load_errors.append(str(b))

    def _register_ref(self, ref: str, aliases: tuple[str, ...]) -> None:
        try:
            self._register(_load_ref(ref), aliases)  # type: ignore[arg-type]
        except Exception as e:
            self._broken(ref, e)

    def register(self, cls: type[Connector], aliases: Iterable[str] = ()) -> ConnectorPlugin:
        """Add a connector class that was not found by scanning (kctl.testing runs a
        class the test hands it); returns its plugin."""
        if not (inspect.isclass(cls) and issubclass(cls, Connector)) or inspect.isabstract(cls):
            raise PluginError(f"{cls!r} is not a concrete Connector class")
        self._register(cls, tuple(aliases))
        return self._by_name[_class_name(cls)]

    def _register(self, cls: type[Connector], aliases: Iterable[str]) -> None:
        if not (inspect.isclass(cls) and issubclass(cls, Connector)) or inspect.isabstract(cls):
            return
        plugin = ConnectorPlugin(cls, _aliases(cls, aliases))
        if plugin.class_name in self._by_name:
            return
        self._plugins.append(plugin)
        for name in (plugin.class_name, *plugin.aliases):
            if name in self.ambiguous:
                self.ambiguous[name].append(plugin.class_name)
                continue
            other = self._by_name.setdefault(name, plugin)
            if other is not plugin:  # two plugins claim one name: it means neither
                del self._by_name[name]
                self.ambiguous[name] = [other.class_name, plugin.class_name]
                self.load_errors.append(f"{name!r} is claimed by both {other.class_name} and "
                                        f"{plugin.class_name}; name either by its full class name")

    def _scan_dir(self, path: Path) -> None:
        """Import each module or package in a plugin.path directory and keep its connectors."""
        if not path.is_dir():
            self.load_errors.append(f"plugin.path entry {path} is not a directory")
            return
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
        for entry in sorted(path.iterdir()):
            if entry.name.startswith(("_", ".")):
                continue
            if entry.suffix == ".py" or (entry.is_dir() and (entry / "__init__.py").exists()):
                modname = entry.stem
                try:
                    mod = importlib.import_module(modname)
                except Exception as e:
                    self._broken(f"plugin.path entry {entry}", e)
                    continue
                for _, obj in inspect.getmembers(mod, inspect.isclass):
                    if obj.__module__ == mod.__name__:
                        self._register(obj, ())

    def connectors(self) -> list[ConnectorPlugin]:
        return sorted(self._plugins, key=lambda p: p.class_name)

    def known_names(self) -> list[str]:
        return sorted({p.aliases[0] if p.aliases[0] in self._by_name else p.class_name
                       for p in self._plugins})

    def connector_plugin(self, name: str) -> ConnectorPlugin:
        """Resolve an alias, simple or full class name, or a dotted path to import."""
        if not name:
            raise PluginError("connector.class is empty; known connectors: "
                              + ", ".join(self.known_names()))
        claimants = self.ambiguous.get(name)
        if claimants:
            raise PluginError(f"connector.class {name} is ambiguous: it is claimed by "
                              f"{' and '.join(claimants)}; use the full class name of the one "
                              f"you mean")
        plugin = self._by_name.get(name)
        if plugin is None and "." in name:
            try:
                obj = _load_ref(name)
            except (ImportError, AttributeError, ValueError):
                obj = None
            if inspect.isclass(obj) and issubclass(obj, Connector):
                self._register(obj, ())
                plugin = self._by_name.get(f"{obj.__module__}.{obj.__qualname__}")
        if plugin is None:
            raise PluginError(
                f"Failed to find any class that implements Connector and which name matches "
                f"{name}; known connectors: {', '.join(self.known_names())}")
        return plugin

    def new_connector(self, name: str) -> Connector:
        return self.connector_plugin(name).cls()

    # -- every plugin type -----------------------------------------------------------------
    def other_plugins(self) -> list[PluginInfo]:
        """Transformations, predicates, converters and header converters, each type sorted."""
        out: list[PluginInfo] = []
        for kind in OTHER_PLUGIN_TYPES:
            classes = {_class_name(c): c for c in _classes_of(kind)}
            out.extend(PluginInfo(name, kind, _version(cls)) for name, cls in sorted(classes.items()))
        return out

    def all_plugins(self) -> list[PluginInfo]:
        return [p.info() for p in self.connectors()] + self.other_plugins()

    def any_plugin(self, name: str) -> tuple[str, type]:
        """(type, class) of a connector, transformation, predicate or converter by any name."""
        try:
            plugin = self.connector_plugin(name)
            return plugin.type.value, plugin.cls
        except PluginError as e:
            not_a_connector = e
        from kctl.runtime.converters import resolve_converter
        from kctl.transforms.chain import resolve_predicate, resolve_transformation

        for kind, resolve in (("transformation", resolve_transformation),
                              ("predicate", resolve_predicate), ("converter", resolve_converter)):
            try:
                return kind, resolve(name)
            except PluginError:
                continue
        raise PluginError(f"Failed to find any plugin class named {name}: it is no connector, "
                          f"transformation, predicate or converter ({not_a_connector})")


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _classes_of(kind: str) -> list[type]:
    """The classes of one non-connector plugin type: built-ins and their entry points."""
    if kind in ("transformation", "predicate"):
        from kctl.transforms import chain

        names = chain.known_transforms() if kind == "transformation" else chain.known_predicates()
        resolve = (chain.resolve_transformation if kind == "transformation"
                   else chain.resolve_predicate)
        classes = []
        for n in names:
            try:
                classes.append(resolve(n))
            except PluginError:
                continue
        return classes
    from kctl.api.converter import Converter, HeaderConverter
    from kctl.runtime.converters import CONVERTER_ALIASES

    base = Converter if kind == "converter" else HeaderConverter
    return [c for c in CONVERTER_ALIASES.values() if issubclass(c, base)]


def _version(cls: type) -> str:
    """A plugin's own version() when it has one; built-ins report kctl's, as Kafka's do."""
    version = getattr(cls, "version", None)
    if version is None:
        return __version__
    try:
        return str(version(cls()))
    except Exception:
        return "unknown"

