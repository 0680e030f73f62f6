"""Watermarks: per-operator watermarks, stalls, progress reports and plans, late filters, the timeline."""
