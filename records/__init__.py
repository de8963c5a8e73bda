"""Kafka's record batch v2 and record format (KIP-98), in one place: read, validate, build.

Gateway and engine both use this package and it uses neither (only the standard library,
crc32c and cramjam), so the format has a single home that a reader outside the broker can
use too. Modules:

    header.py       the 61-byte batch header: parse, peek, patch in place, checksum
    errors.py       InvalidBatch and the Reason for it (the gateway maps reasons to Kafka codes)
    validate.py     the one check a produced batch passes before the engine takes it
    varint.py       zig-zag varints, as record fields use them
    compression.py  the record codecs of the attributes' low bits (via cramjam)
    decode.py       records out of a batch (ListOffsets by timestamp, control markers)
    build.py        batches out of records, and control batches (transaction markers)
    control.py      the key and value of a control record (EndTransactionMarker)
"""
