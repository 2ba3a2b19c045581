"""The Datasette plugin, in process (datasette.client), on databases built from the real fixtures."""

from __future__ import annotations

import re
import sqlite3

import pytest
import pytest_asyncio
from conftest import connect, ingest, raw_envelopes, scenario_logs, scenario_run, write_hostile_log
from datasette.app import Datasette

LINK_RE = re.compile(r'<a class="compile status-(\w+)" href="/traces/-/tlindex/compile/(\d+)">\[([^\]]+)\]</a>')
# a trie badge of a multi-rank run: one compile id and status, labelled with the ranks that share it
BADGE_RE = re.compile(r'<a class="compile status-(\w+)" href="/traces/-/tlindex/compile/(\d+)"'
                      r'(?: title="ranks? ([\d, ]+): \w+")?>\[([^\]]+)\](?:<sub class="ranks">r[\d,-]+</sub>)?</a>')


@pytest_asyncio.fixture
async def ds(traces_db, tmp_path):
    other = tmp_path / "other.db"  # a database that is not tlindex's, served alongside
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE compiles (id INTEGER PRIMARY KEY, compile INTEGER, payload TEXT)")
    conn.execute("INSERT INTO compiles VALUES (1, 2, '0123456789abcdef0123456789abcdef')")
    conn.commit()
    conn.close()
    datasette = Datasette([str(traces_db), str(other)])
    await datasette.invoke_startup()
    return datasette


def fixture_conn(traces_db) -> sqlite3.Connection:
    return connect(traces_db)


@pytest.mark.asyncio
async def test_every_page_answers(ds, traces_db):
    conn = fixture_conn(traces_db)
    run = scenario_run(conn, "ddp_4ranks_diverge")[0]
    compile_id = conn.execute("SELECT id FROM compiles WHERE run_id = ? LIMIT 1", (run,)).fetchone()[0]
    artifact = conn.execute("SELECT id, payload FROM artifacts WHERE payload IS NOT NULL LIMIT 1").fetchone()
    for path in ["/traces/-/tlindex", f"/traces/-/tlindex/run/{run}", f"/traces/-/tlindex/trie/{run}",
                 f"/traces/-/tlindex/trie/{run}?rank=1", f"/traces/-/tlindex/compile/{compile_id}",
                 f"/traces/-/tlindex/artifact/{artifact[0]}", f"/traces/-/tlindex/payload/{artifact[1]}",
                 f"/traces/-/tlindex/payload/{artifact[1]}.txt", "/traces", "/traces/compiles",
                 "/traces/envelopes", "/other", "/other/compiles", "/"]:
        response = await ds.client.get(path)
        assert response.status_code == 200, path
    for path in ["/traces/-/tlindex/run/99999", "/traces/-/tlindex/compile/99999",
                 "/traces/-/tlindex/artifact/x", "/nope/-/tlindex", "/other/-/tlindex/run/1"]:
        assert (await ds.client.get(path)).status_code == 404, path


@pytest.mark.asyncio
async def test_the_trie_shows_every_compile_with_its_status(ds, traces_db):
    conn = fixture_conn(traces_db)
    for scenario in ("ddp_4ranks_diverge", "graph_breaks", "recompiles", "compile_errors"):
        (run,) = scenario_run(conn, scenario)
        html = (await ds.client.get(f"/traces/-/tlindex/trie/{run}")).text
        shown = set()  # (compile id, status, rank) covered by the badges; a badge may stand for several ranks
        for status, row, ranks, compile_id in BADGE_RE.findall(html):
            (rank,) = conn.execute("SELECT rank FROM compiles WHERE id = ?", (int(row),)).fetchone()
            for r in ([int(r) for r in ranks.split(", ")] if ranks else [rank]):
                shown.add((compile_id, status, r))
        expected = {(r[0], r[1], r[2]) for r in conn.execute(
            "SELECT compile_id, status, rank FROM compiles WHERE run_id = ? AND dynamo_start IS NOT NULL", (run,))}
        assert shown == expected, scenario
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    html = (await ds.client.get(f"/traces/-/tlindex/trie/{run}")).text
    (status,) = {r[0] for r in conn.execute("SELECT status FROM compiles WHERE run_id = ? AND compile_id = '0/0'",
                                            (run,))}
    assert f'title="ranks 0, 1, 2, 3: {status}">[0/0]<sub class="ranks">r0-3</sub>' in html  # identical ranks grouped
    assert "[0/1]<sub class=\"ranks\">r1</sub>" in html  # the recompile only rank 1 made, labelled
    rank1 = (await ds.client.get(f"/traces/-/tlindex/trie/{run}?rank=1")).text
    assert {int(r) for _, r, _, _ in BADGE_RE.findall(rank1)} == {r[0] for r in conn.execute(
        "SELECT id FROM compiles WHERE run_id = ? AND rank = 1 AND dynamo_start IS NOT NULL", (run,))}


@pytest.mark.asyncio
async def test_the_trie_lists_some_compile_id_less_records_and_links_all_of_them(ds, traces_db, monkeypatch):
    """A process has one [-/-] compile per torch._dynamo.reset(): thousands in a long test run. The trie lists
    ANONYMOUS_SHOWN of them and links the compiles table filtered to all of them."""
    from tlindex.pages import trie

    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    anonymous = [r for (r,) in conn.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = '-/-' "
                                            "ORDER BY rank, id", (run,))]
    assert len(anonymous) == 4
    html = (await ds.client.get(f"/traces/-/tlindex/trie/{run}")).text
    assert "all of them" not in html and all(f"/compile/{r}\"" in html for r in anonymous)
    monkeypatch.setattr(trie, "ANONYMOUS_SHOWN", 2)
    html = (await ds.client.get(f"/traces/-/tlindex/trie/{run}")).text
    listed = html.split('class="anonymous"', 1)[1].split("</p>", 1)[0]
    assert [int(r) for r in re.findall(r"/compile/(\d+)", listed)] == anonymous[:2]
    (link,) = re.findall(r'href="([^"]+)">all of them', listed)
    path, query = link.replace("&amp;", "&").split("?")
    table = await ds.client.get(f"{path}.json?{query}&_col=id&_shape=array")
    assert sorted(row["id"] for row in table.json()) == sorted(anonymous)


@pytest.mark.asyncio
async def test_a_big_trie_loads_the_rest_on_demand(ds, traces_db):
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "graph_breaks")
    html = (await ds.client.get(f"/traces/-/tlindex/trie/{run}?max_nodes=2")).text
    lazy = re.findall(r'data-src="([^"]+)"', html)
    assert lazy
    seen = set(LINK_RE.findall(html))
    pending = list(lazy)
    while pending:
        fragment = await ds.client.get(pending.pop())
        assert fragment.status_code == 200
        seen |= set(LINK_RE.findall(fragment.text))
        pending += re.findall(r'data-src="([^"]+)"', fragment.text)
    assert {int(r) for _, r, _ in seen} == {r[0] for r in conn.execute(
        "SELECT id FROM compiles WHERE run_id = ? AND dynamo_start IS NOT NULL", (run,))}


@pytest.mark.asyncio
async def test_compile_page_lists_exactly_its_artifacts(ds, traces_db):
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "train_step")
    compile_row = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = '0/0'", (run,)).fetchone()[0]
    html = (await ds.client.get(f"/traces/-/tlindex/compile/{compile_row}")).text
    table = html.split('class="rows-and-columns artifacts"', 1)[1].split("</table>", 1)[0]
    listed = re.findall(r"<tr><td>\d+</td><td>(?:<a href=\"[^\"]+\">)?([^<]+)", table)
    # from the log itself: every record of compile 0/0 with a payload (chromium events aside) or an artifact
    expected = []
    for envelope in raw_envelopes(scenario_logs("train_step")):
        kind = next(iter(envelope))
        if envelope.get("frame_id") == 0 and envelope.get("frame_compile_id") == 0 and kind != "chromium_event" \
                and ("has_payload" in envelope or kind == "artifact"):
            expected.append(envelope[kind].get("name") or kind)
    assert [name.strip() for name in listed] == expected
    assert "entire_frame_compile_time_s" in html and "inductor_config" in html
    assert html.index("entire_frame_compile_time_s") < html.index("graph_op_count")


@pytest.mark.asyncio
async def test_compile_page_says_why_it_recompiled(ds, traces_db):
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "recompiles")
    compile_row = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = '0/1'", (run,)).fetchone()[0]
    html = (await ds.client.get(f"/traces/-/tlindex/compile/{compile_row}")).text
    assert "Why it recompiled" in html and "size mismatch at index 0. expected 4, actual 8" in html


@pytest.mark.asyncio
async def test_compile_page_sets_its_collectives_beside_the_other_ranks(ds, traces_db):
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "collectives_3ranks")
    ids = dict(conn.execute("SELECT rank, id FROM compiles WHERE run_id = ? AND compile_id = '0/0'", (run,)).fetchall())
    html = (await ds.client.get(f"/traces/-/tlindex/compile/{ids[1]}")).text
    ranks = html.split('class="rows-and-columns collective-ranks"', 1)[1].split("</table>", 1)[0]
    # rank 1 scheduled one all_reduce more than ranks 0 and 2 (tests/data/README.md): theirs is one row, one schedule
    assert re.findall(r'compile/(\d+)">(ranks? [\d, ]+)</a></td><td>([^<]+)</td><td class="(\w+)"', ranks) == [
        (str(ids[0]), "ranks 0, 2", "all_reduce wait", "differs")]
    table = html.split('class="rows-and-columns collectives"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<tr class="(\w+)"><td>\d+</td><td><code title="([^"]+)">', table) == [
        ("same", f"torch.ops._c10d_functional.{op}.default")
        for op in ("all_reduce_", "wait_tensor", "all_reduce_", "wait_tensor")]
    html = (await ds.client.get(f"/traces/-/tlindex/compile/{ids[2]}")).text
    assert "differs from here</td>" in html and "same as here</td>" in html  # rank 0 same, rank 1 not


def _provenance_links(html: str) -> dict:
    import json

    return json.loads(html.split('<script type="application/json" id="provenance-links">', 1)[1].split("</script>")[0])


def _pane_lines(html: str, pane: str) -> dict[int, str]:
    import html as html_lib

    section = html.split(f'data-pane="{pane}"', 1)[1].split("</section>", 1)[0]
    return {int(n): html_lib.unescape(text) for n, text in
            re.findall(r'<span id="' + pane + r'-(\d+)" class="pl[^"]*" data-line="\d+"><span class="ln">\d+</span>(.*?)</span>',
                       section, re.S)}


@pytest.mark.asyncio
async def test_provenance_links_follow_the_logged_node_mappings(ds, traces_db):
    import json

    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "provenance")
    (compile_row, artifact) = conn.execute(
        "SELECT c.id, a.id FROM compiles c JOIN artifacts a ON a.compile = c.id WHERE c.run_id = ? "
        "AND c.compile_id = '0/0' AND a.name = 'inductor_provenance_tracking_node_mappings'", (run,)).fetchone()
    # the mapping, read from the log itself
    (log,) = scenario_logs("provenance")
    lines = log.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"inductor_provenance_tracking_node_mappings"' in line)
    mapping = json.loads(lines[at + 1][1:])
    html = (await ds.client.get(f"/traces/-/tlindex/provenance/{artifact}")).text
    links = _provenance_links(html)
    pre, post, code = (_pane_lines(html, pane) for pane in ("pre", "post", "code"))
    node = lambda text: re.split(r"[=:]", text.strip(), maxsplit=1)[0].strip()  # noqa: E731
    assert {node(pre[int(n)]) for n in links["pre"]} == set(mapping["preToPost"])
    for n, linked in links["pre"].items():
        assert {node(post[m]) for m in linked["post"]} == set(mapping["preToPost"][node(pre[int(n)])])
    for n, linked in links["post"].items():
        assert {node(pre[m]) for m in linked["pre"]} == set(mapping["postToPre"][node(post[int(n)])])
        kernels = {k.rsplit(":", 1)[0] for k in mapping["postToCppCode"].get(node(post[int(n)]), [])}
        assert all(any(k + "(" in code[m] for k in kernels) for m in linked.get("code", []))
        assert bool(linked.get("code")) == bool(kernels)
    # every kernel of the mapping is found once, on a line that calls it
    assert len(links["code"]) == len(mapping["cppCodeToPost"])
    assert "class &lt;lambda&gt;(torch.nn.Module)" in html and "class <lambda>" not in html
    compile_html = (await ds.client.get(f"/traces/-/tlindex/compile/{compile_row}")).text
    assert f'href="/traces/-/tlindex/provenance/{artifact}"' in compile_html
    artifact_html = (await ds.client.get(f"/traces/-/tlindex/artifact/{artifact}")).text
    assert f'href="/traces/-/tlindex/provenance/{artifact}"' in artifact_html
    # the kernel stack traces, readable: each kernel, then its traces with their line breaks
    at = next(i for i, line in enumerate(lines) if '"inductor_provenance_tracking_kernel_stack_traces"' in line)
    traces = json.loads(lines[at + 1][1:])
    (stacks,) = conn.execute("SELECT id FROM artifacts WHERE compile = ? AND name = "
                             "'inductor_provenance_tracking_kernel_stack_traces'", (compile_row,)).fetchone()
    stacks_html = (await ds.client.get(f"/traces/-/tlindex/artifact/{stacks}")).text
    import html as html_lib
    shown = re.findall(r'<h3><code>([^<]+)</code></h3>((?:<pre class="reason">.*?</pre>)+)', stacks_html, re.S)
    assert [(kernel, [html_lib.unescape(t) for t in re.findall(r'<pre class="reason">(.*?)</pre>', pres, re.S)])
            for kernel, pres in shown] == list(traces.items())
    (other, other_artifact) = conn.execute("SELECT compile, id FROM artifacts WHERE compile IN (SELECT id FROM "
                                           "compiles WHERE run_id = ?) LIMIT 1", scenario_run(conn, "train_step")).fetchone()
    assert (await ds.client.get(f"/traces/-/tlindex/provenance/{other_artifact}")).status_code == 404
    assert "tlindex/answers/provenance/" not in (await ds.client.get(f"/traces/-/tlindex/compile/{other}")).text


@pytest.mark.asyncio
async def test_artifact_page_highlights_code_with_line_anchors(ds, traces_db):
    conn = fixture_conn(traces_db)
    artifact = conn.execute("SELECT id FROM artifacts WHERE kind = 'inductor_output_code' LIMIT 1").fetchone()[0]
    html = (await ds.client.get(f"/traces/-/tlindex/artifact/{artifact}")).text
    assert 'class="highlight"' in html and 'id="L-1"' in html and "python" in html
    assert '<span class="k">def</span>' in html or '<span class="kn">import</span>' in html
    json_artifact = conn.execute("SELECT id FROM artifacts WHERE name = 'torch_version' LIMIT 1").fetchone()[0]
    html = (await ds.client.get(f"/traces/-/tlindex/artifact/{json_artifact}")).text
    assert "json" in html and "pytorch_version" in html


@pytest.mark.asyncio
async def test_canned_queries_run_from_the_ui(ds, traces_db):
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "recompiles")
    response = await ds.client.get(f"/traces/recompile_reasons.json?run={run}&_shape=array")
    assert response.status_code == 200
    guards = {r["failed_guard"].split("#")[0].strip() for r in response.json()}
    assert "tensor 'x' size mismatch at index 0. expected 4, actual 8" in guards
    page = await ds.client.get("/traces/log_volume?by=compile&limit=1")
    assert page.status_code == 200 and "Log volume" in page.text
    assert (await ds.client.get("/other/recompile_reasons")).status_code == 404
    from tlindex.answers.queries import QUERY_NEEDS, load_queries

    run_page = (await ds.client.get(f"/traces/-/tlindex/run/{run}")).text
    for name, query in load_queries().items():  # every one that takes a run, but those that cannot apply here
        listed = any(p == "run" for p, _ in query.params) and name not in QUERY_NEEDS  # (one process, no vLLM…)
        assert (f'href="/traces/{name}?run={run}"' in run_page) == listed, name
    (ranked,) = scenario_run(conn, "collectives_3ranks")  # a run they apply to lists them
    ranked_page = (await ds.client.get(f"/traces/-/tlindex/run/{ranked}")).text
    assert all(f'href="/traces/{name}?run={ranked}"' in ranked_page for name in ("collectives", "rank_divergence"))


@pytest.mark.asyncio
async def test_cells_link_to_tlindex_pages(ds):
    html = (await ds.client.get("/traces/envelopes?_size=50&compile__notblank=1")).text
    assert "/traces/-/tlindex/compile/" in html and "/traces/-/tlindex/payload/" in html
    html = (await ds.client.get("/traces/compiles?_size=5")).text
    assert "/traces/-/tlindex/run/" in html
    other = (await ds.client.get("/other/compiles")).text
    assert "/-/tlindex/" not in other


@pytest.mark.asyncio
async def test_menus_link_to_the_runs(ds):
    html = (await ds.client.get("/traces")).text
    assert "/traces/-/tlindex" in html
    assert "/other/-/tlindex" not in (await ds.client.get("/other")).text


@pytest.mark.asyncio
async def test_a_payload_with_script_is_escaped(tmp_path):
    log = write_hostile_log(tmp_path / "dedicated_log_torch_trace_evil.log")  # HAND-MADE, hostile HTML
    db_path = tmp_path / "evil.db"
    ingest(db_path, [str(log)], jobs=1)
    datasette = Datasette([str(db_path)])
    await datasette.invoke_startup()
    for path in ["/evil/-/tlindex/artifact/1", "/evil/-/tlindex/compile/1", "/evil/-/tlindex/trie/1",
                 "/evil/-/tlindex/run/1", "/evil/artifacts"]:
        html = (await datasette.client.get(path)).text
        assert "<script>alert" not in html and "<script>f</script>" not in html and "<b>evil" not in html, path
        assert "<img src=x" not in html, path
    html = (await datasette.client.get("/evil/-/tlindex/artifact/1")).text
    assert "&lt;script&gt;" in html


@pytest.mark.asyncio
async def test_link_records_and_subgraphs_show_on_the_compile_page(tmp_path):
    # HAND-MADE log (not written by torch): two link records, one with a javascript: url, and
    # artifacts of two regional-inductor subgraphs (envelope key subgraph_name).
    ids = b'"frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    lines = [b'V1122 09:00:00.000000 7 torch/_dynamo/convert_frame.py:1] {"dynamo_start": {"stack": []}, ' + ids + b'}',
             b'V1122 09:00:00.100000 7 torch/x.py:1] {"link": {"name": "manifold_url", "url": '
             b'"https://example.com/trace?a=1&b=\\"2\\""}, ' + ids + b'}',
             b'V1122 09:00:00.200000 7 torch/x.py:1] {"link": {"name": "evil", "url": "javascript:alert(1)"}, '
             + ids + b'}',
             b'V1122 09:00:00.300000 7 torch/x.py:1] {"artifact": {"name": "a1", "encoding": "string"}, '
             b'"subgraph_name": "<i>sub_0</i>", ' + ids + b'}',
             b'V1122 09:00:00.400000 7 torch/x.py:1] {"artifact": {"name": "a2", "encoding": "string"}, '
             b'"subgraph_name": "sub_1", ' + ids + b'}']
    log = tmp_path / "dedicated_log_torch_trace_links.log"
    log.write_bytes(b"\n".join(lines) + b"\n")
    db_path = tmp_path / "links.db"
    ingest(db_path, [str(log)], jobs=1)
    datasette = Datasette([str(db_path)])
    html = (await datasette.client.get("/links/-/tlindex/compile/1")).text
    assert '<a href="https://example.com/trace?a=1&amp;b=&#34;2&#34;" rel="noopener noreferrer">manifold_url</a>' in html
    assert 'href="javascript' not in html and "evil <i>(link: javascript:alert(1))</i>" in html
    assert "subgraph <code>&lt;i&gt;sub_0&lt;/i&gt;</code>" in html and "subgraph <code>sub_1</code>" in html
    assert html.index("sub_0") < html.index(">a1 <i>") < html.index("sub_1") < html.index(">a2 <i>")


@pytest.mark.asyncio
async def test_records_without_compile_id_are_the_compile_minus_minus(ds, traces_db):
    """The export fixture's failing export: in the trie beside the stacks, with its own compile page."""
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "export")
    (row, status) = conn.execute("SELECT id, status FROM compiles WHERE run_id = ? AND compile_id = '-/-'",
                                 (run,)).fetchone()
    assert status == "error"
    trie = (await ds.client.get(f"/traces/-/tlindex/trie/{run}")).text
    assert f'<a class="compile status-error" href="/traces/-/tlindex/compile/{row}"' in trie
    page = (await ds.client.get(f"/traces/-/tlindex/compile/{row}")).text
    assert "records without a compile id" in page and "ConstraintViolationError" in page
    assert conn.execute("SELECT count(*) FROM envelopes e JOIN sources s ON s.id = e.source_id WHERE s.run_id = ? "
                        "AND e.compile IS NULL AND e.kind != 'str'", (run,)).fetchone()[0] == 0


def entry_html(page: str) -> str:
    """The tlindex entry of a home or database page: in the HTML (1.0a), or in the script that puts it there (0.65)."""
    import json

    script = re.search(r'd\.innerHTML=("(?:[^"\\]|\\.)*")', page)
    if script:
        return json.loads(script.group(1))
    found = re.search(r'<div class="tlindex-home">.*?</div>', page, re.S)
    return found.group(0) if found else ""


@pytest.mark.asyncio
async def test_home_and_database_pages_lead_to_the_tlindex_runs(ds, traces_db):
    """Datasette 1.0a renders the entry (top_homepage, top_database); 0.65 gets it from a script: the runs and
    findings, the trend, the graph breaks and the search, with the number of runs."""
    runs = fixture_conn(traces_db).execute("SELECT count(*) FROM runs").fetchone()[0]
    for path in ["/", "/traces"]:
        entry = entry_html((await ds.client.get(path)).text)
        assert '<a class="tlindex-runs" href="/traces/-/tlindex">runs and findings</a>' in entry, path
        assert 'href="/traces/-/tlindex/trend"' in entry and 'href="/traces/-/tlindex/graph-breaks"' in entry
        assert 'href="/traces/-/tlindex/search"' in entry and f"<strong>traces</strong>, {runs} runs:" in entry
    other = (await ds.client.get("/other")).text  # a database that is not tlindex's: no entry
    assert entry_html(other) == "" and "tlindex-entry" not in other


@pytest.mark.asyncio
async def test_the_home_page_link_names_an_odd_database_escaped(traces_db, tmp_path):
    """A database file named x<b>&y.db: its name is text on the home page, and its link is Datasette's encoding."""
    import shutil

    odd = tmp_path / "x<b>&y.db"
    shutil.copy(traces_db, odd)
    datasette = Datasette([str(odd)])
    await datasette.invoke_startup()
    page = (await datasette.client.get("/")).text
    entry = entry_html(page)
    assert "<strong>x&lt;b&gt;&amp;y</strong>" in entry and 'href="/x~3Cb~3E~26y/-/tlindex"' in entry
    assert "x<b>" not in page and "x<b>" not in entry
    assert (await datasette.client.get("/x~3Cb~3E~26y/-/tlindex")).status_code == 200


@pytest.mark.asyncio
async def test_an_export_run_gives_tlparse_s_verdict_and_links_the_exported_program(ds, traces_db):
    conn = fixture_conn(traces_db)
    (draft,) = scenario_run(conn, "draft_export")
    html = (await ds.client.get(f"/traces/-/tlindex/run/{draft}")).text
    issues = len([r for r in conn.execute("SELECT 1 FROM envelopes e JOIN sources s ON s.id = e.source_id WHERE "
                                          "s.run_id = ? AND (e.kind IN ('propagate_real_tensors_provenance', "
                                          "'missing_fake_kernel', 'mismatched_fake_kernel') OR (e.kind = "
                                          "'guard_added' AND json_extract(e.metadata, '$.prefix') = 'eval'))",
                                          (draft,))])
    assert issues > 0 and f"<b>{issues} issues</b> found during export" in html
    (program,) = conn.execute("SELECT a.id FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id JOIN sources s "
                              "ON s.id = e.source_id WHERE s.run_id = ? AND a.kind = 'exported_program'",
                              (draft,)).fetchone()
    assert f'href="/traces/-/tlindex/artifact/{program}">exported_program</a>' in html
    assert "No torch.compile compilation in this run. It holds" in html  # draft_export compiles nothing


@pytest.mark.asyncio
async def test_a_huge_failure_is_shown_once_folded_and_the_page_stays_small(tmp_path):
    # HAND-MADE from the real compile_errors log: one compilation_metrics' fail_reason blown up to
    # 226 KB (a real failure message can be that long); the rest of the log is as torch wrote it.
    import json as json_lib

    (real,) = scenario_logs("compile_errors")
    lines = real.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'{"compilation_metrics"' in line and b'"fail_type": "Unsupported"' in line)
    prefix, body = lines[at].split(b"] ", 1)
    data = json_lib.loads(body)
    reason = "".join(f"line {n}: torch._dynamo.exc.Unsupported: {'x' * 70}\n" for n in range(2500))
    data["compilation_metrics"]["fail_reason"] = reason
    lines[at] = prefix + b"] " + json_lib.dumps(data).encode()
    log = tmp_path / "big_error.log"
    log.write_bytes(b"\n".join(lines))
    db_path = tmp_path / "big.db"
    ingest(db_path, [str(log)], jobs=1)
    (row,) = connect(db_path).execute("SELECT id FROM compiles WHERE length(fail_reason) > 200000").fetchone()
    datasette = Datasette([str(db_path)])
    response = await datasette.client.get(f"/big/-/tlindex/compile/{row}")
    assert response.status_code == 200 and len(response.content) < 200_000
    html = response.text
    assert len(reason) > 226_000 and html.count("line 0: torch._dynamo.exc.Unsupported") == 1
    assert "more lines" in html and "bytes left out of this page" in html and "fail_reason" in html


@pytest.mark.asyncio
async def test_the_artifact_page_counts_the_lines_it_shows(ds, traces_db):
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "train_step")
    artifacts = conn.execute("SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id = ? "
                             "AND a.payload IS NOT NULL", (run,)).fetchall()
    assert len(artifacts) > 5
    for (artifact,) in artifacts:
        html = (await ds.client.get(f"/traces/-/tlindex/artifact/{artifact}")).text
        (said,) = re.findall(r"· ([\d,]+) lines ·", html)
        anchors = set(re.findall(r'id="L-(\d+)"', html))
        assert int(said.replace(",", "")) == len(anchors), artifact


@pytest.mark.asyncio
async def test_the_compile_page_sums_up_its_metrics_as_tlparse_does(ds, traces_db):
    conn = fixture_conn(traces_db)
    row, seconds, ops, start, origin = conn.execute(
        "SELECT m.compile, m.entire_frame_compile_time_s, m.graph_op_count, m.start_time, g.origin FROM metrics m "
        "JOIN guards g ON g.compile = m.compile WHERE m.kind = 'compilation_metrics' AND "
        "m.entire_frame_compile_time_s IS NOT NULL AND g.origin IN ('symbolic_shape_specialization', "
        "'guard_added_fast') LIMIT 1").fetchone()
    html = (await ds.client.get(f"/traces/-/tlindex/compile/{row}")).text
    summary = html.split("<h2>Compilation metrics")[1].split("</table>")[0]
    assert f"<th>entire_frame_compile_time_s</th><td>{seconds:.3f} s</td>" in summary
    assert f"<th>graph_op_count</th><td>{ops}</td>" in summary
    from datetime import datetime, timezone
    assert datetime.fromtimestamp(start, timezone.utc).isoformat(timespec="milliseconds") in summary
    heading = {"symbolic_shape_specialization": "Symbolic shape specializations",
               "guard_added_fast": "Guards added fast"}[origin]
    assert f"{heading} <span" in html and "All fields of compilation_metrics" in html


@pytest.mark.asyncio
async def test_each_failing_compile_of_the_compile_errors_fixture_shows_its_failure_once(ds, traces_db):
    conn = fixture_conn(traces_db)
    (run,) = scenario_run(conn, "compile_errors")
    failing = conn.execute("SELECT id, fail_reason FROM compiles WHERE run_id = ? AND fail_type IS NOT NULL",
                           (run,)).fetchall()
    assert len(failing) >= 3
    import html as html_lib

    for row, reason in failing:
        response = await ds.client.get(f"/traces/-/tlindex/compile/{row}")
        shown = re.sub(r'<details class="fold traceback">.*?</details>', "", response.text, flags=re.S)
        first_line = reason.split("\n")[0]
        assert len(response.content) < 200_000 and html_lib.unescape(shown).count(first_line) == 1, row


@pytest.mark.asyncio
async def test_the_database_page_starts_with_the_data_not_the_migrations(ds):
    """_tlindex_migrations is bookkeeping: hidden, so it is neither listed first nor in the SQL box."""
    data = (await ds.client.get("/traces.json")).json()
    tables = {t["name"]: t["hidden"] for t in data["tables"]}
    assert tables["_tlindex_migrations"] is True and tables["compiles"] is False
    page = (await ds.client.get("/traces")).text
    assert "select * from _tlindex_migrations" not in page.lower()
