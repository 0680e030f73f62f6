"""State file formats: their registry, file names, schema files, codecs, records and the load chain."""
