"""The bytecode view of resume functions, on the real graph-break fixture (torch 2.13, Python 3.11).

The expectations come from the raw log: its `*_MODIFIED_BYTECODE` listings name the compiled
graphs and resume functions the page must link, its graph-break records name the source line the
page must show for the break. Listings and decompilation are checked against `dis` itself.
"""

from __future__ import annotations

import dis
import html as htmllib
import re
import sys

import pytest
from conftest import connect, ingest, scenario_run, write_hostile_log
from datasette.app import Datasette
from test_queries import raw_records

from tlindex.answers import decompile as decompile_module
from tlindex.answers.bytecode import parse_listing, resume_name
from tlindex.answers.reassemble import CannotReassemble, reassemble
from tlindex.answers.resume_functions import file_source_lines, user_traceback

PY311 = sys.version_info[:2] == (3, 11)


def raw_artifacts(pattern: str) -> dict[str, list[str]]:
    """Artifact name -> payloads, for the graph-break log's artifacts whose name matches, read from the file."""
    found: dict[str, list[str]] = {}
    for envelope, payload, *_ in raw_records("graph_breaks"):
        name = envelope.get("artifact", {}).get("name", "")
        if re.fullmatch(pattern, name) and payload is not None:
            found.setdefault(name, []).append(payload.decode())
    return found


def raw_listings() -> dict[str, str]:
    """Artifact name -> payload of every bytecode listing (one per resume function and kind)."""
    return {name: texts[0] for name, texts in raw_artifacts(r"torch_dynamo_resume_in_\w+_(ORIGINAL|MODIFIED)_BYTECODE").items()}


def text_of(html: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", html))


def resume_compiles(conn, run: int) -> dict[str, int]:
    return {name: row for row, name in conn.execute(
        "SELECT id, co_name FROM compiles WHERE run_id = ? AND co_name LIKE 'torch_dynamo_resume_in_%' "
        "ORDER BY id", (run,))}


def test_the_fixture_has_a_resume_function_that_calls_the_next():
    listings = raw_listings()
    modified = [name for name in listings if name.endswith("_MODIFIED_BYTECODE")]
    assert len(modified) >= 5
    assert any("__resume_at_" in listings[name] for name in modified)


@pytest.mark.asyncio
async def test_every_resume_function_has_a_bytecode_view_linked_from_compile_page_and_trie(ds, traces_db):
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "graph_breaks")
    resumes = resume_compiles(conn, run)
    logged = {name.removesuffix("_MODIFIED_BYTECODE") for name in raw_listings() if name.endswith("_MODIFIED_BYTECODE")}
    assert set(resumes) == logged
    trie = (await ds.client.get(f"/traces/-/tlindex/trie/{run}")).text
    for name, row in resumes.items():
        url = f"/traces/-/tlindex/compile/{row}/bytecode"
        page = await ds.client.get(url)
        assert page.status_code == 200, name
        assert f'href="{url}"' in (await ds.client.get(f"/traces/-/tlindex/compile/{row}")).text
        assert f'href="{url}"' in trie
    others = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND (co_name IS NULL OR co_name NOT LIKE "
                          "'torch_dynamo_resume_in_%')", (run,)).fetchall()
    for (row,) in others:
        assert (await ds.client.get(f"/traces/-/tlindex/compile/{row}/bytecode")).status_code == 404


@pytest.mark.asyncio
async def test_each_graph_and_resume_call_links_to_an_existing_compile(ds, traces_db):
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "graph_breaks")
    resumes = resume_compiles(conn, run)
    listings = raw_listings()
    resume_calls = 0
    for name, row in resumes.items():
        page = (await ds.client.get(f"/traces/-/tlindex/compile/{row}/bytecode")).text
        modified = listings[f"{name}_MODIFIED_BYTECODE"]
        for fn in set(re.findall(r"__compiled_fn_\d+_[0-9a-f_]+", modified)):
            (href,) = set(re.findall(rf'<a href="([^"]+)">{fn}</a>', page))
            artifact = int(href.rsplit("/", 1)[1])
            kind, compile_ = conn.execute("SELECT kind, compile FROM artifacts WHERE id = ?", (artifact,)).fetchone()
            assert (kind, compile_) == ("dynamo_output_graph", row)  # the graph this compile produced
        original = parse_listing(listings[f"{name}_ORIGINAL_BYTECODE"])
        for call, offset in set(re.findall(r"(__resume_at_(\d+)_\d+)", modified)):
            (href,) = set(re.findall(rf'<a href="([^"]+)">{call}</a>', page))
            target = int(re.fullmatch(r"/traces/-/tlindex/compile/(\d+)/bytecode", href)[1])
            # the resume function named after the line of that offset in the original code
            line = max((i for i in original.instructions if i.offset <= int(offset)), key=lambda i: i.offset).line
            (co_name,) = conn.execute("SELECT co_name FROM compiles WHERE id = ?", (target,)).fetchone()
            assert co_name == resume_name(name, line) and target in resumes.values() and target > row
            assert (await ds.client.get(href)).status_code == 200
            resume_calls += 1
    assert resume_calls >= 1


@pytest.mark.asyncio
async def test_the_break_shown_is_the_graph_break_record(ds, traces_db):
    """For each resume function torch_dynamo_resume_in_<fn>_at_<L>, the raw log has a graph-break
    record whose user traceback passes line L of <fn>: the page shows that line and its code."""
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "graph_breaks")
    records = raw_artifacts("dynamo_graph_break_reason")["dynamo_graph_break_reason"]
    for name, row in resume_compiles(conn, run).items():
        fn, line = re.fullmatch(r"torch_dynamo_resume_in_(.+)_at_(\d+)", name).groups()
        frames = [f for text in records for f in user_traceback(text) if f.fn == fn and f.line == int(line)]
        assert frames, name
        page = (await ds.client.get(f"/traces/-/tlindex/compile/{row}/bytecode")).text
        shown = re.search(r'<p id="break-source">(.*?)</p>', page, re.S)[1]
        assert f'<b class="break-line">{line}</b>' in shown
        assert frames[0].code and frames[0].code in text_of(shown)
        assert frames[0].file in text_of(shown)
        reason = text_of(page.split('<details class="break-reason">')[1].split("</details>")[0])
        assert "Graph Break Reason" not in reason and any(r.split("\n")[1].removeprefix("Graph Break Reason: ")
                                                          in reason for r in records)


def test_listings_parse_and_rebuild_to_the_same_dis_text():
    for name, text in raw_listings().items():
        listing = parse_listing(text)
        assert not listing.unparsed, name
        assert len(listing.instructions) == sum(1 for line in text.splitlines() if re.search(r"\d+ [A-Z_]+", line))
        if not PY311:
            with pytest.raises(CannotReassemble):
                reassemble(listing, text, name, "f.py", 1)
            continue
        code = reassemble(listing, text, name, "f.py", 1)
        assert dis.Bytecode(code).dis() == text


@pytest.mark.skipif(not PY311, reason="the fixture's listings are Python 3.11 bytecode")
def test_decompiled_source_is_shown_only_when_it_checks_out(monkeypatch):
    listings = raw_listings()
    name = next(n for n in listings if n.endswith("_ORIGINAL_BYTECODE") and "two_breaks_at_35" in n)
    text = listings[name]
    result = decompile_module.decompile(parse_listing(text), text, "f", "f.py", 1)
    assert result.source and "graph_break()" in result.source and "x * 2" in result.source
    # a decompiler answer that does something else is refused with the reason
    monkeypatch.setattr("depyf.decompile", lambda code: "def f():\n    return x + 3\n")
    wrong = decompile_module.decompile(parse_listing(text), text, "f", "f.py", 1)
    assert wrong.source is None and "does not" in wrong.reason
    # a listing of another Python (3.13 prints no offsets and has other opcodes) is not rebuilt
    other = "  1           RESUME                   0\n              LOAD_FAST_LOAD_FAST     1 (x, y)\n"
    refused = decompile_module.decompile(parse_listing(other), other, "f", "f.py", 1)
    assert refused.source is None and "cannot be turned back into a code object" in refused.reason


@pytest.mark.skipif(not PY311, reason="the fixture's listings are Python 3.11 bytecode")
def test_decompiled_source_is_the_same_whatever_was_decompiled_before():
    """depyf numbers its temporaries with a counter of its class: a page named them __temp_5 or __temp_37
    by what its process had decompiled before. The count starts again for each source."""
    texts = [t for n, t in sorted(raw_listings().items()) if n.endswith("_MODIFIED_BYTECODE")]
    first = [decompile_module.decompile(parse_listing(t), t, "f", "f.py", 1).source for t in texts]
    again = [decompile_module.decompile(parse_listing(t), t, "f", "f.py", 1).source for t in texts]
    assert len(texts) > 2 and all(source and "__temp_" in source for source in first)
    assert again == first


def test_the_users_file_is_read_only_when_it_agrees_with_the_trace(tmp_path):
    source = tmp_path / "prog.py"
    source.write_text("import torch\n\ndef f(x):\n    x = x + 1\n    return x\n")
    proof = {3: "def f(x):", 4: "x = x + 1", 5: "return x"}
    assert file_source_lines(str(source), proof)[1] == "import torch"
    assert file_source_lines(str(source), {**proof, 4: "x = x + 2"}) is None  # edited since the run
    assert file_source_lines(str(source), {}) is None  # nothing to check it against
    assert file_source_lines(str(source), {4: "x = x + 1", 5: "return x"}) is None  # too little proof
    assert file_source_lines(str(source), {2: "", 6: "  "}) is None  # blank lines prove nothing (issue 25)
    assert file_source_lines("prog.py", proof) is None  # a relative name: of which directory?
    secret = tmp_path / "secret.txt"
    secret.write_text("def f(x):\n    x = x + 1\n    return x\n")
    assert file_source_lines(str(secret), {1: "def f(x):", 2: "x = x + 1", 3: "return x"}) is None  # only .py
    link = tmp_path / "link.py"
    link.symlink_to(secret)
    assert file_source_lines(str(link), {1: "def f(x):", 2: "x = x + 1", 3: "return x"}) is None  # not via a link


@pytest.mark.asyncio
async def test_hostile_names_in_listings_are_escaped(tmp_path):
    """HAND-MADE log: a resume function whose name and listing carry HTML."""
    name = b"torch_dynamo_resume_in_evil_at_1"
    listing = (b"  1           0 RESUME                   0\n"
               b"              2 LOAD_CONST               1 ('<script>alert(1)</script>')\n"
               b"              4 LOAD_GLOBAL              1 (NULL + <img src=x onerror=alert(2)>)\n"
               b"<b>not an instruction</b>")
    records = [(b'{"artifact": {"name": "' + name + suffix + b'", "encoding": "string"}, "frame_id": 0, '
                b'"frame_compile_id": 0, "attempt": 0', listing) for suffix in (b"_ORIGINAL_BYTECODE", b"_MODIFIED_BYTECODE")]
    log = write_hostile_log(tmp_path / "dedicated_log_torch_trace_evil.log", records)
    db_path = tmp_path / "evil.db"
    ingest(db_path, [str(log)], jobs=1)
    (row,) = connect(db_path).execute("SELECT DISTINCT compile FROM artifacts WHERE name LIKE '%BYTECODE'").fetchone()
    datasette = Datasette([str(db_path)])
    await datasette.invoke_startup()
    page = (await datasette.client.get(f"/evil/-/tlindex/compile/{row}/bytecode")).text
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>not an" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Not shown:" in page  # the unparsed line is not turned into source
