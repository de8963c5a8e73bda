"""The cluster admin: the elected process that places every partition and offsets shard on a broker."""
