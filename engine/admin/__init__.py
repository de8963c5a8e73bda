"""The cluster admin: the elected process that places every partition and coordinator shard on a broker."""
