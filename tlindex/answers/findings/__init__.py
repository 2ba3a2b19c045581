"""What is wrong with a run, in a few sentences: findings computed in SQL from the tables, one check per kind.

Each finding is one sentence with a count, a severity and where to look (a canned query and its
parameters, or a compile), with what its kind means and what to try next. Errors and warnings are
problems (`tlindex findings` exits 1 on them); information (the slowest compile, cache misses of a
cold start) is context. The run page shows them at the top, the runs page the worst one of each run.

The checks are registered in `registry.CHECKS` by the modules imported here (compiles, failures,
recompiles, compiling, ranks, alike, pieces, logs); a new check is one `@check(...)` in one of them (or in a module
added to the imports below).
"""

from __future__ import annotations

from tlindex.answers.findings import alike, compiles, compiling, failures, logs, pieces, ranks, recompiles  # noqa: F401  (each registers its checks)
from tlindex.answers.findings.logs import export_issue_count
from tlindex.answers.findings.registry import (
    CHECKS,
    FIX_FIRST_RULE,
    Check,
    Context,
    Finding,
    check,
    findings,
    fix_first,
    kinds,
    problems,
)
from tlindex.answers.findings.words import group_ranks, rank_list, short_location

__all__ = ["CHECKS", "FIX_FIRST_RULE", "Check", "Context", "Finding", "check", "export_issue_count", "findings",
           "fix_first", "group_ranks", "kinds",
           "problems", "rank_list", "short_location"]
