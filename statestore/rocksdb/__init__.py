"""RocksDB's files: snapshot zips, their manifests, SST tables, list values, snapshot rows."""
