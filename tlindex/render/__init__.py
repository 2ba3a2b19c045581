"""The pages as HTML, for the server and the report alike: below both, so that neither reaches for the other.

page.py (a page's data plus what only HTML needs, in its template), highlight.py (payloads coloured),
trie_html.py (the stack trie), cells.py (a table's cells linked to pages), urls.py (every URL a page links, served
or in a report), site.py (the templates and assets, and the report's site), report.py (the report's renderer).
"""
