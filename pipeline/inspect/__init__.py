"""The inspect verbs — audit, diff (changes), status, query, new — reading through the stages' library
modules, never a stage's entry point."""
