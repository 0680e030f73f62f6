"""The checkpoint's logs: offsets, commits, metadata, source and sink file logs, the text log format."""
