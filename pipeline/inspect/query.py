"""Read-only SQL over the registry: one statement whose every node reads, run in a child process whose address
space is limited, so neither a write nor an allocation DuckDB does not count (a 3 GB `repeat`) gets through.

The rule, in one place (`reading_statement`): DuckDB's own parser splits the text; exactly one statement; it is a
SELECT (DuckDB parses DESCRIBE, SHOW, SUMMARIZE, VALUES, WITH and FROM-first queries as SELECTs) or EXPLAIN of
one (`EXPLAIN ANALYZE` runs its statement, so EXPLAIN ANALYZE of a write is a write); and the SELECT's parse tree
(`json_serialize_sql`) holds only reading query nodes (a `WITH x AS (DELETE ... RETURNING *)` holds a
DELETE node) and calls no function that writes or runs text unseen (`checkpoint()`, `query('...')`)."""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import re
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..core.files import read_bounded
from ..core.paths import Layout
from ..core.registry import open_tables
from ..errors import FabricrefError, UsageError

_MEMORY_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE | re.ASCII)
_UNITS = {"kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4, "kib": 1024, "mib": 1024**2}
_UNITS |= {"gib": 1024**3, "tib": 1024**4}
MAX_THREADS = 64
# Query nodes that only read; any other (DELETE_QUERY_NODE, INSERT..., UPDATE...) makes the statement a write.
READING_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
# Functions a SELECT may call that write (the database file) or run SQL text this check never sees.
UNREAD_FUNCTIONS = {"checkpoint", "force_checkpoint", "query", "nextval", "setval"}


@dataclass(frozen=True)
class Limits:
    """What one `fabricref query` may use: a cross join of two billion-row ranges must stop, not eat the machine."""

    timeout: float = 30.0
    memory_limit: str = "1GB"
    threads: int = 2
    max_rows: int = 1_000_000

    def checked(self) -> Limits:
        if not (math.isfinite(self.timeout) and 0 < self.timeout <= 86_400):
            raise UsageError(f"--timeout {self.timeout}: expected a positive number of seconds (at most a day)")
        if not _MEMORY_RE.fullmatch(self.memory_limit.strip()):
            raise UsageError(f"--memory-limit {self.memory_limit!r}: expected a size such as 512MB, 2GB or 1.5GiB")
        if not 1 <= self.threads <= MAX_THREADS:
            raise UsageError(f"--threads {self.threads}: expected a whole number from 1 to {MAX_THREADS}")
        if self.max_rows < 1:
            raise UsageError(f"--max-rows {self.max_rows}: expected at least 1")
        if not 1 << 20 <= self.memory_bytes <= 1 << 44:
            raise UsageError(f"--memory-limit {self.memory_limit!r}: expected a size from 1MB to 16TiB")
        return self

    @property
    def memory_bytes(self) -> int:
        match = _MEMORY_RE.fullmatch(self.memory_limit.strip())
        assert match is not None
        return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


class QueryError(FabricrefError):
    """DuckDB refused the statement, or it passed a limit."""


# Rows fetched from DuckDB at a time when a result is streamed: Python holds one batch, never the whole result.
BATCH_ROWS = 10_000
# The child's address space beyond what it had when it was forked: the memory limit, plus this for DuckDB's own
# structures, thread stacks (counted per thread) and the batch being pickled.
ADDRESS_SLACK = 512 * 1024 * 1024
STACK_PER_THREAD = 16 * 1024 * 1024


def run(lay: Layout, sql: str, limits: Limits | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`stream`'s columns and every row, in memory."""
    with stream(lay, sql, limits, batch_rows=(limits or Limits()).max_rows + 1) as (columns, batches):
        return columns, [row for batch in batches for row in batch]


@contextlib.contextmanager
def stream(
    lay: Layout, sql: str, limits: Limits | None = None, batch_rows: int = BATCH_ROWS
) -> Iterator[tuple[list[str], Iterator[list[tuple[Any, ...]]]]]:
    """One read-only statement under the `limits`: its columns, and its rows in batches of at most `batch_rows`
    fetched as they are consumed. It runs in a forked child whose address space is capped at what it had plus the
    memory limit (an allocation DuckDB does not count fails there); the time limit counts only the waits for the
    child; a result over the row cap raises QueryError before the batch that crosses it is handed out."""
    limits = (limits or Limits()).checked()
    child = _Child(lay, sql, limits, batch_rows)
    try:
        kind, payload = child.receive()
        if kind != "columns":
            raise AssertionError(f"query child sent {kind!r} first")

        def batches() -> Iterator[list[tuple[Any, ...]]]:
            while True:
                kind, batch = child.receive()
                if kind == "end":
                    return
                yield batch

        yield payload, batches()
    finally:
        child.close()


class _Child:
    """The forked process running one query, and the pipe its messages (pickled (kind, payload)) come back on."""

    def __init__(self, lay: Layout, sql: str, limits: Limits, batch_rows: int) -> None:
        self.limits = limits
        self.left = limits.timeout  # the time limit counts only the waits for the child, never the reader's writing
        self.conn, sender = multiprocessing.Pipe(duplex=False)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            self.pid = os.fork()
        except OSError as exc:
            self.conn.close()
            sender.close()
            raise FabricrefError(f"cannot start the query process: {exc.strerror}") from None
        if self.pid == 0:
            code = 1
            try:
                self.conn.close()
                _serve(lay, sql, limits, batch_rows, sender.send)
                code = 0
            finally:
                os._exit(code)
        sender.close()

    def receive(self) -> tuple[str, Any]:
        started = time.monotonic()
        if not (self.left > 0 and self.conn.poll(self.left)):
            self.close()
            raise QueryError(
                f"query stopped after {self.limits.timeout:g} s (the time limit); raise it with --timeout SECONDS"
            )
        try:
            kind, payload = self.conn.recv()  # our own child's pickles, over our own pipe
        except EOFError:
            raise self._died() from None
        finally:
            self.left -= time.monotonic() - started
        if kind == "error":
            exc_type, message = payload
            raise {"usage": UsageError, "query": QueryError}.get(exc_type, FabricrefError)(message)
        if kind == "oom":
            raise self._memory_error()
        return kind, payload

    def _memory_error(self) -> QueryError:
        return QueryError(
            f"query needs more than the memory limit of {self.limits.memory_limit}; raise it with --memory-limit "
            "(e.g. --memory-limit 4GB) or narrow the query"
        )

    def _died(self) -> FabricrefError:
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGABRT, signal.SIGSEGV, signal.SIGKILL):
            # Out of address space, C++ aborts (std::bad_alloc uncaught) or the kernel kills: the memory limit.
            return self._memory_error()
        return QueryError(f"the query process ended without an answer (wait status {status})")

    def close(self) -> None:
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = 0
        self.conn.close()


def _vm_size() -> int:
    """This process's address space now (bytes), from /proc; 0 where the kernel does not say."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _serve(lay: Layout, sql: str, limits: Limits, batch_rows: int, send: Callable[[Any], None]) -> None:
    """The child: limit the address space, check and run the statement, send the columns, batches, the end."""
    try:
        base = _vm_size()
        if base:
            cap = base + limits.memory_bytes + ADDRESS_SLACK + STACK_PER_THREAD * limits.threads
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        tables = open_tables(lay)
        con = tables.con
        try:
            statement = _statement(con, tables, sql, limits, lay)
            with _reported():
                cursor = con.execute(statement)
            send(("columns", [d[0] for d in cursor.description] if cursor.description else []))
            seen = 0
            while True:
                with _reported():
                    batch = cursor.fetchmany(batch_rows)
                if not batch:
                    break
                seen += len(batch)
                if seen > limits.max_rows:
                    raise QueryError(
                        f"the query returns more than {limits.max_rows:,} rows; add a LIMIT or raise --max-rows"
                    )
                send(("rows", batch))
            send(("end", None))
        finally:
            con.close()
    except (_OutOfMemory, MemoryError):
        send(("oom", None))
    except UsageError as exc:
        send(("error", ("usage", str(exc))))
    except FabricrefError as exc:
        send(("error", ("query", str(exc))))
    except BaseException:
        send(("error", ("other", f"the query process failed:\n{traceback.format_exc()}")))


class _OutOfMemory(Exception):
    pass


def _plans_view(con: Any, tables: Any, lay: Layout, sql: str) -> list[Path]:
    """The `plans` view over every plan file of `fabricref plan`, columns matched by name (training and serving
    plans differ); the files it reads, so the lock-down allows their folder. An unreadable plan file stops only a
    query that names `plans`."""
    files = sorted(lay.plans_dir.glob("*.parquet")) if lay.plans_dir.is_dir() else []
    if not files or "plans" in tables.paths:
        return []
    for path in files:
        sys.audit("fabricref.read", str(path))
    sources = ", ".join("'" + p.resolve().as_posix().replace("'", "''") + "'" for p in files)
    try:
        con.execute(f"CREATE VIEW plans AS SELECT * FROM read_parquet([{sources}], union_by_name = true)")
    except duckdb.Error as exc:
        if re.search(r"\bplans\b", sql, re.IGNORECASE):
            raise QueryError(
                f"{lay.relative(lay.plans_dir)}/ holds a file DuckDB cannot read ({exc}); delete it or rerun its "
                "`fabricref plan`"
            ) from None
        return []
    return files


def _statement(con: Any, tables: Any, sql: str, limits: Limits, lay: Layout) -> Any:
    """The one reading statement of `sql`, with the connection limited and locked down first."""
    # Views over the Parquet files as they are now (never a stale copy). No other file access from SQL:
    # COPY TO, ATTACH, read_csv('/etc/...') and friends are all refused, and the setting is locked so a
    # statement cannot switch it back on.
    con.execute(f"SET memory_limit = '{limits.memory_limit.strip()}'")
    con.execute(f"SET threads = {int(limits.threads)}")
    # An in-memory DuckDB offloads to ./.tmp once the memory limit is reached, unbounded: a query stops at the
    # limit instead of filling the disk of whoever runs it (one cross join wrote 63 GB).
    con.execute("SET temp_directory = ''")
    tables.lock_down(extra=_plans_view(con, tables, lay, sql))
    return reading_statement(con, sql)


def reading_statement(con: Any, sql: str) -> Any:
    """The one statement of `sql` when every node of it reads (module docstring); else UsageError (not one
    statement) or QueryError (a write, or what cannot be checked)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {exc}") from None
    if not statements:
        raise UsageError("empty SQL: expected a SELECT statement")
    if len(statements) > 1:
        for statement in statements:
            _check_reads(con, statement)
        raise UsageError(
            f"{len(statements)} statements given; `fabricref query` runs exactly one SELECT "
            "(run them one at a time, or join them into one query)"
        )
    _check_reads(con, statements[0])
    return statements[0]


def _refused(kind: str) -> QueryError:
    return QueryError(
        f"refused: {kind}; the registry is opened read-only and `fabricref query` runs only statements that read "
        "(SELECT, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN of one; rebuild the registry with `dvc repro` "
        "instead of writing to it)"
    )


def _check_reads(con: Any, statement: Any, depth: int = 0) -> None:
    kind = statement.type.name
    text = statement.query
    if kind == "EXPLAIN" and depth < 4:
        inner = _explained(text)
        try:
            (explained,) = con.extract_statements(inner)
        except (duckdb.Error, ValueError):
            raise _refused("EXPLAIN of a statement that cannot be checked") from None
        _check_reads(con, explained, depth + 1)
        return
    if kind == "MULTI" and depth < 4:
        # A PIVOT without IN lists runs as two statements: DuckDB first reads the distinct values of its ON
        # columns into an enum type of the session, then pivots over them. The same query with the values
        # listed is one SELECT, holding the same reads: that is what is checked.
        listed = _pivot_values_listed(text)
        try:
            (statement,) = con.extract_statements(listed) if listed else ()
        except (duckdb.Error, ValueError):
            statement = None
        if statement is None or statement.type.name == "MULTI":
            raise _refused("a statement that runs as several (list a PIVOT's values: `ON col IN (...)`)")
        _check_reads(con, statement, depth + 1)
        return
    if kind != "SELECT":
        raise _refused(f"{kind} statement")
    (tree,) = con.execute("SELECT json_serialize_sql(?)", [text]).fetchone()
    parsed = json.loads(tree)
    if parsed.get("error"):
        raise _refused(f"a statement whose parse tree cannot be checked ({parsed.get('error_message')})")
    for node_type, function in _nodes(parsed["statements"]):
        if node_type is not None and node_type not in READING_NODES:
            raise _refused(f"a {node_type.removesuffix('_QUERY_NODE').removesuffix('_NODE')} inside the statement")
        if function is not None and function.lower() in UNREAD_FUNCTIONS:
            raise _refused(f"the function {function}() (it writes, or runs SQL text this check does not see)")


_PIVOT_WORDS = {"PIVOT", "PIVOT_WIDER"}
# How a parenthesized source of the statement form begins (a subquery, a nested PIVOT).
_SOURCE_STARTS = {"SELECT", "FROM", "WITH", "VALUES", "(", *_PIVOT_WORDS}
# What ends a PIVOT's ON list at the PIVOT's own nesting depth.
_AFTER_ON = {"USING", "GROUP", "ORDER", "LIMIT", "OFFSET", "UNION", "EXCEPT", "INTERSECT", "WINDOW", "QUALIFY"}


def _pivot_values_listed(text: str) -> str | None:
    """`text` with every ON item of a PIVOT statement that lists no values given `IN (NULL)` (per DuckDB's
    tokenizer, nesting followed through parentheses), or None when it holds no such PIVOT."""
    tokens = duckdb.tokenize(text)
    ends = [start for start, _ in tokens[1:]] + [len(text)]
    words = [(text[start:end].strip(), kind.name) for (start, kind), end in zip(tokens, ends, strict=True)]
    inserts: list[tuple[int, int]] = []
    depth, index = 0, 0
    while index < len(words):
        word, kind = words[index]
        # `PIVOT t ON …` and `PIVOT (SELECT …) ON …` are the statement form; `FROM t PIVOT (sum(v) FOR …)`, the
        # SQL standard's, always lists its values.
        after = [w.upper() for w, _ in words[index + 1 : index + 3]]
        standard = after[:1] == ["("] and after[1:2] != [] and after[1] not in _SOURCE_STARTS
        if kind == "keyword" and word.upper() in _PIVOT_WORDS and not standard:
            inserts += _unlisted_items(words, tokens, index + 1, depth)
        depth += word.count("(") - word.count(")") if kind == "operator" else 0
        index += 1
    if not inserts:
        return None
    # Each item in parentheses, so the IN list applies to the whole expression (`a || b`, `a = 'x'`).
    edits = sorted([(start, "(") for start, _ in inserts] + [(end, ") IN (NULL)") for _, end in inserts])
    for at, piece in reversed(edits):
        text = f"{text[:at]}{piece}{text[at:]}"
    return text


def _unlisted_items(words: list[tuple[str, str]], tokens: list[Any], start: int, depth: int) -> list[tuple[int, int]]:
    """The text span (start, end) of each item of the ON list (of the PIVOT whose tokens start at `start`, at
    nesting `depth`) that has no IN list of its own."""
    level, index = depth, start
    while index < len(words) and not (level == depth and _is(words[index], "ON")):
        word, kind = words[index]
        level += word.count("(") - word.count(")") if kind == "operator" else 0
        index += 1
    spans: list[tuple[int, int]] = []
    first, last, listed = None, None, False

    def close() -> None:
        if first is not None and last is not None and not listed:
            spans.append((first, last))

    for at in range(index + 1, len(words)):
        word, kind = words[at]
        at_depth = level == depth
        if kind == "operator":
            level += word.count("(") - word.count(")")
        if level < depth or (at_depth and (word == ";" or (kind == "keyword" and word.upper() in _AFTER_ON))):
            break
        if at_depth and word == ",":
            close()
            first, last, listed = None, None, False
            continue
        listed = listed or (at_depth and _is(words[at], "IN"))
        if kind != "comment":
            first = tokens[at][0] if first is None else first
            last = tokens[at][0] + len(word)
    close()
    return spans


def _is(word: tuple[str, str], keyword: str) -> bool:
    return word[1] == "keyword" and word[0].upper() == keyword


def _explained(text: str) -> str:
    """The statement EXPLAIN [ANALYZE] explains (what follows those keywords, per DuckDB's tokenizer)."""
    tokens = duckdb.tokenize(text)
    index = 1
    if len(tokens) > 1 and text[tokens[1][0] :].upper().startswith("ANALYZE"):
        index = 2
    if len(tokens) <= index:
        raise _refused("EXPLAIN of nothing")
    return text[tokens[index][0] :]


def _nodes(node: Any) -> Iterator[tuple[str | None, str | None]]:
    """(query node type, function name) of every node of a parse tree, depth first, without recursion limits."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            yield (
                (kind if isinstance(kind, str) and kind.endswith("_NODE") else None),
                (item.get("function_name") if isinstance(item.get("function_name"), str) else None),
            )
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


@contextlib.contextmanager
def _reported() -> Iterator[None]:
    """Out of memory (however DuckDB words it) as _OutOfMemory, other DuckDB errors as QueryError."""
    try:
        yield
    except duckdb.OutOfMemoryException:
        raise _OutOfMemory() from None
    except duckdb.Error as exc:
        if "out of memory" in str(exc).lower() or "bad_alloc" in str(exc).lower():
            raise _OutOfMemory() from None
        raise QueryError(f"SQL error: {exc}") from None


# A saved query is a short text file: more than this is not one.
MAX_QUERY_FILE_BYTES = 1 << 20


def saved_query(path: Path) -> str:
    """The SQL of `query --file PATH`: a UTF-8 text file of at most MAX_QUERY_FILE_BYTES, without NUL bytes
    (anything else is refused naming the file, never quoting it)."""
    data = read_bounded(path, MAX_QUERY_FILE_BYTES, "a saved query (a text file of SQL)")
    if b"\0" in data:
        raise UsageError(f"{path}: holds NUL bytes; expected a saved query (a text file of SQL)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (at byte {exc.start}); expected a saved query") from None


@contextlib.contextmanager
def quiet_errors(path: Path | None) -> Iterator[None]:
    """For a query read from a file: an error names the file, DuckDB's kind of error and the line, never the
    text (DuckDB's messages quote the statement)."""
    if path is None:
        yield
        return
    try:
        yield
    except QueryError as exc:
        message = str(exc)
        if not message.startswith("SQL error:"):
            raise
        kind = re.match(r"SQL error: (\w+(?: \w+)? Error)", message)
        line = re.search(r"LINE (\d+):", message)
        raise QueryError(
            f"{path}: SQL error: {kind.group(1) if kind else 'DuckDB refused the statement'}"
            + (f" at line {line.group(1)}" if line else "")
            + " (the statement is not shown: it was read from a file; run it inline to see DuckDB's full message)"
        ) from None


def rows(lay: Layout, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One library-owned SELECT with bound parameters (values are never spliced into SQL text)."""
    with open_tables(lay) as tables:
        return tables.tuples(sql, *(params or []))


def reference_summaries(lay: Layout) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Every reference: id, kind, form factor, title and how many of its fields have each status."""
    return rows(
        lay,
        """
        SELECT r.reference_id, r.kind, r.form_factor, r.title,
               count(*) FILTER (WHERE f.status = 'published') AS published,
               count(*) FILTER (WHERE f.status = 'preliminary') AS preliminary,
               count(*) FILTER (WHERE f.status = 'derived') AS derived,
               count(*) FILTER (WHERE f.status = 'unknown') AS unknown
        FROM reference_models r JOIN fields f USING (reference_id)
        GROUP BY ALL ORDER BY r.reference_id""",
    )
