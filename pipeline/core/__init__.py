"""The ground floor (paths, files, schemas, units, the store, the registry): it imports no stage or CLI."""
