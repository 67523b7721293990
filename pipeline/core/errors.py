"""One error family, so the CLI can map every failure to an exit code and a one-line message."""

from __future__ import annotations


class FabricrefError(Exception):
    """A failure the user can act on. The message names the file / URL / field and what was expected."""

    exit_code = 1


class UsageError(FabricrefError):
    """The command was called wrongly (unknown reference, bad option value)."""

    exit_code = 2


class ValidationError(FabricrefError):
    """A declarative file or a record does not match its schema or its rules."""


class IntegrityError(FabricrefError):
    """Stored bytes do not match the hash they were pinned under, or are missing."""


class FetchError(FabricrefError):
    """A document could not be retrieved; nothing was stored."""


class ExtractionError(FabricrefError):
    """A rule did not match a snapshot the way it declares."""


class CompileError(FabricrefError):
    """Records and models cannot be combined into a consistent registry."""
