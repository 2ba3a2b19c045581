"""The words of tlindex's pages, each explained in a sentence or two for a PyTorch engineer: one source of truth.

The glossary page (`tlindex show glossary`) lists them by section, an anchor each; pages link a word where it
first appears (a small "?" whose tooltip is the definition). The findings' kinds come from the findings
registry (tlindex.answers.findings): what each means and what to try next is written once, beside its check.
Definitions follow what torch 2.13 logs (docs and the logs' own records), not guesses; `backticks` mark code.
"""

from __future__ import annotations

from dataclasses import dataclass

from tlindex.answers.findings import kinds


@dataclass(frozen=True)
class Term:
    anchor: str            # its id on the glossary page: glossary#<anchor>
    name: str              # the word as pages show it
    text: str              # what it means, a sentence or two
    section: str           # one of SECTIONS
    next_steps: str = ""   # what to try next (findings)
    code: str = ""         # the name code and JSON use (a finding's kind)


SECTIONS = {
    "runs": "Runs, ranks and processes",
    "ids": "Compile ids",
    "compiling": "How torch.compile compiles",
    "statuses": "Compile statuses",
    "caches": "Caches",
    "vllm": "vLLM",
    "logs": "Logs",
    "findings": "Findings",
}

WORDS = (
    Term("run", "run", "One torch job as tlindex groups its logs: the files of one directory whose processes ran "
         "together (the ranks of a distributed job, or one script). A script run twice into the same directory "
         "makes two runs.", "runs"),
    Term("rank", "rank", "A process's rank in torch.distributed: every record it logs after `init_process_group` "
         "carries it, and its log file is usually named `…_rank_N_…`. tlindex compares the ranks of a run with each "
         "other.", "runs"),
    Term("world-size", "world size", "How many ranks a distributed run has: the distinct ranks its processes "
         "logged. A run of one process, without torch.distributed, is not distributed and has none.", "runs"),
    Term("runs-columns", "the runs page's columns", "run (its label and id), findings (its worst), start (its "
         "first record), ranks (or processes), compiles (as counted everywhere: not `[-/-]`, not an export's compile "
         "context), errors (failed compiles), log "
         "bytes, the compile that logged most, torch's version and the log directory.", "runs"),
    Term("process", "process", "One process's records (a pid in a log file). A rank its launcher restarted is a "
         "new process, named `1 (restart 1)`; two processes claiming one rank are told apart by pid.", "runs"),
    Term("rank-group", "rank group", "Processes of a run that compiled the same: the same compiles (matched by "
         "code object, not compile id), graphs and guards. A compile page lists the same compile on each process of "
         "its group, with its time; a report of more than 8 processes writes that page once, its first rank's, for "
         "every rank whose compiles match it one for one (id, status, code, cache results).", "runs"),
    Term("frame", "frame", "A Python function call that Dynamo intercepts and compiles. Dynamo numbers each "
         "function (code object) it compiles in a process, from 0; a graph break goes on in a resume function, "
         "a frame of its own.", "runs"),
    Term("compile-id", "compile id [F/C]", "How torch names a compilation: `[0/1]` is the second compile (C = 1) "
         "of the first function Dynamo compiled in the process (F = 0). C is 0 for a function's first compile "
         "and counts its recompiles. `torch._dynamo.reset()` starts the numbers again. Where a name is ambiguous "
         "tlindex adds the run, the generation after a reset and the rank or process: `RUN:0/1~1@3`, "
         "`RUN:0/1@pid4242`.", "ids"),
    Term("compiled-autograd-id", "compiled autograd id [!A] and [!A/F/C]", "Under compiled autograd, `[!A]` is "
         "a backward graph compiled autograd captured (A numbers them) and `[!A/F/C]` a Dynamo compile made "
         "while compiling that backward.", "ids"),
    Term("attempt", "attempt", "One analysis of a frame by Dynamo: 0, then one more after each restart. tlparse "
         "writes attempt 1 of `[0/0]` as `[0/0_1]`; tlindex keeps every attempt of a compile in that compile and "
         "counts them.", "ids"),
    Term("no-compile-id", "[-/-]", "Records logged outside any compilation (torch.export and AOTInductor, "
         "timing spans of no compile, the torch version), as tlparse files them. tlindex gathers them into one "
         "more row per process, never counted as a compile, with status none unless they carry "
         "compilation_metrics (an export's).", "ids"),
    Term("dynamo", "Dynamo", "torch.compile's front end: it intercepts a function's frame, traces its bytecode "
         "into an FX graph of torch ops (`dynamo_output_graph`), attaches guards, and replaces the frame's code "
         "with a call to the compiled graph.", "compiling"),
    Term("aotautograd", "AOTAutograd", "Traces Dynamo's graph down to ATen ops ahead of time. With gradients it "
         "builds a joint forward-backward graph and splits it into a forward and a backward graph "
         "(`aot_forward_graph`, `aot_backward_graph`); without, one inference graph (`aot_inference_graph`).",
         "compiling"),
    Term("inductor", "Inductor", "torch.compile's default backend: it compiles AOTAutograd's graphs into fused "
         "kernels (Triton on GPU, C++ on CPU) and the Python wrapper that calls them (`inductor_output_code`).",
         "compiling"),
    Term("compile", "compile", "A compile id Dynamo began compiling (its `dynamo_start`) or finished (its "
         "`compilation_metrics`): what every page, query, trend and gate counts. Not `[-/-]`, not a torch.export's "
         "or AOTInductor's compile context (torch 2.15 gives their records a compile id, no `dynamo_start`), not "
         "compiled autograd's captured graph `[!N]` (compiled as `[!N/F/C]`): those say status none.",
         "compiling"),
    Term("compile-time", "compile time", "A compile's seconds: tracing and compiling its frame "
         "(`entire_frame_compile_time_s`, AOTAutograd and Inductor included) and compiling its backward graph, "
         "done at the first backward call under the forward's compile id (`bwd_compilation_metrics`). A warm "
         "start logs no metrics: its `entire_frame_compile` span counts. A run's is its compiles'.", "compiling"),
    Term("backward-compile", "backward compile", "The compilation of a compile's backward graph, logged apart from "
         "the forward (`bwd_compilation_metrics`, same compile id), at the first backward call; its time is part "
         "of that compile's compile time, and said apart.", "compiling"),
    Term("graph-break", "graph break", "Dynamo met code it cannot put in a graph (a print, a data-dependent "
         "branch, an unsupported call): it compiles the graph up to there, runs that code eagerly, and goes on in "
         "a resume function compiled as a new frame. Its reason is logged (`dynamo_graph_break_reason`).",
         "compiling"),
    Term("graph-break-id", "graph-break id (gb0025)", "torch's number for a kind of graph break, taken from the "
         "link torch 2.13 appends to the reason (`…/gb/gb0025.html`, the Graph Break Site, which says what it means "
         "and how to fix it); the graph breaks page groups by it, its title and the user line.", "compiling"),
    Term("symbol", "symbol (s77, u0)", "A dynamic size as Dynamo tracks it. A backed symbol (`s77`) stands for an "
         "input's size and has a hint, the value seen at compile time; an unbacked one (`u0`) comes from data "
         "(`.item()`, `nonzero()`) and has none, so a branch on it is a data-dependent graph break.", "compiling"),
    Term("restart", "restart (analysis restart)", "Dynamo dropped an analysis of a frame and started it again with "
         "what it learned: most often to end the graph just before a graph break. The time spent before the "
         "restart is lost (`dynamo_time_before_restart_s`); `restart_reasons` say why.", "compiling"),
    Term("recompile", "recompile", "A frame compiled again because, on a call, the guards of all its compiled "
         "versions failed: the second number of its compile id counts up, and the failed guard is the reason. "
         "Past `torch._dynamo.config.recompile_limit` (8 by default) Dynamo runs the function eagerly.",
         "compiling"),
    Term("guard", "guard", "A condition Dynamo attaches to compiled code (a tensor's shape, dtype, device or "
         "requires_grad, a Python value, global state such as grad mode): the compiled code is reused only on "
         "calls where every guard holds (`dynamo_cpp_guards_str` lists them).", "compiling"),
    Term("guard-failure", "guard failure", "A guard that did not hold on a call, e.g. `tensor 'x' size mismatch at "
         "index 0. expected 4, actual 8`: logged as the reason of the recompile it causes "
         "(`recompile_reasons`).", "compiling"),
    Term("status-ok", "ok", "Compiled: compilation_metrics logged, no failure, a graph with ops, no restart; or a "
         "warm start from torch's caches, which logs no compilation_metrics but loads its guards from them "
         "(`precompile_load_guards`) and ends its whole-frame span (`entire_frame_compile`).", "statuses"),
    Term("status-break", "break", "Compiled after at least one analysis restart, most often for a graph break "
         "(tlparse: success with restart).", "statuses"),
    Term("status-empty", "empty", "Dynamo's graph had no ops (`graph_op_count` 0 or absent): nothing to compile in the frame, "
         "or in the part of it before a graph break.", "statuses"),
    Term("status-error", "error", "The compile failed: its compilation_metrics carry a `fail_type`.", "statuses"),
    Term("status-missing", "missing", "A compile that began (its `dynamo_start` is logged) and never ended in the "
         "log: no compilation_metrics, and no end of a warm start either (a process killed, or still compiling "
         "when the log was read). The CI gate does not judge a run with one.", "statuses"),
    Term("status-none", "none", "No compile began here: records without a compile id (`[-/-]`) and without "
         "compilation_metrics, or the records of a compile id that has no `dynamo_start` and no "
         "compilation_metrics (a torch.export's or AOTInductor's compile context, compiled autograd's captured "
         "graph). Nothing to judge, and not counted as a compile.", "statuses"),
    Term("fx-graph-cache", "FX graph cache", "Inductor's cache of compiled graphs (under `TORCHINDUCTOR_CACHE_DIR`), "
         "keyed by the graph, its inputs and the settings that affect its code: a hit skips Inductor's compile. Logged as "
         "`fx_graph_cache_hit`, `_miss` or `_bypass`.", "caches"),
    Term("aotautograd-cache", "AOTAutograd cache", "The cache of AOTAutograd's whole result (compiled forward and "
         "backward), keyed by Dynamo's graph: a hit skips AOTAutograd and Inductor. Logged as "
         "`aotautograd_cache_hit`, `_miss` or `_bypass`.", "caches"),
    Term("cache-hit", "cache hit", "The compiled code was found in the cache and loaded instead of compiled.",
         "caches"),
    Term("cache-miss", "cache miss", "Not in the cache: compiled, then saved for next time. Expected on a cold "
         "start (a new cache directory, or a graph that changed).", "caches"),
    Term("cache-bypass", "cache bypass", "The cache was not used because this graph cannot be cached (an op, "
         "feature or setting the cache does not support); the artifact's payload gives the reason.", "caches"),
    Term("piece", "piece (vLLM piecewise compile)", "vLLM splits each Dynamo graph at its attention ops into pieces "
         "(`submod_N`) and compiles every piece with Inductor on its own, once per compile range: a dynamic "
         "range of token counts, then each size it compiles for.", "vllm"),
    Term("compile-call", "compile call", "One call of vLLM's backend on a Dynamo graph, with its compilation "
         "config; a process that compiles several models makes several.", "vllm"),
    Term("abandoned-call", "abandoned call", "A compile call made in an attempt that Dynamo then restarted: its "
         "pieces were cut short and never used, and count in no total; the next attempt compiled again.", "vllm"),
    Term("envelope", "envelope", "One record of a TORCH_TRACE log: the JSON object after a line's glog prefix. "
         "Its first key names its kind (`dynamo_start`, `compilation_metrics`, `artifact`, …); rank and compile "
         "id are keys beside it.", "logs"),
    Term("payload", "payload", "The text an envelope carries (a graph, generated code, a guard tree, JSON) on the "
         "lines after it, each starting with a tab; `has_payload` is its md5, which tlindex checks. Each distinct "
         "payload is stored once.", "logs"),
    Term("artifact", "artifact", "A named dump a compile logs (a graph, generated code, a cache result, a reason): "
         "a compile's page lists its artifacts, each linking its payload.", "logs"),
    Term("stack-trie", "stack trie", "Every `dynamo_start` stack of a run, shared prefixes merged (most recent "
         "call last), with the compile ids of each compiled frame coloured by status, as tlparse draws it.",
         "logs"),
    Term("ingest-error", "ingest error", "A line tlindex could not index as it is (no glog prefix, bad JSON, a "
         "payload whose md5 differs, a last line cut off, …): a row of `ingest_errors` names its file, line and "
         "kind, and the rest of the log is indexed.", "logs"),
)


def terms() -> list[Term]:
    """Every word, section by section: the words above, then each kind of finding the registry knows (read now:
    a check registered later is explained too)."""
    found = [Term(c.anchor, c.title, c.explanation, "findings", c.next_steps, c.kind) for c in kinds()]
    return sorted(WORDS, key=lambda t: list(SECTIONS).index(t.section)) + found


def term(anchor: str) -> Term:
    """The word of an anchor (KeyError for one the glossary does not have)."""
    return {t.anchor: t for t in terms()}[anchor]


def plain(text: str) -> str:
    """A definition without its code marks, for a tooltip or a terminal."""
    return text.replace("`", "")


def findings_lines(run_id: int, label: str, found: list) -> list[str]:
    """A run's findings as `tlindex findings` and `tlindex run` say them: a line for the run, then each finding and
    what to try next (its words plain)."""
    from tlindex.answers.findings import fix_first, problems

    wrong, first = problems(found), fix_first(found)
    out = [f"run {run_id} {label}: " + (f"{len(wrong)} problem(s)" if wrong else "nothing to report")]
    for finding in found:
        marked = " (fix this first)" if finding is first and len(wrong) > 1 else ""
        out += [f"  {finding.severity}{marked}: {finding.text}", f"      next: {plain(finding.next_steps)}"]
    return out


def lines(width: int = 100) -> list[str]:
    """The glossary as text for a terminal (`tlindex show glossary`): each section, each word and what it means."""
    import textwrap

    out: list[str] = []
    for section, title in SECTIONS.items():
        out += ["", title.upper()] if out else [title.upper()]
        for word in (t for t in terms() if t.section == section):
            name = f"{word.name} ({word.code})" if word.code else word.name
            out += textwrap.wrap(f"{name}: {plain(word.text)}", width, subsequent_indent="    ")
            if word.next_steps:
                out += textwrap.wrap(f"next: {plain(word.next_steps)}", width, initial_indent="    ",
                                     subsequent_indent="    ")
    return out
