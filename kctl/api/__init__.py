"""The connector API: what a connector, task, converter or transform plugin imports."""

from kctl.api.config import (
    NO_DEFAULT,
    AbstractConfig,
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConfigValue,
    Importance,
    NonEmptyString,
    Password,
    Range,
    Regex,
    ValidString,
    Width,
)
from kctl.api.connector import (
    Connector,
    ConnectorContext,
    ErrantRecordReporter,
    OffsetStorageReader,
    SinkConnector,
    SinkTask,
    SinkTaskContext,
    SourceConnector,
    SourceErrantRecordReporter,
    SourceTask,
    SourceTaskContext,
    Task,
    partition_key,
)
from kctl.api.converter import Converter, HeaderConverter
from kctl.api.data import (
    Field,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    Struct,
    Type,
)
from kctl.api.records import (
    ConnectRecord,
    Header,
    Headers,
    OffsetAndMetadata,
    RecordMetadata,
    SinkRecord,
    SourceRecord,
    TimestampType,
    TopicPartition,
)
from kctl.errors import ConnectError, DataError, RetriableError

__all__ = [
    "NO_DEFAULT", "AbstractConfig", "ConfigDef", "ConfigKey", "ConfigType", "ConfigValue",
    "ConnectError", "ConnectRecord", "Connector", "ConnectorContext", "Converter", "DataError",
    "ErrantRecordReporter", "Field", "Header", "HeaderConverter", "Headers", "Importance",
    "NonEmptyString", "OffsetAndMetadata", "OffsetStorageReader", "Password", "Range",
    "RecordMetadata", "Regex", "RetriableError", "Schema", "SchemaAndValue", "SchemaBuilder",
    "SinkConnector", "SinkRecord", "SinkTask", "SinkTaskContext", "SourceConnector",
    "SourceErrantRecordReporter", "SourceRecord", "SourceTask", "SourceTaskContext", "Struct", "Task", "TimestampType",
    "TopicPartition", "Type", "ValidString", "Width", "partition_key",
]
