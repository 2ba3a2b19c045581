"""The bytecode page of a resume function's compile: original and modified listings side by side,
Dynamo's insertions marked and linked, the user's source lines, the graph break that created it,
and depyf's source where it checks out (tlindex.answers.resume_functions)."""

from __future__ import annotations

from datasette.utils.asgi import NotFound
from markupsafe import Markup

from tlindex.answers.bytecode import COMPILED_FN, RESUME_AT, Instruction
from tlindex.answers.resume_functions import bytecode_artifacts, resume_view

from ..database import int_var, open_database, render
from ..highlight import highlighted_lines


def plugin_reads_files(datasette) -> bool:
    """Whether the page may read the user's source file (plugin setting `read_source_files`, default true)."""
    config = datasette.plugin_config("tlindex") or {}
    return bool(config.get("read_source_files", True))


def argument(inst: Instruction, links: dict[str, str]) -> Markup:
    """The shown argument of an instruction, escaped, with compiled-graph and resume names linked."""
    text = inst.argrepr
    out, last = Markup(""), 0
    for match in sorted([*COMPILED_FN.finditer(text), *RESUME_AT.finditer(text)], key=lambda m: m.start()):
        href = links.get(match[0])
        if match.start() < last:
            continue
        out += text[last:match.start()]
        out += Markup('<a href="{}">{}</a>').format(href, match[0]) if href else Markup("<b>{}</b>").format(match[0])
        last = match.end()
    return out + text[last:]


async def bytecode_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    compile_row = int_var(request, "compile")
    read_files = plugin_reads_files(datasette)
    view = await db.execute_fn(lambda conn: resume_view(conn, compile_row, read_files))
    if view is None:
        raise NotFound(f"Compile {compile_row} logged no bytecode listing (only resume functions do)")
    links = {g["name"]: urls.artifact(g["artifact"]) if g["artifact"] else urls.compile(g["compile"])
             for g in view.graphs}
    links.update({r["name"]: urls.bytecode(r["compile"]) for r in view.resumes if r["compile"]})
    decompiled = {label: {"d": d, "lines": highlighted_lines(d.source, "python") if d.source else None}
                  for label, d in view.decompiled.items()}
    return await render(datasette, request, "bytecode.html", {
        "database": db.name, "u": urls, "v": view, "c": view.compile, "decompiled": decompiled,
        "arg": lambda inst: argument(inst, links), "read_files": read_files})


async def listings_as_text(datasette, request) -> list[tuple[str, str]]:
    """What the page shows when it cannot analyse the listings: each listing as the trace logged it."""
    opened = await open_database(datasette, request)
    compile_row = int_var(request, "compile")
    listings = await opened.db.execute_fn(lambda conn: bytecode_artifacts(conn, compile_row))
    return [(name.strip("_").replace("_", " ").lower(), listing["text"]) for name, listing in sorted(listings.items())]
