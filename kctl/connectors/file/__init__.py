"""File connectors on Spark: FileSource (text, csv, json, parquet files -> records) and
FileSink (records -> files per topic and partition, at-least-once or exactly-once)."""

from kctl.connectors.file.reading import MalformedLine
from kctl.connectors.file.sink import FileSinkConnector, FileSinkTask
from kctl.connectors.file.source import FileSourceConnector, FileSourceTask

__all__ = ["FileSinkConnector", "FileSinkTask", "FileSourceConnector", "FileSourceTask",
           "MalformedLine"]
