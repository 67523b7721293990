"""One error family, so the CLI can map every failure to an exit code and a one-line message."""

from __future__ import annotations


class FabricrefError(Exception):
    """A failure the user can act on. The message names the file / URL / field and what was expected."""

    exit_code = 1


class UsageError(FabricrefError):
    """The command was called wrongly (unknown reference, bad option value)."""

    exit_code = 2


class InputError(UsageError):
    """A request refused naming where it went wrong (`loc`, as FastAPI's 422 names fields)."""

    def __init__(self, message: str, loc: tuple[str, ...]) -> None:
        super().__init__(message)
        self.loc = loc


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


# Up to this many known ids are listed in full (every shipped topology); beyond, their count and a hint.
LIST_KNOWN = 30


class UnknownIdError(UsageError):
    """A misspelt id: bad usage naming the closest known ids (`known` is kept for a caller that widens the search)."""

    def __init__(self, what: str, name: str, known: list[str], hint: str = "", within: str = "") -> None:
        self.what, self.name, self.known = what, name, sorted(set(known))
        close = did_you_mean(name, self.known)
        message = f"no {what} {name!r}" + (f" in {within}" if within else "")
        if close:
            message += f"; did you mean {' or '.join(repr(c) for c in close)}?"
        if len(self.known) <= LIST_KNOWN:
            message += f" (known: {', '.join(self.known) or 'none'})"
        else:
            message += f" ({len(self.known)} known)"
        if hint:
            message += f"; {hint}"
        super().__init__(message)


def did_you_mean(name: str, known: list[str], n: int = 3) -> list[str]:
    """The known ids closest to `name` (difflib's ratio ≥ 0.6; a case-only difference always counts), best first."""
    import difflib

    lowered = {k.lower(): k for k in known}
    exact_case = [lowered[name.lower()]] if name.lower() in lowered and name not in known else []
    close = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)
    return list(dict.fromkeys([*exact_case, *(lowered[c] for c in close)]))[:n]


def os_error_message(exc: BaseException) -> str | None:
    """An OSError (or DuckDB IOException) that escaped a command, in one line naming the file; None for others."""
    import errno

    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else "a file"
        hint = {
            errno.EROFS: " (the checkout is on a read-only file system)",
            errno.EACCES: " (no permission: is the checkout read-only?)",
            errno.EPERM: " (no permission: is the checkout read-only?)",
            errno.ENOSPC: " (the disk is full)",
            errno.EDQUOT: " (the disk quota is used up)",
        }.get(exc.errno or 0, "")
        return f"cannot write or read {where}: {exc.strerror or exc}{hint}"
    if type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb") and type(exc).__name__ == "IOException":
        return f"DuckDB cannot write or read a file: {exc}"
    return None
