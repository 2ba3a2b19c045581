"""A command leaves nothing beside the database but the database (issue 49: a `.<db>.claims/` folder of lock files
stayed beside every database an ingest had written), and the claims still keep two ingests of one path apart."""

from __future__ import annotations

import threading
import time

from click.testing import CliRunner
from conftest import DATA

from tlindex.cli import cli
from tlindex.ingest.pipeline import claim_paths, claims_folder, release_claims

LOG = next((DATA / "recompiles").glob("*.log"))


def test_ingest_label_and_rm_leave_only_the_database(tmp_path):
    db = tmp_path / "traces.db"
    for args in (["ingest", str(LOG), "--db", str(db), "--silent"], ["ingest", str(DATA / "dynamic"), "--db", str(db),
                 "--silent", "-j", "2"], ["label", "1", "first", "--db", str(db)], ["rm", "first", "--db", str(db)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("traces.db")) == [], args


def test_claims_keep_two_ingests_of_a_path_apart_while_each_lets_go_of_its_files(tmp_path):
    """Threads stand for ingests (flock is per open file): none holds a path's claim while another does, though
    each removes the lock file it let go of, and the folder is gone once the last lets go."""
    db, path = tmp_path / "traces.db", tmp_path / "x.log"
    holding, overlaps = [], []

    def ingest_of_the_path() -> None:
        for _ in range(20):
            claims = claim_paths(db, [path])
            holding.append(1)
            overlaps.append(len(holding) > 1)
            time.sleep(0.001)
            holding.pop()
            release_claims(db, claims)

    threads = [threading.Thread(target=ingest_of_the_path) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(overlaps) == 80 and not any(overlaps)
    assert not claims_folder(db).exists()
