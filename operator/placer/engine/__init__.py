"""The scheduling engine: pure, no I/O. Cluster state, plugin framework, runtime, queue."""
