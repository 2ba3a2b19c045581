"""The pages in a real browser: headless Chromium (Debian's package) driven by Playwright.

Screenshots of each page land in test-artifacts/screenshots/. Without Chromium
the tests skip, except under CI (CI=true), where .ci/run installs it and a
missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import DATA, scenario_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not CHROMIUM and not os.environ.get("CI"):
    pytest.skip("Chromium is not installed (apt-get install chromium)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(traces_db):
    path = traces_db
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "datasette", "serve", str(path), "-h", "127.0.0.1",
                                "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/-/versions.json", timeout=1)
            break
        except OSError:
            if time.time() > deadline:
                process.kill()
                raise
            time.sleep(0.1)
    yield base, path
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "Chromium is missing: .ci/run installs Debian's chromium package"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        yield page
        browser.close()


def follow(page, locator) -> None:
    """Click a link and wait for the page it leads to."""
    with page.expect_navigation():
        (page.locator(locator) if isinstance(locator, str) else locator).click()


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_run_page_trie_compile_and_artifact(server, page):
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    page.goto(f"{base}/traces/-/tlindex")
    shot(page, "runs")
    follow(page, f"a[href='/traces/-/tlindex/run/{run}']")
    assert page.locator("h1").inner_text().startswith("Run ddp_4ranks_diverge")
    shot(page, "run")

    follow(page, f"a[href='/traces/-/tlindex/trie/{run}?rank=1']")
    assert "rank 1" in page.locator("h1").inner_text()
    folds = page.locator(".stack-trie details")
    assert folds.count() > 0 and folds.first.get_attribute("open") is not None  # a small trie starts open
    page.click("button.tl-expand[data-open='0']")
    assert page.locator(".stack-trie details[open]").count() == 0
    hidden = page.locator(".stack-trie details a.compile").first
    assert not hidden.is_visible()
    page.locator(".stack-trie details > summary").first.click()
    assert page.locator(".stack-trie details[open]").count() == 1
    page.click("button.tl-expand[data-open='1']")
    assert page.locator(".stack-trie details:not([open])").count() == 0
    shot(page, "trie")

    follow(page, page.locator("a.compile", has_text="[0/1]").first)
    assert "[0/1]" in page.locator("h1").inner_text()
    assert page.locator("text=Why it recompiled").count() == 1
    shot(page, "compile")

    graph = conn.execute(
        "SELECT c.id, a.name FROM compiles c JOIN artifacts a ON a.compile = c.id WHERE c.run_id = ? "
        "AND c.rank = 1 AND a.kind IN ('dynamo_output_graph', 'aot_forward_graph', 'optimize_ddp_split_graph') "
        "ORDER BY c.id LIMIT 1", (run,)).fetchone()
    page.go_back()
    follow(page, f"a.compile[href='/traces/-/tlindex/compile/{graph[0]}']")
    follow(page, page.locator("table.artifacts a", has_text=graph[1]).first)
    assert page.locator("h1").inner_text() == graph[1]
    assert page.locator(".highlight .k").count() > 0  # keywords are highlighted
    page.goto(page.url + "#L-3")
    assert page.locator("#L-3").count() == 1
    shot(page, "artifact")


def test_a_canned_query_runs_from_the_run_page(server, page):
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "recompiles")
    page.goto(f"{base}/traces/-/tlindex/run/{run}")
    follow(page, "ul.queries a[href*=\"/traces/recompile_reasons\"]")
    assert page.url.split("?")[0].endswith("/traces/recompile_reasons")
    assert "Recompile reasons" in page.content()
    cells = page.locator("table.rows-and-columns td").all_inner_texts()
    assert any("size mismatch at index 0. expected 4, actual 8" in cell for cell in cells)
    shot(page, "query")


def test_a_lazy_trie_node_loads_when_opened(server, page):
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "graph_breaks")
    page.goto(f"{base}/traces/-/tlindex/trie/{run}?max_nodes=2")
    lazy = page.locator("details.lazy").first
    before = page.locator("a.compile").count()
    lazy.locator("summary").click()
    page.wait_for_function("document.querySelectorAll('a.compile').length > %d" % before)
    assert page.locator("li.loading").count() < page.locator("details.lazy").count() + 1
    shot(page, "trie_lazy")


def test_provenance_highlights_the_lines_a_node_became(server, page):
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "provenance")
    (compile_row, artifact) = conn.execute(
        "SELECT c.id, a.id FROM compiles c JOIN artifacts a ON a.compile = c.id WHERE c.run_id = ? "
        "AND c.compile_id = '0/0' AND a.name = 'inductor_provenance_tracking_node_mappings'", (run,)).fetchone()
    page.goto(f"{base}/traces/-/tlindex/compile/{compile_row}")
    follow(page, f"a[href='/traces/-/tlindex/provenance/{artifact}']")
    gelu = page.locator("[data-pane=pre] .pl.linked", has_text="gelu:")
    gelu.hover()
    post = page.locator("[data-pane=post] .pl.hl").all_inner_texts()
    code = page.locator("[data-pane=code] .pl.hl").all_inner_texts()
    # gelu was decomposed into mul, mul, erf, add, mul after grad and fused into one C++ kernel
    assert [line.split(":")[0].split()[-1] for line in post] == ["mul_1", "mul_2", "erf", "add", "mul_3"]
    assert len(code) == 1 and "cpp_fused_gelu" in code[0]
    clicked = page.locator("[data-pane=code] .pl.linked", has_text="cpp_fused_mul_relu_sigmoid")
    clicked.scroll_into_view_if_needed()
    before = clicked.bounding_box()["y"], page.evaluate("window.scrollY")
    clicked.click()
    assert len(page.locator("[data-pane=pre] .pl.hl").all_inner_texts()) == 3  # relu, sigmoid, x_1
    # the other panes scroll to the lines; the page and the clicked line stay in place
    assert (clicked.bounding_box()["y"], page.evaluate("window.scrollY")) == before
    shot(page, "provenance")


def test_run_page_tables_sort_by_a_column(server, page):
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "graph_breaks")
    page.goto(f"{base}/traces/-/tlindex/run/{run}")
    table = page.locator("table.compiles")
    headings = table.locator("th").all_inner_texts()
    column = headings.index("bytes")
    table.locator("th", has_text="bytes").click()
    shown = [int(t.replace(",", "")) for t in table.locator(f"tbody tr td:nth-child({column + 1})").all_inner_texts()]
    assert shown == sorted(shown, reverse=True) and shown[0] > shown[-1]
    table.locator("th", has_text="bytes").click()
    shown = [int(t.replace(",", "")) for t in table.locator(f"tbody tr td:nth-child({column + 1})").all_inner_texts()]
    assert shown == sorted(shown)


def test_from_datasette_s_home_page_to_the_compile_that_emitted_the_most_bytes(server, page):
    """The home page leads to the runs (on 0.65 by the plugin's script), a run page lists its compiles."""
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "graph_breaks")
    page.goto(f"{base}/")
    entry = page.locator("p.tlindex-entry a.tlindex-runs")
    assert entry.count() == 1 and entry.first.is_visible()
    shot(page, "home")
    follow(page, entry.first)
    assert page.url.endswith("/traces/-/tlindex")
    (top,) = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id != '-/-' "
                          "ORDER BY envelope_bytes + payload_bytes DESC, id LIMIT 1", (run,)).fetchone()
    # two clicks from the home page: the runs page names each run's biggest compile
    row = page.locator("tr", has=page.locator(f"a[href='/traces/-/tlindex/run/{run}']"))
    assert row.locator(f"a.compile[href='/traces/-/tlindex/compile/{top}']").count() == 1
    follow(page, f"a[href='/traces/-/tlindex/run/{run}']")  # and two clicks to the run page
    assert page.locator(f"a.compile[href='/traces/-/tlindex/compile/{top}']").count() == 1
    # which compile emitted the most bytes: two clicks from the run page, the results above the fold
    follow(page, "text=Which compiles emitted the most log bytes?")
    links = page.locator("table.rows-and-columns tbody tr").first.locator("a[href*='/-/tlindex/compile/']")
    assert links.count() >= 1 and {links.nth(i).get_attribute("href") for i in range(links.count())} == \
        {f"/traces/-/tlindex/compile/{top}"}
    first = links.first
    assert first.bounding_box()["y"] < 1000
    shot(page, "log_volume_by_compile")
    follow(page, first)
    assert page.url.endswith(f"/traces/-/tlindex/compile/{top}")


def test_a_failing_compile_page_shows_its_failure_once(server, page):
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "compile_errors")
    for row, reason in conn.execute("SELECT id, fail_reason FROM compiles WHERE run_id = ? AND fail_type IS NOT NULL",
                                    (run,)).fetchall():
        response = page.goto(f"{base}/traces/-/tlindex/compile/{row}")
        assert len(response.body()) < 200_000
        visible = page.locator("body").inner_text()  # a closed <details> (the traceback) is not shown
        assert visible.count(reason.split("\n")[0]) == 1, row
    shot(page, "compile_failure")


def test_a_diverging_rank_is_a_finding_above_the_fold(server, page):
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    page.goto(f"{base}/traces/-/tlindex/run/{run}")
    finding = page.locator("ul.findings li.error", has_text="Ranks diverge in compile ids")
    assert finding.count() == 1 and "only on rank 1" in finding.inner_text()
    assert finding.bounding_box()["y"] + finding.bounding_box()["height"] < 1000  # seen before any scroll
    shot(page, "run_findings")
    (healthy,) = scenario_run(conn, "dynamic")
    page.goto(f"{base}/traces/-/tlindex/run/{healthy}")
    assert page.locator("p.finding.healthy").is_visible() and page.locator("ul.findings li.error").count() == 0


def test_two_runs_compared_from_the_runs_page_to_their_graphs_side_by_side(server, page):
    from test_diff import break_added_runs

    base, path = server
    conn = sqlite3.connect(path)
    plain, breaking = break_added_runs(conn)
    page.goto(f"{base}/traces/-/tlindex")
    page.select_option("form.tlindex-diff select[name=a]", str(plain))
    page.select_option("form.tlindex-diff select[name=b]", str(breaking))
    follow(page, "form.tlindex-diff button")
    assert page.url.endswith(f"/traces/-/tlindex/diff/{plain}/{breaking}")
    first = page.locator("table.diff-compiles tbody tr").first
    assert "body" in first.inner_text() and "graph_breaks" in first.inner_text()
    shot(page, "diff")
    follow(page, first.get_by_role("link", name="side by side"))
    removed = page.locator("table.sidebyside tr.delete td.a, table.sidebyside tr.replace td.a")
    assert removed.filter(has_text="return (y * y).sum() + y").count() >= 1
    shot(page, "diff_compiles")


def test_a_report_opened_from_file_urls_leads_from_trie_to_compile_to_artifact(server, page, tmp_path):
    _, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "graph_breaks")
    subprocess.run([sys.executable, "-m", "tlindex.cli", "report", "--db", str(path), "--run", str(run), "-o",
                    str(tmp_path / "report"), "--silent"], check=True)
    page.goto((tmp_path / "report" / "index.html").as_uri())
    assert page.locator("h1").inner_text().startswith("Run graph_breaks")
    assert page.locator("link[href='assets/app.css']").count() == 1
    # the local stylesheets apply: Datasette's font, not the browser's default serif
    assert "sans-serif" in page.evaluate("getComputedStyle(document.body).fontFamily")
    follow(page, "p.trie-links a")
    assert page.url.endswith("/trie.html")
    shot(page, "report_trie")
    follow(page, page.locator(".stack-trie a.compile", has_text="[0/0]").first)
    assert page.url.startswith("file://") and "/compiles/" in page.url and "[0/0]" in page.locator("h1").inner_text()
    follow(page, page.locator("table.artifacts a", has_text="dynamo_output_graph").first)
    assert "/payloads/" in page.url and page.locator(".highlight .k").count() > 0
    shot(page, "report_artifact")


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_a_report_s_payload_pages_are_coloured_in_the_browser_as_the_server_colours_them(server, page, tmp_path):
    """The report writes a payload's page with its text escaped, uncoloured; payload.js colours it offline with
    the same spans as highlight.py, lays JSON out as json.dumps(indent=2) does, and numbers the lines."""
    import json

    from conftest import connect

    from tlindex.pages.languages import language
    from tlindex.render.highlight import _shown, highlighted

    _, path = server
    conn = connect(path)  # with the functions that inflate payloads
    (run,) = scenario_run(conn, "graph_breaks")
    subprocess.run([sys.executable, "-m", "tlindex.cli", "report", "--db", str(path), "--run", str(run), "-o",
                    str(tmp_path / "report"), "--silent"], check=True)
    payloads = tmp_path / "report" / "payloads"
    digest = conn.execute("SELECT payload FROM artifacts WHERE name = 'dynamo_output_graph' AND payload IS NOT NULL "
                          "AND compile IN (SELECT id FROM compiles WHERE run_id = ?)", (run,)).fetchone()[0]
    page.goto((payloads / f"{digest}.html").as_uri() + "#L-3")
    (text,) = conn.execute("SELECT text FROM payloads WHERE hash = ?", (digest,)).fetchone()
    assert page.locator(".payload pre > span[id^='L-']").count() == page.evaluate(
        "document.querySelector('.payload-lines').textContent|0") == len(text.rstrip("\n").split("\n"))
    assert page.locator("#L-3 a.lineno").get_attribute("href") == "#L-3"

    samples = [(text, language(kind, name, encoding, text)) for text, kind, name, encoding in conn.execute(
        "SELECT p.text, a.kind, a.name, a.encoding FROM artifacts a JOIN payloads p ON p.hash = a.payload "
        "GROUP BY a.payload ORDER BY a.payload LIMIT 400")]
    assert {lang for _, lang in samples} >= {"python", "json"}
    shown = [_shown(text, lang) for text, lang in samples]
    coloured = page.evaluate("""samples => samples.map(([text, lang]) => {
        let shown = text, as = lang;
        if (lang === "json") { try { shown = window.tlindexPayload.pretty(text); } catch (e) { as = "text"; } }
        return [shown, as, window.tlindexPayload.highlighted(shown, as)];
    })""", [list(sample) for sample in samples])
    for (text, lang), (expected, expected_lang), got in zip(samples, shown, coloured):
        if expected_lang == "json" and json.loads(got[0]) == json.loads(expected) and got[0] != expected:
            continue  # a number or an escape written otherwise than json.dumps writes it: shown as logged
        assert got == [expected, expected_lang, highlighted(expected, expected_lang)], (text[:200], lang)


def test_bytecode_of_a_resume_function_from_the_trie(server, page):
    """Trie → a resume function's bytecode → the next resume function it calls, at 1400 px."""
    base, path = server
    conn = sqlite3.connect(path)
    (run,) = scenario_run(conn, "graph_breaks")
    first, second = conn.execute(
        "SELECT id FROM compiles WHERE run_id = ? AND co_name LIKE 'torch_dynamo_resume_in_two_breaks_at_%' "
        "ORDER BY id", (run,)).fetchall()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{base}/traces/-/tlindex/trie/{run}")
    follow(page, f"a.bytecode[href='/traces/-/tlindex/compile/{first[0]}/bytecode']")
    assert page.locator("h1").inner_text().startswith("Bytecode of")
    assert page.locator("table.bytecode td.role-graph").count() > 0
    assert page.locator("table.bytecode td.role-resume").count() > 0
    assert "torch._dynamo.graph_break()" in page.locator("#break-source").inner_text()
    assert page.locator(".decompiled-original .highlight").count() == 1  # checked depyf source, highlighted
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1400, f"the page is {width} px wide"
    shot(page, "bytecode")
    follow(page, "a.resume-link")
    assert page.url.endswith(f"/compile/{second[0]}/bytecode")
    page.set_viewport_size({"width": 1300, "height": 1000})


@pytest.fixture(scope="module")
def fresh_server(tmp_path_factory):
    """Datasette serving a database just ingested by the command line (no search index built)."""
    from conftest import ingest

    path = tmp_path_factory.mktemp("fresh") / "fresh.db"
    ingest(path, [str(DATA / "graph_breaks"), str(DATA / "vllm_two_models")], jobs=1)
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "datasette", "serve", str(path), "-h", "127.0.0.1",
                                "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/-/versions.json", timeout=1)
            break
        except OSError:
            if time.time() > deadline:
                process.kill()
                raise
            time.sleep(0.1)
    yield base, path
    process.terminate()
    process.wait(10)


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_a_kernel_name_searched_from_the_runs_page_of_a_fresh_database_is_found(fresh_server, page):
    """At 1400 px the runs page fits, its worst finding in view; a kernel name typed into its search box
    finds the output code that defines it (the ingest indexed the payload text: nothing else ran)."""
    import re

    base, path = fresh_server
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'payloads_fts'").fetchone()[0] == 1
    log = sorted((DATA / "vllm_two_models").iterdir())[0].read_text()
    kernel = re.search(r"^\t(cpp_fused_\w+) = async_compile", log, re.M)
    assert kernel, "the fixture's output code defines a C++ kernel"
    kernel = kernel.group(1)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{base}/fresh/-/tlindex")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    worst = page.locator("td.worst").first.bounding_box()
    assert worst and worst["x"] + worst["width"] <= 1400
    page.fill("form.tlindex-search input[name=q]", kernel)
    follow(page, "form.tlindex-search button")
    shot(page, "search-fresh-database")
    assert re.search(r"[1-9]\d* hits? for", page.locator("main, body").first.inner_text())
    hit = page.locator("ul.hits a[href*='/-/tlindex/artifact/']").first
    follow(page, hit)
    assert kernel in page.locator("body").inner_text()
    page.set_viewport_size({"width": 1300, "height": 1000})


# A number, a time or a version, as a table cell holds it: it must stay on one line.
NUMERIC_CELLS_JS = r"""() => {
  const wrapped = [];
  for (const cell of document.querySelectorAll('td, td span, dd')) {
    const text = cell.innerText.trim();
    if (!/^\(?[-+]?[\d][\d,.:+\- Tcpu]*\)?$/.test(text) || text.length < 4) continue;
    const range = document.createRange();
    range.selectNodeContents(cell);
    const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
    if (lines.size > 1) wrapped.push(text);
  }
  return wrapped;
}"""


def test_numbers_never_wrap_at_1400_px(server, page):
    """Every page a run links (runs, run, compile, vLLM) at 1400 px: no cell holding a number, a time or a
    version is on two lines (the runs page broke 4,228,717 after 4,228,71)."""
    base, path = server
    conn = sqlite3.connect(path)
    page.set_viewport_size({"width": 1400, "height": 900})
    urls = [f"{base}/traces/-/tlindex"]
    for scenario in ("vllm_restart", "ddp_4ranks_diverge", "train_step"):
        (run,) = scenario_run(conn, scenario)
        (compile_row,) = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id != '-/-' "
                                      "ORDER BY id LIMIT 1", (run,)).fetchone()
        urls += [f"{base}/traces/-/tlindex/run/{run}", f"{base}/traces/-/tlindex/compile/{compile_row}"]
    (vllm,) = scenario_run(conn, "vllm_restart")
    urls.append(f"{base}/traces/-/tlindex/run/{vllm}/vllm")
    for url in urls:
        page.goto(url)
        assert page.evaluate(NUMERIC_CELLS_JS) == [], url
    page.goto(urls[0])
    shot(page, "runs-1400")
    page.set_viewport_size({"width": 1300, "height": 1000})


def test_the_vllm_config_rows_align(server, page):
    """Each key of the vLLM config stands level with its value."""
    base, path = server
    (run,) = scenario_run(sqlite3.connect(path), "vllm_piecewise")
    page.goto(f"{base}/traces/-/tlindex/run/{run}/vllm")
    offsets = page.evaluate("""() => Array.from(document.querySelectorAll('table.vllm-config tr')).map(tr => {
        const text = el => { const r = document.createRange(); r.selectNodeContents(el);
                             return r.getClientRects()[0]; };
        const key = text(tr.querySelector('th')), value = text(tr.querySelector('td code'));
        return Math.abs((key.top + key.bottom) / 2 - (value.top + value.bottom) / 2); })""")
    assert offsets and max(offsets) < 2, offsets


def test_the_tree_filter_box_narrows_as_you_type_and_two_ticked_artifacts_diff(server, page):
    """The tree's box keeps, as you type, what the server's ?q= keeps; two ticked artifacts of two runs open their
    diff; an artifact page's "Diff with…" carries it to the tree as A."""
    from test_tree_pages import body_graphs

    base, path = server
    conn = sqlite3.connect(path)
    page.goto(f"{base}/traces/-/tlindex/tree")
    everything = page.locator("li.tl-artifact:not([hidden])").count()  # listed, in folded compiles
    assert everything == conn.execute("SELECT count(*) FROM artifacts").fetchone()[0]
    page.fill("input.tl-tree-q", "[0/1] OUTPUT_code")
    visible = {int(v) for v in page.locator("li.tl-artifact:not([hidden]) input.tl-pick").evaluate_all(
        "boxes => boxes.map(b => b.value)")}
    served = urllib.request.urlopen(f"{base}/traces/-/tlindex/tree.json?q=%5B0%2F1%5D+OUTPUT_code").read()
    import json

    assert visible == {a["id"] for r in json.loads(served)["runs"] for c in r["compiles"] for a in c["artifacts"]}
    assert 0 < len(visible) < everything and page.locator("li.tl-artifact:visible").count() == len(visible)
    assert "listed here match" in page.locator(".tl-tree-count").inner_text()
    page.fill("input.tl-tree-q", "")
    assert page.locator("li.tl-artifact:not([hidden])").count() == everything
    a, b = body_graphs(conn)
    page.fill("input.tl-tree-q", "break_added body dynamo_output_graph")  # opens the compiles it keeps
    page.check(f"input.tl-pick[value='{a}']")
    page.check(f"input.tl-pick[value='{b}']")
    follow(page, "button[form='tl-pick']")
    assert "return (y * y).sum() + y" in page.locator("table.sidebyside").inner_text()
    page.goto(f"{base}/traces/-/tlindex/artifact/{b}")
    follow(page, "form.tl-diff-with button")
    assert page.locator("b.tl-a").count() == 1 and page.locator("input.tl-tree-q").input_value() == "dynamo_output_graph"
    page.check(f"input.tl-pick[value='{a}']")
    follow(page, ".tl-picked button")
    assert page.url.endswith(f"artifact-diff?a={b}&artifact={a}")


@pytest.fixture
def team_server(tmp_path):
    """`tlindex serve --uploads` on a database of one run, and an upload token."""
    from click.testing import CliRunner
    from conftest import ingest
    from test_serve import free_port as serve_port
    from test_serve import serving

    from tlindex.cli import cli

    db = tmp_path / "team.db"
    ingest(db, [str(DATA / "recompiles")], jobs=1)
    token = CliRunner().invoke(cli, ["token", "create", "browser", "--db", str(db)]).stdout.strip().splitlines()[-1]
    with serving(db, "--uploads", "--port", str(serve_port())) as served:
        yield served.url(), db, token


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("what", ["a log", "a folder of rank logs"])
def test_a_log_or_a_folder_dropped_on_the_runs_page_becomes_a_run_whose_page_opens(team_server, page, what):
    """The runs page's form, as a colleague uses it: a file or a folder chosen (the folder packed as a tar by the
    page's script), a token pasted, Upload; the page follows the upload and lands on the new run's page."""
    url, db, token = team_server
    chosen = DATA / "ddp_2ranks" if what == "a folder of rank logs" else next((DATA / "graph_breaks").glob("*.log"))
    page.goto(url)
    page.fill("form.tlindex-upload input[name=token]", token)
    page.fill("form.tlindex-upload input[name=label]", f"posted {what}")
    field = "folder" if chosen.is_dir() else "file"
    page.set_input_files(f"form.tlindex-upload input[name={field}]", str(chosen))
    with page.expect_navigation(url="**/-/tlindex/run/*", timeout=60_000):
        page.click("form.tlindex-upload button[type=submit]")
    shot(page, f"uploaded-{field}")
    assert f"Run posted {what}" in page.locator("h1").inner_text()
    posted = page.locator("dl.facts").inner_text()
    assert f"{chosen.name}{'.tar' if chosen.is_dir() else ''}" in posted and "token browser" in posted
    assert ".uploads" not in posted  # the server's spool is no one's business
    conn = sqlite3.connect(db)
    world, sources = conn.execute("SELECT world_size, source_count FROM runs WHERE label = ?",
                                  (f"posted {what}",)).fetchone()
    ranks = len(list(chosen.glob("*.log"))) if chosen.is_dir() else 1
    assert sources == ranks and (world or 1) == ranks
    assert page.evaluate("sessionStorage.getItem('tlindex-upload-token')") == token  # for this tab, not for good


def test_the_graph_breaks_of_every_run_fit_a_1280_px_window(server, page):
    """The graph-breaks page across every run, at 1280 px: nothing is wider than the window (no sideways scroll),
    and every group's row shows."""
    base, path = server
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}/traces/-/tlindex/graph-breaks")
    rows = page.locator("table.graph-breaks tbody tr").count()
    assert rows > 3
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert page.evaluate("Math.max(...[...document.querySelectorAll('table.graph-breaks td')].map("
                         "c => c.getBoundingClientRect().right))") <= 1280
    shot(page, "graph-breaks-1280")
    page.set_viewport_size({"width": 1300, "height": 1000})
