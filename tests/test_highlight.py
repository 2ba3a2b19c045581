"""Payload highlighting (tlindex/render/highlight.py) on every distinct payload of the real
fixtures: no character lost or added, every span closed on its own line, and the classes where Python,
C++ and JSON put them."""

from __future__ import annotations

import html
import re

from tlindex.render.highlight import _shown, highlighted, language, render_payload, shown_lines
from tlindex.render.highlight import escape_text as escape

TAG = re.compile(r"</?span[^>]*>")  # only ours: the payload's own text is escaped


def payloads(db) -> list[tuple[str, str, str]]:
    """(shown text, language, artifact kind) of each distinct payload, as the payload page shows it."""
    found = []
    for row in db.execute("SELECT p.text, a.kind, a.name, a.encoding FROM payloads p "
                          "JOIN artifacts a ON a.payload = p.hash GROUP BY p.hash"):
        text, lang = _shown(row["text"], language(row["kind"], row["name"], row["encoding"], row["text"]))
        found.append((text, lang, row["kind"]))
    return found


def test_every_payload_keeps_its_text_and_closes_each_span_on_its_line(db):
    items = payloads(db)
    assert {lang for _, lang, _ in items} >= {"python", "json", "text"}
    coloured = 0
    for text, lang, _ in items:
        out = highlighted(text, lang)
        lines = out.split("\n")
        assert len(lines) == text.count("\n") + 1
        assert all(line.count("<span") == line.count("</span>") for line in lines)
        assert html.unescape(TAG.sub("", out)) == text
        coloured += "<span" in out
    assert coloured > len(items) // 2


def test_python_graphs_colour_definitions_comments_and_annotations(db):
    graphs = [text for text, lang, kind in payloads(db) if kind == "dynamo_output_graph"]
    assert len(graphs) > 10
    for text in graphs:
        lines = highlighted(text, "python").split("\n")
        for source, shown in zip(text.split("\n"), lines):
            stripped = source.strip()
            if stripped.startswith("#"):
                assert f'<span class="c1">{escape(stripped)}</span>' in shown
            if stripped.startswith("def forward("):
                assert '<span class="k">def</span> <span class="nf">forward</span>' in shown
            for annotation in re.findall(r'"[a-z0-9]+\[[^"\n]*\]"', source):
                assert f'<span class="s2">{escape(annotation)}</span>' in shown


def test_json_keys_and_values_are_told_apart(db):
    documents = [text for text, lang, _ in payloads(db) if lang == "json" and '": ' in text]
    assert documents
    for text in documents:
        for source, shown in zip(text.split("\n"), highlighted(text, "json").split("\n")):
            key = re.match(r'\s*("(?:[^"\\]|\\.)*"):', source)
            if key:
                assert shown.lstrip().startswith(f'<span class="nt">{escape(key.group(1))}</span>:')


def test_lines_are_anchored_and_counted_as_shown(db):
    for text, lang, _ in payloads(db)[:200]:
        page = render_payload(text, lang)
        anchors = re.findall(r'<span id="L-(\d+)">', page)
        assert [int(n) for n in anchors] == list(range(1, shown_lines(text, lang) + 1))


def test_hostile_text_stays_text():
    hostile = '# </span><script>alert(1)</script>\nx = "</pre><img src=x onerror=alert(2)>"\n'
    out = str(render_payload(hostile, "python"))
    assert "<script>" not in out and "<img" not in out
    assert html.unescape(TAG.sub("", out.split("<pre>", 1)[1].rsplit("</pre>", 1)[0])).count("alert") == 2
