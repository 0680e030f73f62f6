"""The JVM-free state engine: a store's files loaded and decoded in Python, in worker processes."""
