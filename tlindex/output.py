"""Print query results the way sqlite-utils does: JSON, newline JSON, CSV, TSV or a table.

The command line imports this module to declare its options: what printing needs (csv, json, tabulate) is
imported when something is printed.
"""

from __future__ import annotations

import re
import sys
from typing import Iterable, Iterator, TextIO

import click

TABLE_CELL_CHARS = 60


def output_options(fn):
    """The output flags of `sqlite-utils query`, as one decorator."""
    for decorator in reversed((
        click.option("-t", "--table", "as_table", is_flag=True, help="Output as a formatted table"),
        click.option("--fmt", default="simple", show_default=True,
                     help="Table format (any of tabulate's), with --table"),
        click.option("--csv", "as_csv", is_flag=True, help="Output CSV"),
        click.option("--tsv", "as_tsv", is_flag=True, help="Output TSV"),
        click.option("--json", "as_json", is_flag=True, help="Output a JSON array of objects (the default)"),
        click.option("--nl", "as_nl", is_flag=True, help="Output newline-delimited JSON"),
    )):
        fn = decorator(fn)
    return fn


def check_format(output: dict) -> None:
    """Refuse a --fmt that tabulate does not know (it would silently fall back to its default)."""
    if not output.get("as_table"):
        return  # tabulate (and the importlib.metadata it loads) only for a table
    import tabulate

    if output.get("fmt") not in tabulate.tabulate_formats:
        raise click.ClickException(f"--fmt {output.get('fmt')!r} is not a table format; "
                                   f"one of {', '.join(sorted(tabulate.tabulate_formats))}")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _shown(char: str) -> str:
    code = ord(char)
    if code >= 0x80:  # C1 controls, as cat -v shows them
        return "M-" + _shown(chr(code - 0x80))
    return "^?" if code == 0x7f else "^" + chr(code + 64)


# Characters that reorder what follows them on a terminal (bidi embeddings, overrides, isolates and marks).
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """Text for a terminal: control characters other than newline and tab shown as `cat -v` shows
    them (^[ for ESC), so a log cannot set the window title, the clipboard or links through them; and bidi
    controls as <U+202E>, so that a name cannot print backwards (labels lose them at the door; folder names and
    logs keep theirs)."""
    text = _CONTROL.sub(lambda match: _shown(match.group(0)), text)
    return _BIDI.sub(lambda match: f"<U+{ord(match.group(0)):04X}>", text) if not text.isascii() else text


def terminal_line(text: str) -> str:
    """Text for one line of a terminal: terminal_safe, and a newline or carriage return shown as ⏎ (a name
    or reason from a log cannot start a line of its own that reads as the tool's)."""
    return terminal_safe(text.replace("\r\n", "⏎ ").replace("\n", "⏎ ").replace("\r", "⏎ "))


def _cell(value, limit: int | None) -> object:
    if isinstance(value, str) and limit is not None:
        value = terminal_line(value)
        if len(value) > limit:
            value = value[:limit - 1] + "…"
    return value


TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def tsv_cell(value: object) -> str:
    """A value as a TSV cell, one line whatever it holds: a backslash, tab, newline or carriage return is written as
    a backslash and \\, t, n or r (as PostgreSQL's COPY text format); other control characters as for a terminal."""
    if value is None:
        return ""
    return terminal_safe(str(value).translate(TSV_ESCAPES)) if isinstance(value, str) else str(value)


def emit(columns: list[str], rows: Iterable[tuple], *, as_table=False, fmt="simple", as_csv=False,
         as_tsv=False, as_nl=False, out: TextIO | None = None, **_: object) -> None:
    """Write rows in the chosen format (JSON array by default) to `out` (stdout)."""
    import csv
    import json

    out = out or sys.stdout
    if as_table:
        import tabulate

        out.write(tabulate.tabulate([[_cell(v, TABLE_CELL_CHARS) for v in row] for row in rows],
                                    headers=columns, tablefmt=fmt) + "\n")
    elif as_tsv:  # one row, one line: what a value holds of tabs and line ends is escaped, never written raw
        out.write("\t".join(tsv_cell(column) for column in columns) + "\n")
        for row in rows:
            out.write("\t".join(tsv_cell(value) for value in row) + "\n")
    elif as_csv:
        # control characters escaped (ESC, BEL: what a terminal acts on); a newline stays, quoted as CSV does
        writer = csv.writer(out, delimiter=",", lineterminator="\n")
        writer.writerow([terminal_safe(column) for column in columns])
        writer.writerows([terminal_safe(v) if isinstance(v, str) else v for v in row] for row in rows)
    elif as_nl:
        for row in rows:
            out.write(json.dumps(dict(zip(columns, row)), default=repr) + "\n")
    else:
        out.write("[")
        for i, row in enumerate(rows):
            out.write((",\n " if i else "") + json.dumps(dict(zip(columns, row)), default=repr))
        out.write("]\n")


def outline(value, indent: str = "", limit: int = 20) -> Iterator[str]:
    """Data (a page's, as JSON would hold it) as indented lines for a terminal: scalars after their key, a
    long text as its first line and how many more, at most `limit` items of a list (and how many more)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                yield f"{indent}{key}:"
                yield from outline(item, indent + "  ", limit)
            else:
                yield f"{indent}{key}: {_scalar(item)}"
    elif isinstance(value, list):
        for item in value[:limit]:
            if isinstance(item, (dict, list)) and item:
                yield f"{indent}-"
                yield from outline(item, indent + "  ", limit)
            else:
                yield f"{indent}- {_scalar(item)}"
        if len(value) > limit:
            yield f"{indent}… {len(value) - limit:,} more (--json has them all)"
    else:
        yield f"{indent}{_scalar(value)}"


def _scalar(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    text = str(value)
    lines = text.split("\n")
    return lines[0][:200] + (f" … (+{len(lines) - 1:,} lines)" if len(lines) > 1 else "")


def table_lines(columns: list[str], rows: Iterable[Iterable], limit: int | None = 40) -> list[str]:
    """Rows as the lines of a plain table (tabulate's `simple`, numbers right-aligned, floats with 3 decimals), each
    cell one line of at most `limit` characters, for a command to print line by line (each through its `say`)."""
    import tabulate

    cells = [[_cell(value, limit) for value in row] for row in rows]
    return tabulate.tabulate(cells, headers=columns, tablefmt="simple", floatfmt=".3f").split("\n")


def fail_on_value(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]):
    """--fail-on clauses (tlindex.answers.gate), else a usage error naming the clause and the metrics."""
    from tlindex.answers.gate import GateError, parse_fail_on

    if not value:
        return None
    try:
        return parse_fail_on(",".join(value))
    except GateError as error:
        raise click.BadParameter(str(error).removeprefix("--fail-on: ")) from None


def gate_options(fn):
    """--baseline, --fail-on and --allow-unjudged, as `trend` and `run` take them (tlindex.answers.gate)."""
    fn = click.option("--allow-unjudged", is_flag=True,
                      help="Pass what the gate cannot judge (a metric not logged, a run that finished no compile, "
                           "a run judged against itself) instead of failing")(fn)
    fn = click.option("--fail-on", "fail_on", multiple=True, callback=fail_on_value, metavar="CLAUSES",
                      help="Exit 1 when a bound is crossed: METRIC OP BOUND, comma-separated (repeatable), e.g. "
                           "'compile_time>+20%,recompiles>+0,failures>0'; a signed bound is a change against "
                           "--baseline, in % or in the metric's unit")(fn)
    return click.option("--baseline", metavar="RUN", help="The run to compare with (id, label or unique label prefix)")(fn)

