"""The provenance page (tlparse -i): pre-grad graph, post-grad graph and generated code, linked."""

from __future__ import annotations

import json

from datasette.utils.asgi import NotFound
from markupsafe import Markup

from tlindex.answers.provenance import MAPPINGS, provenance_data

from ..database import int_var, open_database, render


def script_json(value) -> Markup:
    """JSON safe inside a <script> element."""
    return Markup(json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


async def provenance_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    artifact_id = int_var(request, "artifact")
    data = await db.execute_fn(lambda conn: provenance_data(conn, artifact_id))
    if data is None:
        raise NotFound(f"Artifact {artifact_id} is not an {MAPPINGS} artifact with a payload "
                       "(logged with INDUCTOR_PROVENANCE=1)")
    return await render(datasette, request, "provenance.html", {"database": db.name, "u": urls, **data,
                                                               "links_json": script_json(data["links"])})
