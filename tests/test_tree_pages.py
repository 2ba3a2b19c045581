"""The tree page (runs → compiles → artifacts, with a filter) and the artifact diff (any two artifacts side by side),
on the real fixtures: what the database holds is what the tree lists, the filter narrows, two picked artifacts
are compared, a big database is listed up to a budget that says what it leaves out, and hostile names are escaped."""

from __future__ import annotations

import html as htmllib
import re

import pytest
import pytest_asyncio
from conftest import connect, ingest, scenario_run, write_hostile_log, write_report
from datasette.app import Datasette
from test_diff import break_added_runs

from tlindex.pages import artifact_diff as artifact_diff_module
from tlindex.pages import tree as tree_module

TREE = "/traces/-/tlindex/tree"
DIFF = "/traces/-/tlindex/artifact-diff"


@pytest_asyncio.fixture
async def ds(traces_db):
    datasette = Datasette([str(traces_db)])
    await datasette.invoke_startup()
    return datasette


def text_of(html: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", html))


def listed(twin: dict) -> tuple[set[int], set[int]]:
    """The compiles and artifacts a tree's data lists."""
    compiles = {c["id"] for r in twin["runs"] for c in r["compiles"]}
    return compiles, {a["id"] for r in twin["runs"] for c in r["compiles"] for a in c["artifacts"]}


@pytest.mark.asyncio
async def test_the_tree_lists_exactly_the_runs_compiles_and_artifacts_the_database_holds(ds, traces_db):
    conn = connect(traces_db)
    twin = (await ds.client.get(TREE + ".json")).json()
    compiles, artifacts = listed(twin)
    assert [r["id"] for r in twin["runs"]] == [row[0] for row in conn.execute(
        "SELECT id FROM runs ORDER BY start_time, id")]
    assert compiles == {row[0] for row in conn.execute("SELECT id FROM compiles WHERE run_id IS NOT NULL")}
    assert artifacts == {row[0] for row in conn.execute(
        "SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id IS NOT NULL")}
    assert twin["complete"] and twin["kept"] == {"runs": len(twin["runs"]), **twin["listed"]}
    for run in twin["runs"]:  # each compile under its own run, each artifact under its own compile
        for compile in run["compiles"]:
            assert conn.execute("SELECT run_id FROM compiles WHERE id = ?", (compile["id"],)).fetchone()[0] == run["id"]
            assert {a["id"] for a in compile["artifacts"]} == {row[0] for row in conn.execute(
                "SELECT id FROM artifacts WHERE compile = ?", (compile["id"],))}
    page = (await ds.client.get(TREE)).text
    for artifact in list(artifacts)[:200]:
        assert f'href="/traces/-/tlindex/artifact/{artifact}"' in page
    (ddp,) = scenario_run(conn, "ddp_2ranks")  # compiles named as torch names them, with their rank where several
    ranked = next(r for r in twin["runs"] if r["id"] == ddp)
    assert ranked["ranked"] and ranked["compiles"][0]["rank"] == 0
    assert re.search(r'class="compile status-\w+" href="/traces/-/tlindex/compile/\d+">\[0/0\] rank 1</a>', page)


@pytest.mark.asyncio
async def test_the_filter_narrows_the_tree_to_the_paths_holding_every_word(ds, traces_db):
    conn = connect(traces_db)
    twin = (await ds.client.get(TREE + ".json?q=inductor_output_code")).json()
    _, artifacts = listed(twin)
    assert artifacts == {row[0] for row in conn.execute(
        "SELECT id FROM artifacts WHERE name LIKE '%inductor_output_code%' OR kind LIKE '%inductor_output_code%'")}
    assert 0 < len(artifacts) < conn.execute("SELECT count(*) FROM artifacts").fetchone()[0]
    # two words: output code of the compiles named [0/1] only
    narrower = (await ds.client.get(TREE + ".json?q=%5B0%2F1%5D+OUTPUT_code")).json()
    compiles, kept = listed(narrower)
    assert kept and kept < artifacts
    assert {row[0] for row in conn.execute(
        f"SELECT compile_id FROM compiles WHERE id IN ({','.join(map(str, compiles))})")} == {"0/1"}
    # a run's label keeps that run whole
    (recompiles,) = scenario_run(conn, "recompiles")
    label = conn.execute("SELECT label FROM runs WHERE id = ?", (recompiles,)).fetchone()[0]
    whole = (await ds.client.get(TREE + ".json", params={"q": label})).json()
    assert [r["id"] for r in whole["runs"]] == [recompiles]
    assert listed(whole)[0] == {row[0] for row in conn.execute("SELECT id FROM compiles WHERE run_id = ?",
                                                                (recompiles,))}
    page = (await ds.client.get(TREE + "?q=nothing-has-this")).text
    assert "Nothing matches the filter." in page and 'value="nothing-has-this"' in page


@pytest.mark.asyncio
async def test_the_filter_box_reads_the_texts_the_server_filters_on(ds, traces_db):
    """The box filters in the browser on each node's data-t, the same texts the server's ?q= reads: the run's,
    the compile's and the artifact's, whose path is what a word must be in."""
    twin = (await ds.client.get(TREE + ".json")).json()
    page = (await ds.client.get(TREE)).text
    run, compile = twin["runs"][0], twin["runs"][0]["compiles"][0]
    assert f'<li class="tl-run" data-t="{htmllib.escape(run["text"])}" data-open="1">' in page
    assert f'<li class="tl-compile" data-t="{htmllib.escape(compile["text"])}" data-open=' in page
    assert f'<li class="tl-artifact" data-t="{htmllib.escape(compile["artifacts"][0]["text"])}">' in page
    assert 'input class="tl-tree-q" type="search" name="q"' in page and 'form="tl-tree-filter"' in page


@pytest.mark.asyncio
async def test_a_big_database_is_listed_up_to_a_budget_that_says_what_it_leaves_out(ds, traces_db, monkeypatch):
    conn = connect(traces_db)
    monkeypatch.setattr(tree_module, "COMPILES_SHOWN", 20)
    monkeypatch.setattr(tree_module, "ARTIFACTS_SHOWN", 50)
    twin = (await ds.client.get(TREE + ".json")).json()
    total = {"compiles": conn.execute("SELECT count(*) FROM compiles WHERE run_id IS NOT NULL AND compile_id != '-/-' "
                                      "AND status != 'none'").fetchone()[0],  # as run_health counts them
             "artifacts": conn.execute("SELECT count(*) FROM artifacts").fetchone()[0]}
    assert twin["listed"] == {"compiles": 20, "artifacts": 50} and not twin["complete"]
    assert {k: twin["kept"][k] for k in total} == total  # counted, though not listed
    hidden = {"compiles": sum(r["compiles_hidden"] for r in twin["runs"]),
              "artifacts": sum(c["artifacts_hidden"] for r in twin["runs"] for c in r["compiles"])}
    assert hidden["compiles"] == total["compiles"] - 20
    # what a listed compile does not list is counted under it; a compile not listed takes its artifacts with it
    assert hidden["artifacts"] == sum(c["artifact_count"] for r in twin["runs"] for c in r["compiles"]) - 50
    page = (await ds.client.get(TREE)).text
    assert f"This page lists 20 of the {total['compiles']} compiles and 50 of the {total['artifacts']:,} artifacts" \
        in text_of(page)
    assert "more compiles not listed here" in page and "more artifacts not listed here" in page


@pytest.mark.asyncio
async def test_the_runs_and_run_pages_lead_to_the_tree(ds, traces_db):
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "graph_breaks")
    assert f'href="{TREE}"' in (await ds.client.get("/traces/-/tlindex")).text
    page = (await ds.client.get(f"/traces/-/tlindex/run/{run}")).text
    assert f'href="{TREE}?run={run}"' in page
    twin = (await ds.client.get(f"{TREE}.json?run={run}")).json()
    assert [r["id"] for r in twin["runs"]] == [run]


def body_graphs(conn) -> tuple[int, int]:
    """The dynamo_output_graph of `body` in the break_added run without the break (A) and with it (B)."""
    plain, breaking = break_added_runs(conn)
    return tuple(conn.execute(
        "SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id = ? AND c.co_name = 'body' "
        "AND a.kind = 'dynamo_output_graph'", (run,)).fetchone()[0] for run in (plain, breaking))


@pytest.mark.asyncio
async def test_two_artifacts_of_two_runs_side_by_side_show_the_line_that_differs(ds, traces_db):
    conn = connect(traces_db)
    a, b = body_graphs(conn)
    html = (await ds.client.get(f"{DIFF}?a={a}&b={b}")).text
    after_break = "return (y * y).sum() + y"  # traced in A, cut off by the break in B
    a_cells = [text_of(cell) for cell in re.findall(
        r'<tr class="(?:delete|replace)">.*?<td class="a">(.*?)</td>', html, re.S)]
    assert any(after_break in cell for cell in a_cells)
    assert after_break not in text_of("".join(re.findall(r'<td class="b">(.*?)</td>', html, re.S)))
    assert '<span class="k">return</span>' in html  # highlighted
    assert f'href="/traces/-/tlindex/artifact/{a}"' in html and f'href="/traces/-/tlindex/artifact/{b}"' in html
    twin = (await ds.client.get(f"{DIFF}.json?a={a}&b={b}")).json()
    assert twin["changed"] > 0 and twin["artifact_a"]["id"] == a and twin["artifact_b"]["id"] == b and not twin["same_payload"]
    same = (await ds.client.get(f"{DIFF}?a={a}&b={a}")).text
    assert "nothing differs" in same and 'class="sidebyside' not in same


@pytest.mark.asyncio
async def test_pick_two_on_the_tree_or_from_an_artifact_page(ds, traces_db):
    conn = connect(traces_db)
    a, b = body_graphs(conn)
    tree = (await ds.client.get(TREE)).text
    form = re.search(r'<form id="tl-pick" action="([^"]+)" method="get">', tree)
    assert form and form.group(1) == DIFF
    for artifact in (a, b):  # a box for each, in that form
        assert f'<input class="tl-pick" type="checkbox" name="artifact" value="{artifact}" form="tl-pick"' in tree
    ticked = await ds.client.get(f"{DIFF}?artifact={a}&artifact={b}")
    assert ticked.status_code == 200 and (await ds.client.get(f"{DIFF}.json?artifact={a}&artifact={b}")).json()[
        "changed"] > 0
    assert (await ds.client.get(f"{DIFF}?artifact={a}")).status_code == 400  # one ticked: say to pick two
    # the artifact page's "Diff with…" carries it to the tree as A, filtered on its name; one more tick diffs
    page = (await ds.client.get(f"/traces/-/tlindex/artifact/{a}")).text
    carried = page.split('<form class="tl-diff-with"')[1].split("</form>")[0]
    assert f'action="{TREE}"' in carried and f'name="a" value="{a}"' in carried
    assert 'name="q" value="dynamo_output_graph"' in carried
    picked = (await ds.client.get(f"{TREE}?a={a}&q=dynamo_output_graph")).text
    assert '<b class="tl-a">A</b>' in picked and f'value="{a}" form="tl-pick"' not in picked
    assert f'<input type="hidden" name="a" value="{a}">' in picked.split('<form id="tl-pick"')[1].split("</form>")[0]
    assert f'value="{b}" form="tl-pick"' in picked
    answer = (await ds.client.get(f"{DIFF}.json?a={a}&artifact={b}")).json()
    assert (answer["artifact_a"]["id"], answer["artifact_b"]["id"]) == (a, b)
    assert (await ds.client.get(f"{TREE}?a=999999999")).status_code == 404


@pytest.mark.asyncio
async def test_a_huge_payload_is_compared_in_part_and_the_page_says_so(ds, traces_db, monkeypatch):
    conn = connect(traces_db)
    a, b = conn.execute("SELECT a.id FROM artifacts a WHERE a.kind = 'inductor_output_code' ORDER BY a.size DESC "
                        "LIMIT 2").fetchall()
    monkeypatch.setattr(artifact_diff_module, "DIFF_LINES", 40)
    twin = (await ds.client.get(f"{DIFF}.json?a={a[0]}&b={b[0]}")).json()
    assert twin["artifact_a"]["cut"] == "the first 40 lines" and twin["artifact_a"]["lines"] == 40
    assert max(row["a_no"] or 0 for hunk in twin["hunks"] for row in hunk) <= 40
    monkeypatch.setattr(artifact_diff_module, "DIFF_CHARS", 300)
    html = (await ds.client.get(f"{DIFF}?a={a[0]}&b={b[0]}")).text
    assert "the first 300 characters" in html and "<b>cut</b>" in html


@pytest.mark.asyncio
async def test_counter_names_masked_on_request(ds, traces_db):
    """`finish` compiled the same in two runs, one compile later in the second: only its AOT id differs."""
    conn = connect(traces_db)
    a, b = [conn.execute("SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id = ? "
                         "AND c.co_name = 'finish' AND a.kind = 'inductor_output_code'", (run,)).fetchone()[0]
            for run in scenario_run(conn, "inductor_break_added")]
    logged = (await ds.client.get(f"{DIFF}.json?a={a}&b={b}")).json()
    (row,) = [row for hunk in logged["hunks"] for row in hunk if row["tag"] != "equal"]
    assert "AOT ID" in row["a"] and row["a"] != row["b"]
    masked = await ds.client.get(f"{DIFF}?a={a}&b={b}&mask=1")
    assert "Nothing differs once counter-derived names are masked." in masked.text
    assert f'href="{DIFF}?a={a}&amp;b={b}"' in masked.text  # and back to the text as logged


@pytest.mark.asyncio
async def test_hostile_names_and_payloads_are_escaped_on_the_tree_and_the_diff(tmp_path):
    # HAND-MADE logs (not written by torch): artifacts whose names and payloads are hostile HTML.
    path = write_hostile_log(tmp_path / "evil" / "dedicated_log_torch_trace_evil.log")
    db_path = tmp_path / "evil.db"
    ingest(db_path, [str(path)], jobs=1)
    conn = connect(db_path)
    ids = [row[0] for row in conn.execute("SELECT id FROM artifacts ORDER BY id")]
    datasette = Datasette([str(db_path)])
    await datasette.invoke_startup()
    for url in ["/evil/-/tlindex/tree", "/evil/-/tlindex/tree?q=%3Cscript%3E",
                f"/evil/-/tlindex/tree?a={ids[0]}&q=%22%3E%3Cimg", f"/evil/-/tlindex/artifact-diff?a={ids[0]}&b={ids[-1]}"]:
        response = await datasette.client.get(url)
        assert response.status_code == 200, url
        assert "<script>alert" not in response.text and "<script>name" not in response.text, url
        assert "<img src=x" not in response.text and '"><img' not in response.text, url
    tree = (await datasette.client.get("/evil/-/tlindex/tree?q=%3Cscript%3E")).text
    assert "&lt;script&gt;name&lt;/script&gt;" in tree


@pytest.mark.asyncio
async def test_huge_and_repetitive_payloads_are_compared_quickly(tmp_path):
    """HAND-MADE logs (not written by torch): two 3 MB payloads, and two of 4,000 lines half of them blank (difflib's
    exact matching is cubic on such lines): each diff answers within seconds and says what it cut."""
    import time

    artifact = b'{"artifact": {"name": "big", "encoding": "string"}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    payloads = [b"\n".join(b"x = %d  # %s" % (i, b"y" * 300) for i in range(10_000)),
                b"\n".join(b"x = %d  # %s" % (i * 7, b"y" * 300) for i in range(10_000)),
                b"\n".join([b"", b"a = 1"] * 2_000), b"\n".join([b"", b"b = 1"] * 2_000)]
    path = write_hostile_log(tmp_path / "big" / "dedicated_log_torch_trace_big.log",
                             [(artifact, payload) for payload in payloads])
    db_path = tmp_path / "big.db"
    ingest(db_path, [str(path)], jobs=1)
    ids = [row[0] for row in connect(db_path).execute("SELECT id FROM artifacts WHERE name = 'big' ORDER BY id")]
    datasette = Datasette([str(db_path)])
    await datasette.invoke_startup()
    for a, b, cut in [(ids[0], ids[1], "the first 1,000,000 characters"), (ids[2], ids[3], None)]:
        started = time.monotonic()
        response = await datasette.client.get(f"/big/-/tlindex/artifact-diff.json?a={a}&b={b}")
        assert response.status_code == 200 and time.monotonic() - started < 10
        twin = response.json()
        assert twin["artifact_a"]["cut"] == cut and twin["changed"] > 0


def test_a_report_writes_each_run_s_tree_with_its_filter_box_and_no_pick_form(fixtures_db, tmp_path):
    from test_report import broken_links


    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "train_step")
    out = tmp_path / "report"
    write_report(fixtures_db, out, [run], overwrite=False)
    tree = (out / "tree.html").read_text()
    assert 'href="tree.html"' in (out / "index.html").read_text() and broken_links(out) == []
    artifacts = [row[0] for row in conn.execute(
        "SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id = ?", (run,))]
    assert len(re.findall(r'<li class="tl-artifact"', tree)) == len(artifacts)
    assert 'class="tl-tree-q"' in tree and "tlindex.js" in tree  # the box filters offline
    assert "<form" not in tree  # the server's forms are left out (with them, the pick boxes: see tlindex.css)



@pytest.mark.asyncio
async def test_an_artifact_of_no_compile_or_run_can_be_picked_first(traces_db, tmp_path):
    """Found by the odd-values sweep: `?a=` of an artifact whose compile the log did not name was a 500."""
    import shutil

    db = tmp_path / "traces.db"
    shutil.copy(traces_db, db)
    conn = connect(db)
    artifact = conn.execute("SELECT min(id) FROM artifacts").fetchone()[0]
    conn.execute("UPDATE artifacts SET compile = NULL WHERE id = ?", (artifact,))
    conn.commit()
    datasette = Datasette([str(db)])
    await datasette.invoke_startup()
    response = await datasette.client.get(f"{TREE}?a={artifact}")
    assert response.status_code == 200
    assert "no run" in text_of(response.text) and f'href="/traces/-/tlindex/artifact/{artifact}"' in response.text


@pytest.mark.asyncio
async def test_compiles_numbered_again_after_a_reset_are_told_apart(ds, traces_db):
    """compile_errors resets Dynamo between its functions: one process logs [0/0] three times."""
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "compile_errors")
    generations = [g for (g,) in conn.execute(
        "SELECT generation FROM compiles WHERE run_id = ? AND compile_id = '0/0' ORDER BY id", (run,))]
    assert len(generations) == 3 and len(set(generations)) == 3
    page = text_of((await ds.client.get(f"{TREE}?run={run}")).text)
    for generation in generations[1:]:
        assert f"after reset {generation}" in page
    assert page.count("after reset") == sum(1 for g in generations if g)
