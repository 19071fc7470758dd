"""kctl: the Kafka Connect model in Python, with Spark as the data engine."""

__version__ = "0.1.0"
