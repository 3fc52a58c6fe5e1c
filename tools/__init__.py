"""The two state tools: state-storage-tool and read-rocksdb-tool."""
