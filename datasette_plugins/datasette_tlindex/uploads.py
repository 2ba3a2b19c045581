"""A team's server's routes (`tlindex serve --uploads`): logs posted to a database, and each upload's status.

`POST /<db>/-/tlindex/upload?name=FILE[&label=L][&baseline=RUN&fail_on=...]` with the log, `.gz` or archive as the
body, a token as `Authorization: Bearer <token>` (tlindex.tokens: `upload` or `admin`), the run facts as JSON in the
`X-Tlindex-Facts` header. The body is streamed to the spool (tlindex.uploads.Receiving), never held whole; a body past
the limit is a 413, a full queue a 503 with Retry-After, a full disk a 507; the answer is a 202 with the upload's
status URL (200 when the same bytes were posted before: that upload, and its run). `GET
/<db>/-/tlindex/upload/<id>[.json]` says queued, ingesting (with its progress), done (the run's URL, its findings in
one line, the gate's verdict) or failed (why). A token is also an actor (`actor_from_request`): Datasette's own views
and the tlindex pages decide with it, as with any actor.
"""

from __future__ import annotations

import asyncio
import errno
import json

from datasette.utils.asgi import NotFound, Response

from .database import open_database

FACTS_HEADER = "x-tlindex-facts"
RETRY_AFTER_S = 30


def bearer(request) -> str | None:
    """The token of an `Authorization: Bearer …` header."""
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _error(status: int, message: str, **headers) -> Response:
    return Response.json({"ok": False, "error": message, "status": status}, status=status, headers=headers)


def _team(opened):
    from tlindex.serve import team_of

    team = team_of(getattr(opened.db, "path", None))
    if team is None:
        raise NotFound(f"{opened.name} takes no uploads here (tlindex serve {opened.name}.db --uploads)")
    return team


def _meta(request, token_name: str) -> dict:
    """What the client said of its upload: its file's name, label, run facts and gate (redacted as they come in)."""
    from tlindex.answers.gate import parse_fail_on
    from tlindex.store.redact import redact_text, storable

    args = request.args
    name = (args.get("name") or "upload.log")[:300]
    try:
        facts = json.loads(request.headers.get(FACTS_HEADER) or "{}")
    except ValueError:
        facts = {}
    fail_on = args.get("fail_on") or None
    if fail_on:
        parse_fail_on(fail_on)  # a bound that cannot be read: a 400 before any byte is taken
    label = redact_text(storable(args["label"])) if args.get("label") else None
    return {"name": redact_text(storable(name)), "label": label, "facts": facts if isinstance(facts, dict) else {},
            "baseline": args.get("baseline") or None, "fail_on": fail_on,
            "allow_unjudged": args.get("allow_unjudged") in ("1", "true"), "token": token_name}


async def upload(datasette, request, receive):
    """Take one upload (see the module)."""
    from tlindex import tokens
    from tlindex.answers.uploads import waiting
    from tlindex.database import Database
    from tlindex.errors import TlindexError, UsageError
    from tlindex.ingest.uploads import record
    from tlindex.uploads import Receiving, Refused, spool_of

    if request.method != "POST":
        return _error(405, "post the log to this URL (tlindex push does)", allow="POST")
    opened = await open_database(datasette, request)
    team = _team(opened)
    uploader = team.uploader
    try:
        token = tokens.check(uploader.db_path, bearer(request), "upload")
        meta = _meta(request, token.name)
    except tokens.TokenRefused as error:
        return _error(error.status, str(error), **({"www-authenticate": "Bearer"} if error.status == 401 else {}))
    except UsageError as error:
        return _error(400, str(error))
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > uploader.limits.max_upload:
        return _error(413, f"the upload is larger than {uploader.limits.max_upload:,} bytes, the most this server "
                           f"takes (tlindex serve --max-upload)")
    db = opened.db
    if await db.execute_fn(waiting) >= uploader.limits.queue:
        return _error(503, f"{uploader.limits.queue} uploads are waiting to be ingested: try again later",
                      **{"retry-after": str(RETRY_AFTER_S)})
    receiving = Receiving(spool_of(uploader.db_path), uploader.limits)
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                receiving.discard()  # the client went away: nothing of it stays
                return Response.text("", status=400)
            receiving.write(message.get("body", b""))
            if not message.get("more_body", False):
                break
        digest = receiving.finish(meta)
    except Refused as error:
        receiving.discard()
        return _error(error.status, str(error))
    except OSError as error:
        receiving.discard()
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return _error(507, "the server's disk is full: nothing of the upload was kept; try again once it has room")
        raise

    def recorded() -> tuple[int, bool]:
        with Database(uploader.db_path, write=True) as writer:
            return record(writer.conn, digest, {**meta, "bytes": receiving.size})

    try:
        upload_id, new = await asyncio.to_thread(recorded)
    except TlindexError as error:
        return _error(500, str(error))
    uploader.wake.set()
    body = await db.execute_fn(lambda conn: _status(conn, upload_id, uploader, opened.urls, _gate(meta)))
    return Response.json({**body, "duplicate": not new}, status=202 if new else 200)


def _gate(asked: dict) -> dict:
    """The gate a request asks for (its `baseline`, `fail_on`, `allow_unjudged`)."""
    return {"baseline": asked.get("baseline") or None, "fail_on": asked.get("fail_on") or None,
            "allow_unjudged": asked.get("allow_unjudged") in (True, "1", "true")}


def _status(conn, upload_id: int, uploader, urls, gate: dict) -> dict:
    """An upload's status as the routes answer it; once its run is made, judged by the gate asked for (the
    request's, else the one posted with it): judged as it is read, so the same bytes posted again with other bounds
    are judged by those."""
    from tlindex.answers.uploads import judged, waiting
    from tlindex.answers.uploads import upload as upload_row

    row = upload_row(conn, upload_id)
    if row is None:
        raise NotFound(f"no upload {upload_id}")
    status = {"ok": True, "upload": upload_id, "state": row["state"], "name": row["name"], "bytes": row["bytes"],
              "status_url": f"{urls.base}/-/tlindex/upload/{upload_id}", "received_at": row["received_at"],
              "finished_at": row["finished_at"]}
    if row["state"] == "ingesting" and upload_id in uploader.progress:
        done, total = uploader.progress[upload_id]
        status["progress"] = {"bytes": done, "of": total}
    if row["state"] == "queued":
        status["ahead"] = waiting(conn, before=upload_id)
    if row["run_id"] is not None:
        status["run"] = row["run_id"]
        status["run_url"] = urls.run(row["run_id"])
    if row["message"]:
        status["findings" if row["state"] == "done" else "error"] = row["message"]
    asked = gate if gate["fail_on"] else _gate(row)
    if row["state"] == "done" and row["run_id"] is not None and asked["fail_on"]:
        status["gate"] = judged(conn, row["run_id"], asked["baseline"], asked["fail_on"], asked["allow_unjudged"])
    return status


async def status(datasette, request):
    """An upload's status: its page, or (`.json`) its data (`?fail_on=…&baseline=…`: judged by those bounds)."""
    from tlindex.answers.gate import parse_fail_on
    from tlindex.errors import UsageError

    opened = await open_database(datasette, request)
    team = _team(opened)
    try:
        upload_id = int(request.url_vars["upload"])
    except ValueError:
        raise NotFound("no such upload") from None
    try:
        gate = _gate({key: request.args.get(key) for key in ("baseline", "fail_on", "allow_unjudged")})
        if gate["fail_on"]:
            parse_fail_on(gate["fail_on"])
    except UsageError as error:
        return _error(400, str(error))
    data = await opened.db.execute_fn(lambda conn: _status(conn, upload_id, team.uploader, opened.urls, gate))
    if request.url_vars.get("format") == ".json":
        return Response.json(data)
    html = await datasette.render_template("tlindex/upload.html", {"upload": data, "database": opened.name,
                                                                   "u": opened.urls}, request=request)
    return Response.html(html)


def form_of(opened) -> dict | None:
    """What the runs page of a database that takes uploads shows to drop a log on (None: it takes none)."""
    from tlindex.serve import team_of

    team = team_of(getattr(opened.db, "path", None))
    if team is None:
        return None
    return {"url": f"{opened.urls.base}/-/tlindex/upload", "max_bytes": team.uploader.limits.max_upload}


def actor(datasette, request) -> dict | None:
    """A tlindex token presented as `Authorization: Bearer` is the actor of the request (its name and what it may
    do), for every database this server takes uploads for; a token that does not check out is no actor."""
    from tlindex import tokens
    from tlindex.serve import TEAMS

    presented = bearer(request)
    if not presented or not presented.startswith(tokens.PREFIX):
        return None
    for team in TEAMS.values():
        try:
            found = tokens.check(team.uploader.db_path, presented, "upload")
        except tokens.TokenRefused:
            continue
        return {"id": f"token:{found.name}", "tlindex": found.can}
    return None


async def manage(datasette, request):
    """`POST /<db>/-/tlindex/run/<run>/label?label=NEW` and `POST /<db>/-/tlindex/run/<run>/remove`: a run relabelled
    or removed over HTTP, with an admin token."""
    from tlindex import tokens
    from tlindex.database import Database
    from tlindex.errors import NotFound as Missing
    from tlindex.errors import TlindexError

    if request.method != "POST":
        return _error(405, "post to this URL, with an admin token", allow="POST")
    opened = await open_database(datasette, request)
    team = _team(opened)
    try:
        tokens.check(team.uploader.db_path, bearer(request), "admin")
    except tokens.TokenRefused as error:
        return _error(error.status, str(error))
    run, action = request.url_vars["run"], request.url_vars["action"]

    def change() -> dict:
        with Database(team.uploader.db_path, write=True) as db:
            if action == "label":
                return db.rename_run(run, request.args.get("label") or "")
            return {"removed": db.remove_runs([run])["removed"]}

    try:
        return Response.json({"ok": True, **(await asyncio.to_thread(change))})
    except TlindexError as error:
        return _error(404 if isinstance(error, Missing) else 400, str(error))


def routes(database_pattern: str) -> list[tuple[str, object]]:
    """The upload routes under each database, and the runs' management by an admin token."""
    return [(rf"^/{database_pattern}/-/tlindex/upload$", upload),
            (rf"^/{database_pattern}/-/tlindex/upload/(?P<upload>[^/.]+)(?P<format>\.json)?$", status),
            (rf"^/{database_pattern}/-/tlindex/run/(?P<run>[^/]+)/(?P<action>label|remove)$", manage)]
