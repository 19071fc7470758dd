"""The embedded durable log: Kafka's storage model on local files, for standalone workers.

Layout under ``state_dir/log``::

    <topic>/topic.json                      partitions and topic config
    <topic>/<partition>/<base offset>.log   segments of framed records

A frame is ``length, crc32, offset, timestamp, key_len, value_len, n_headers, key, value,
headers``; the CRC covers everything after it, so a torn tail left by ``kill -9`` is found
and cut off when the log is opened. A record is acknowledged only after ``write()`` handed
its bytes to the OS (and, with ``fsync=True``, after fsync), which is what makes
acknowledged records survive the death of the process.

Committed consumer offsets live in the compacted internal topic ``__consumer_offsets``.
Consumer groups are in-process and run kctl's group protocol itself: one
``kctl.group.coordinator.Coordinator`` per group and one ``GroupMember`` with its
``ConsumerHandler`` per consumer (``groups.py``), the state machines and assignors the
simulator behind ``kctl rebalance explain`` drives, chosen per consumer by
``partition.assignment.strategy`` as on a Kafka cluster. A membership change runs its whole
rebalance at once, under the group lock, with the log's clock; a consumer's poll is its
heartbeat, so one that stalls past ``session.timeout.ms`` is expired and rejoins when it
polls again. Consumers apply the result in ``poll_batch``: eager members revoke everything
they hold after each rebalance, cooperative ones only what moved; a partition is handed to
its new owner only once its old owner ran its revoke callback (or left the group).
"""

from kctl.transport.embedded.clients import EmbeddedAdmin, EmbeddedConsumer, EmbeddedProducer
from kctl.transport.embedded.frames import murmur2, partition_for_key
from kctl.transport.embedded.log import OFFSETS_TOPIC, EmbeddedTransport

# Error reports (DLQ headers, traces) name these classes: they keep their public path.
for _cls in (EmbeddedAdmin, EmbeddedConsumer, EmbeddedProducer, EmbeddedTransport):
    _cls.__module__ = __name__

__all__ = [
    "OFFSETS_TOPIC",
    "EmbeddedTransport",
    "murmur2",
    "partition_for_key",
]
