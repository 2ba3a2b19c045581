"""The one renderer of the tlindex pages: a page's data (tlindex.pages) as HTML, for the server and the report.

The library gives each page's data; what only HTML needs is added here, per page (PRESENTERS): a
payload highlighted, a trie drawn, the side-by-side hunks highlighted, the search hits marked. Then
the page's template renders data and presentation together. The server (pages.py) and `tlindex
report` call the same `render_page`, each with its own way to render a template and its own URLs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable

from markupsafe import Markup, escape

from tlindex.answers.bytecode import COMPILED_FN, RESUME_AT, Instruction
from tlindex.answers.findings.words import short
from tlindex.answers.glossary import SECTIONS, plain, terms
from tlindex.pages import Page, hit_path
from tlindex.pages.rows import Args
from tlindex.render.highlight import highlighted, highlighted_lines, render_payload, shown_lines
from tlindex.render.trie_html import STATUS_LEGEND, TrieRenderer

TRIE_BUDGET = 2000  # nodes rendered before the rest of the trie is loaded on demand
RenderTemplate = Callable[[str, dict], Awaitable[str]]


# The templates' short names for a page's data, whose JSON twin is keyed by words (`compile`, not `c`).
TEMPLATE_NAMES = {"compile": {"compile": "c"}, "bytecode": {"compile": "c", "view": "v"},
                  "artifact": {"artifact": "a"}, "payload": {"payload": "p"}, "diff": {"diff": "d"},
                  "diff_compiles": {"entry": "e"}, "search": {"query": "q"}, "tree": {"query": "q"},
                  "artifact_diff": {"artifact_a": "a", "artifact_b": "b"}}


def page_context(page: Page, data: dict, urls, database: str, args: Args | None = None) -> dict:
    """What the page's template (`tlindex/<page.template>`) is given: its data and what its presenter adds."""
    context = {"database": database, "u": urls, "status_legend": STATUS_LEGEND, "setting": setting, "prose": prose,
               "term": Terms(urls), "short": short, **data}
    context.update({short: data[word] for word, short in TEMPLATE_NAMES.get(page.name, {}).items() if word in data})
    presenter = PRESENTERS.get(page.name)
    if presenter is not None:
        context.update(presenter(data, urls, args or Args()))
    return context


async def render_page(render_template: RenderTemplate, page: Page, data: dict, urls, database: str,
                      args: Args | None = None) -> str:
    """The page's HTML, with the server's way to render a template."""
    return await render_template(f"tlindex/{page.template}", page_context(page, data, urls, database, args))


class Terms:
    """`term("graph-break")` in a template: a small "?" linking the word's glossary entry (or a section of the
    glossary), its definition as the tooltip; `term("statuses", "what each status means")` links words instead of
    the "?". An anchor the glossary lacks is an error (KeyError), so a page cannot link a word that is not there."""

    def __init__(self, urls):
        self.urls = urls

    def __call__(self, anchor: str, label: str = "?") -> Markup:
        return Markup('<a class="term{}" href="{}#{}" title="{}">{}</a>').format(
            " q" if label == "?" else "", self.urls.glossary(), anchor, _definition(anchor), label)


@functools.lru_cache(maxsize=1)
def _definitions() -> dict[str, str]:
    """Each word's tooltip and each section's title, read once per process (a page was reading the glossary again)."""
    return {**{t.anchor: f"{t.name}: {plain(t.text)}" for t in terms()},
            **{section: f"The glossary: {title}" for section, title in SECTIONS.items()}}


def _definition(anchor: str) -> str:
    """A word's definition, or a section's title, as a tooltip; the glossary is read again for a word not met
    before (a finding registered since), and a word it lacks is a KeyError."""
    if anchor not in _definitions():
        _definitions.cache_clear()
    return _definitions()[anchor]


def prose(text: str | None) -> Markup:
    """A definition as HTML: escaped, its `code` marks as <code>."""
    parts = (text or "").split("`")
    if len(parts) % 2 == 0:  # an odd number of marks: the text as it is
        parts = [text or ""]
    return Markup("").join(Markup("<code>{}</code>").format(part) if i % 2 else Markup.escape(part)
                           for i, part in enumerate(parts))


def setting(value) -> str:
    """A config value as one line of JSON (strings without their quotes): the vLLM page's settings."""
    return value if isinstance(value, str) else json.dumps(value)


def _payload(data: dict, urls, args: Args) -> dict:
    text = data.get("text") if "artifact" in data else data["payload"]["text"]
    if text is None:
        return {"body": None, "lines": 0}
    return {"body": render_payload(text, data["lang"]), "lines": shown_lines(text, data["lang"])}


def trie_html(data: dict, urls, args: Args) -> dict:
    run, rank = data["run"]["id"], data["rank"]
    budget = args.integer("max_nodes", TRIE_BUDGET)
    renderer = TrieRenderer(urls.compile, lambda node: urls.trie_node(run, node, rank=rank), budget,
                            open_all=data["nodes"] <= 200, bytecode_url=_bytecode_urls(urls, data["with_bytecode"]))
    return {"trie": renderer.render(data["trie"])}


def trie_children(data: dict, urls, args: Args) -> Markup:
    """The children of one trie node, as an HTML fragment (loaded when a lazy node opens)."""
    run, rank = data["run"], data["rank"]
    renderer = TrieRenderer(urls.compile, lambda n: urls.trie_node(run, n, rank=rank), TRIE_BUDGET,
                            open_all=False, bytecode_url=_bytecode_urls(urls, data["with_bytecode"]))
    return renderer.children(data["node"])


def _bytecode_urls(urls, compiles: set[int]):
    """compile row -> URL of its bytecode page, for the compiles that have one."""
    return lambda row: urls.bytecode(row) if row in compiles else None


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


def _bytecode(data: dict, urls, args: Args) -> dict:
    view = data["view"]
    links = {g["name"]: urls.artifact(g["artifact"]) if g["artifact"] else urls.compile(g["compile"])
             for g in view.graphs}
    links.update({r["name"]: urls.bytecode(r["compile"]) for r in view.resumes if r["compile"]})
    decompiled = {label: {"d": d, "lines": highlighted_lines(d.source, "python") if d.source else None}
                  for label, d in view.decompiled.items()}
    return {"decompiled": decompiled, "arg": lambda inst: argument(inst, links)}


def highlighted_hunks(hunks: list | None, lang: str | None) -> list | None:
    """Side-by-side rows with each line highlighted (a line at a time: no token spans two rows)."""
    if hunks is None:
        return None
    return [[dataclasses.replace(row, a=Markup(highlighted(row.a, lang or "text")),
                                 b=Markup(highlighted(row.b, lang or "text"))) for row in hunk] for hunk in hunks]


@functools.lru_cache(maxsize=50_000)  # graph after graph repeats the same lines
def _line(text: str, lang: str) -> str:
    """A line highlighted, once per process."""
    return highlighted(text, lang)


def hunks_table(hunks: list, lang: str | None) -> Markup:
    """The rows of a side-by-side table (hunks of `Row`s), each line highlighted, as one piece of HTML: a pass-by-pass
    page holds thousands of them, and a template spends a call per cell."""
    lang, out = lang or "text", []
    for i, hunk in enumerate(hunks):
        out.append('<tr class="gap"><td colspan="4">⋯</td></tr>\n' if i else "\n")
        for r in hunk:
            out.append(f'<tr class="{escape(r.tag)}"><td class="lineno">{r.a_no or ""}</td><td class="a'
                       f'{" empty" if r.a_no is None else ""}"><pre>{_line(r.a, lang)}</pre></td><td class="lineno">'
                       f'{r.b_no or ""}</td><td class="b{" empty" if r.b_no is None else ""}"><pre>{_line(r.b, lang)}'
                       '</pre></td></tr>\n')
    return Markup("".join(out))


def _passes(data: dict, urls, args: Args) -> dict:
    return {"ways": [[{**step, "table": hunks_table(step["hunks"], step["lang"]) if step["hunks"] else None}
                      for step in way] for way in data["ways"]]}


def _pair(data: dict, urls, args: Args) -> dict:
    entry = data["entry"]
    graphs = [{**graph, "hunks": highlighted_hunks(graph["hunks"], graph["lang"])} for graph in entry["graphs"]]
    return {"e": {**entry, "graphs": graphs}}


def script_json(value) -> Markup:
    """JSON safe inside a <script> element."""
    return Markup(json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _search(data: dict, urls, args: Args) -> dict:
    from tlindex.answers.search import marked_html

    groups = [{**group, "hits": [{"table": hit.table, "snippet": marked_html(hit), "href": urls.base + hit_path(hit)}
                                 for hit in group["hits"]]} for group in data["groups"]]
    return {"groups": groups, "db_file": args.options.get("db_file", "traces.db")}


CHART_W, CHART_H, PAD = 300, 110, 24  # one chart of the trend page, in px


def x_axis(points: list[dict]) -> Markup:
    """The runs under a chart: the first and the last, by the day they started (else by label)."""
    if not points:
        return Markup("")

    def name(point: dict) -> str:
        start = point.get("start") or ""
        return start[:10] if start else str(point["label"])[:16]
    first = Markup('<text x="{}" y="{}" class="axis">{}</text>').format(PAD, CHART_H - 4, name(points[0]))
    if len(points) == 1:
        return first
    return first + Markup('<text x="{}" y="{}" class="axis" text-anchor="end">{}</text>').format(
        CHART_W - PAD, CHART_H - 4, name(points[-1])) + Markup(
        '<text x="{}" y="{}" class="axis" text-anchor="middle">{} runs</text>').format(CHART_W / 2, CHART_H - 4,
                                                                                        len(points))


def chart_svg(series: dict, urls) -> Markup:
    """One metric over the runs as a small SVG line chart (no script, nothing fetched: the report opens offline);
    each point links to its run and says its run and value; a run without a value leaves a gap in the line."""
    points = series["points"]
    values = [p["value"] for p in points if p["value"] is not None]
    top = max(values) if values and max(values) > 0 else 1
    step = (CHART_W - 2 * PAD) / max(len(points) - 1, 1)

    def at(i: int, value) -> tuple[float, float]:
        return PAD + i * step, CHART_H - PAD - (CHART_H - 2 * PAD) * (value / top)

    segments: list[list[str]] = [[]]  # a run without a value is a gap in the line, not a point on it
    for i, p in enumerate(points):
        if p["value"] is None:
            segments.append([])
        else:
            segments[-1].append("{:.1f},{:.1f}".format(*at(i, p["value"])))
    lines = Markup("").join(Markup('<polyline points="{}" fill="none"/>').format(" ".join(segment))
                            for segment in segments if len(segment) > 1)
    dots = Markup("").join(
        Markup('<a href="{}"><circle cx="{:.1f}" cy="{:.1f}" r="3"><title>{}: {} {}</title></circle></a>').format(
            urls.run(p["run"]), *at(i, p["value"]), p["label"], p["value"], series["unit"])
        for i, p in enumerate(points) if p["value"] is not None)
    axis = Markup('<text x="2" y="{}" class="axis">{}</text><text x="2" y="{}" class="axis">0</text>').format(
        PAD - 8, f"{top:g}", CHART_H - PAD + 4) + x_axis(points) + Markup("").join(  # where torch changed
        Markup('<line class="torch-change" x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}"><title>torch {3} -&gt; {4}'
               '</title></line>').format(PAD + i * step, PAD, CHART_H - PAD, p["torch_changed_from"], p["torch"])
        for i, p in enumerate(points) if p.get("torch_changed_from"))
    return Markup('<svg class="trend" viewBox="0 0 {} {}" width="{}" height="{}" role="img">{}{}{}</svg>').format(
        CHART_W, CHART_H, CHART_W, CHART_H, axis, lines, dots)


def _compile(data: dict, urls, args: Args) -> dict:
    """The compile's timeline, metrics fields and guards as HTML."""
    compile = data["compile"]
    return {"timeline": _timeline(compile["spans"]),
            "field_rows": [_field_rows(m["fields"]) for m in compile["metrics"]],
            "guard_rows": [_guard_rows(origin, guards, with_reason) for origin, guards, with_reason in
                           compile["guard_groups"]]}


def _timeline(spans: list[dict]) -> Markup:
    """The compile's spans on one line, as HTML (a hundred spans a compile: one template call per value was most of
    the page's time)."""
    return Markup("".join(
        f'<div class="span" title="{escape(s["name"])}: {escape(s["ms"])} ms"><span class="bar" style="margin-left: '
        f'{escape(s["left"])}%; width: {escape(s["width"])}%"></span><span class="label">{escape(s["name"])} '
        f'{escape(s["ms"])} ms</span></div>' for s in spans))


def fold(t: dict) -> str:
    """A folded text (tlindex.pages.compile.folded) as HTML: its head, the rest in a fold (the template's `fold`)."""
    head = f'<pre class="reason">{escape(t["head"])}</pre>'
    if not t["rest"]:
        return head
    omitted = f" (and {t['omitted']:,} bytes left out of this page)" if t["omitted"] else ""
    return (f'{head}<details class="fold"><summary>{escape(t["rest_lines"] + 1)} more line{"s" if t["rest_lines"] else ""}'
            f'{omitted}</summary><pre class="reason">{escape(t["rest"])}</pre></details>')


def _field_rows(fields: list[tuple[str, dict]]) -> Markup:
    """The rows of one metrics record's every field, as HTML."""
    return Markup("".join(f'<tr><th>{escape(k)}</th><td>{fold(v) if v["rest"] else escape(v["head"])}</td></tr>'
                          for k, v in fields))


def _guard_rows(origin: str, guards: list[dict], with_reason: bool) -> Markup:
    """The rows of one origin's table of guards, as HTML."""
    rows = []
    for g in guards:
        kind = f"{escape(g['guard_type'])}: " if g["guard_type"] else ""
        source = f" <i>{escape(g['source'])}</i>" if g["source"] and origin != "dynamo_cpp_guards_str" else ""
        reason = f"<td>{escape(g['reason'] or '')}</td>" if with_reason else ""
        rows.append(f'<tr><td><code style="padding-left: {escape((g["depth"] or 0) * 1.2)}em">{kind}{escape(g["text"])}'
                    f'</code>{source}</td><td>{escape(g["user_code"] or "")}</td>{reason}</tr>')
    return Markup("".join(rows))


def _trend(data: dict, urls, args: Args) -> dict:
    return {"charts": [{**series, "svg": chart_svg(series, urls)} for series in data["series"]]}


# What each page adds to its data before its template renders (pages without one render their data as it is).
PRESENTERS: dict[str, Callable[[dict, object, Args], dict]] = {
    "artifact": _payload,
    "compile": _compile,
    "payload": _payload,
    "trie": trie_html,
    "bytecode": _bytecode,
    "passes": _passes,
    "piece_passes": _passes,
    "diff_compiles": _pair,
    "artifact_diff": lambda data, urls, args: {"hunks": highlighted_hunks(data["hunks"], data["lang"])},
    "provenance": lambda data, urls, args: {"links_json": script_json(data["links"])},
    "search": _search,
    "trend": _trend,
}
