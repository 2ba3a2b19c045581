"""The diff pages of the plugin, in process: runs picked on the runs page, the ranked diff, graphs side by side."""

from __future__ import annotations

import html as htmllib
import re

import pytest
import pytest_asyncio
from conftest import connect, ingest, write_hostile_log
from datasette.app import Datasette
from test_diff import break_added_runs


@pytest_asyncio.fixture
async def ds(traces_db):
    datasette = Datasette([str(traces_db)])
    await datasette.invoke_startup()
    return datasette


def text_of(html: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", html))


@pytest.mark.asyncio
async def test_two_runs_picked_on_the_runs_page_lead_to_their_diff(ds, traces_db):
    conn = connect(traces_db)
    runs = [row[0] for row in conn.execute("SELECT id FROM runs")]
    page = (await ds.client.get("/traces/-/tlindex")).text
    form = page.split('<form class="tlindex-diff"')[1].split("</form>")[0]
    for name in ("a", "b"):
        select = form.split(f'name="{name}"')[1].split("</select>")[0]
        assert sorted(int(v) for v in re.findall(r'value="(\d+)"', select)) == sorted(runs)
    plain, breaking = break_added_runs(conn)
    response = await ds.client.get(f"/traces/-/tlindex/diff?a={plain}&b={breaking}")
    assert response.status_code == 302 and response.headers["location"] == f"/traces/-/tlindex/diff/{plain}/{breaking}"


@pytest.mark.asyncio
async def test_the_diff_page_ranks_the_new_break_first_and_links_both_compiles(ds, traces_db):
    conn = connect(traces_db)
    plain, breaking = break_added_runs(conn)
    body = {run: conn.execute("SELECT id FROM compiles WHERE run_id = ? AND co_name = 'body'", (run,)).fetchone()[0]
            for run in (plain, breaking)}
    (resume,) = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND co_name LIKE 'torch_dynamo_resume_in_body%'",
                             (breaking,)).fetchone()
    html = (await ds.client.get(f"/traces/-/tlindex/diff/{plain}/{breaking}")).text
    changed = html.split('<table class="rows-and-columns diff-compiles">')[1].split("</table>")[0]
    rows = changed.split("<tr>")[2:]  # after the header row
    first = rows[0]
    assert f'/traces/-/tlindex/compile/{body[plain]}"' in first and f'/traces/-/tlindex/compile/{body[breaking]}"' in first
    assert "graph_breaks" in first and "torch._dynamo.graph_break()" in text_of(first)
    assert f'/traces/-/tlindex/diff/compiles/{body[plain]}/{body[breaking]}"' in first
    assert [row for row in rows if f"/compile/{resume}\"" in row and "only in B" in row]
    assert len(rows) == 2  # the changed compile and the new resume function; the rest is folded as unchanged
    unchanged = html.split("compiles matched without changes")[1].split("</table>")[0]
    for name in ("prepare", "finish"):
        assert f"<b>{name}</b>" in unchanged


@pytest.mark.asyncio
async def test_the_pair_page_shows_each_graph_side_by_side(ds, traces_db):
    conn = connect(traces_db)
    plain, breaking = break_added_runs(conn)
    a, b = (conn.execute("SELECT id FROM compiles WHERE run_id = ? AND co_name = 'body'", (run,)).fetchone()[0]
            for run in (plain, breaking))
    html = (await ds.client.get(f"/traces/-/tlindex/diff/compiles/{a}/{b}")).text
    section = html.split('<h3 id="dynamo_output_graph-1">')[1].split("</table>")[0]
    after_break = "return (y * y).sum() + y"  # traced in A, cut off by the break in B
    a_cells = [text_of(cell) for cell in re.findall(
        r'<tr class="(?:delete|replace)">.*?<td class="a">(.*?)</td>', section, re.S)]
    assert any(after_break in cell for cell in a_cells)
    assert after_break not in text_of("".join(re.findall(r'<td class="b">(.*?)</td>', section, re.S)))
    assert '<span class="k">return</span>' in section  # highlighted


@pytest.mark.asyncio
async def test_hostile_graphs_and_names_are_escaped_on_the_diff_pages(tmp_path):
    # HAND-MADE logs (not written by torch): two runs of one frame whose graphs and function name are hostile HTML.
    graph = b'{"dynamo_output_graph": {"sizes": {}}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0'
    paths = [str(write_hostile_log(tmp_path / f"run{n}" / "dedicated_log_torch_trace_evil.log", [(graph, payload)]))
             for n, payload in enumerate([b"<script>alert('a')</script>\nx = 1", b"<img src=x onerror=alert(2)>\nx = 2"])]
    db_path = tmp_path / "evil.db"
    ingest(db_path, paths, jobs=1)
    conn = connect(db_path)
    (a, b) = [row[0] for row in conn.execute("SELECT id FROM compiles WHERE compile_id = '0/0' ORDER BY id")]
    (run_a, run_b) = [row[0] for row in conn.execute("SELECT run_id FROM compiles WHERE id IN (?, ?) ORDER BY id",
                                                     (a, b))]
    datasette = Datasette([str(db_path)])
    await datasette.invoke_startup()
    pair = (await datasette.client.get(f"/evil/-/tlindex/diff/compiles/{a}/{b}")).text
    assert 'class="sidebyside' in pair and "&lt;script&gt;" in pair
    for path in [f"/evil/-/tlindex/diff/{run_a}/{run_b}", f"/evil/-/tlindex/diff/compiles/{a}/{b}", "/evil/-/tlindex"]:
        html = (await datasette.client.get(path)).text
        assert "<script>alert" not in html and "<script>f</script>" not in html and "<img src=x" not in html, path
        assert "<b>evil" not in html, path
