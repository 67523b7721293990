"""The ground floor: errors, paths, files, schemas, units, the store and the record models.

Nothing here imports a pipeline stage or the CLI.
"""
