"""Dynamo's bytecode listings (`dis` text of resume functions) parsed, aligned and linked.

The trace logs `<co_name>_ORIGINAL_BYTECODE` and `<co_name>_MODIFIED_BYTECODE` for every
resume function Dynamo compiles: `dis.Bytecode(code).dis()` text, nothing else. This module
reads that text back into instructions, aligns the two listings, says which instructions
Dynamo inserted and what they are for, and names the compiled graphs and resume functions
the modified code calls. Reassembling a code object from the text (to decompile it) is in
`tlindex.answers.reassemble`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

RESUME_PREFIX = "torch_dynamo_resume_in_"
RESUME_NAME = re.compile(r"^torch_dynamo_resume_in_(?P<base>.+)_at_(?P<line>\d+)$")
COMPILED_FN = re.compile(r"\b__compiled_fn_(?P<n>\d+)(?:_[0-9a-f_]+)?\b")
RESUME_AT = re.compile(r"\b__resume_at_(?P<offset>\d+)_(?P<n>\d+)\b")
# One instruction line of dis output (3.11/3.12): [line] [>>] offset OPNAME [arg [(argrepr)]]
INSTRUCTION = re.compile(
    r"^\s*(?P<line>\d+)?\s+(?P<target>>>)?\s*(?P<offset>\d+) (?P<op>[A-Z][A-Z0-9_]*)"
    r"(?:\s+(?P<arg>-?\d+))?(?:\s+\((?P<argrepr>.*)\))?\s*$")


@dataclass
class Instruction:
    """One instruction of a listing, with the source line it belongs to."""

    offset: int
    op: str
    arg: int | None
    argrepr: str
    line: int | None  # source line (the listing's first column, carried down)
    starts_line: bool  # the listing printed the line number on this instruction
    is_target: bool  # a jump lands here (">>")
    role: str = "kept"  # kept, graph, bookkeeping, restore, resume, inserted
    links: list[dict] = field(default_factory=list)

    @property
    def key(self) -> str:
        """What alignment compares: operation and argument as shown (no offsets, no indexes)."""
        return f"{self.op} {self.argrepr}"


@dataclass
class Listing:
    instructions: list[Instruction]
    unparsed: list[tuple[int, str]]  # (1-based line of the text, text) that is not an instruction
    exception_table: list[str]


def parse_listing(text: str) -> Listing:
    """The instructions of `dis` text; lines that are neither instructions nor blank are kept as unparsed."""
    instructions: list[Instruction] = []
    unparsed: list[tuple[int, str]] = []
    exception_table: list[str] = []
    line: int | None = None
    in_table = False
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        if raw.strip() == "ExceptionTable:":
            in_table = True
            continue
        if in_table:
            exception_table.append(raw.strip())
            continue
        match = INSTRUCTION.match(raw)
        if not match:
            unparsed.append((number, raw))
            continue
        if match["line"]:
            line = int(match["line"])
        instructions.append(Instruction(
            offset=int(match["offset"]), op=match["op"],
            arg=int(match["arg"]) if match["arg"] is not None else None,
            argrepr=match["argrepr"] or "", line=line, starts_line=bool(match["line"]),
            is_target=bool(match["target"])))
    return Listing(instructions, unparsed, exception_table)


BOOKKEEPING = re.compile(r"__import_torch_dot__dynamo_dot_utils|record_pregraph_bytecode|\btmp_\d+\b")
RESTORE_OPS = {"BUILD_LIST", "BUILD_TUPLE", "BUILD_SLICE", "SWAP", "COPY", "BINARY_SUBSCR", "STORE_SUBSCR",
               "DELETE_SUBSCR", "LIST_EXTEND", "POP_TOP", "PUSH_NULL", "UNPACK_SEQUENCE", "DUP_TOP", "ROT_TWO",
               "ROT_THREE", "ROT_N", "LOAD_CONST", "STORE_FAST", "LOAD_FAST", "DELETE_FAST"}
ROLE_TITLES = {
    "kept": "the user's instruction, kept as it was",
    "graph": "Dynamo: calls the compiled graph",
    "bookkeeping": "Dynamo: records the time spent before the graph (record_pregraph_bytecode)",
    "restore": "Dynamo: unpacks the graph's outputs and rebuilds the stack and locals",
    "resume": "Dynamo: calls the next resume function (the code after the next graph break)",
    "inserted": "Dynamo: inserted",
}


def classify(inst: Instruction) -> str:
    """The role of an instruction Dynamo inserted, from what it names."""
    if inst.op in ("RESUME", "NOP"):
        return "kept"
    if COMPILED_FN.search(inst.argrepr):
        return "graph"
    if RESUME_AT.search(inst.argrepr):
        return "resume"
    if BOOKKEEPING.search(inst.argrepr):
        return "bookkeeping"
    if "graph_out_" in inst.argrepr or inst.op in RESTORE_OPS:
        return "restore"
    return "inserted"


def _meaningful(run: list[Instruction]) -> bool:
    """Whether a run of equal instructions is the user's code kept, not a coincidence: it names
    something (a global, attribute, local or constant) rather than being a lone CALL or POP_TOP."""
    return len(run) >= 2 and any(inst.argrepr and not BOOKKEEPING.search(inst.argrepr)
                                 and inst.op not in ("PRECALL", "CALL") for inst in run)


NAMED_LOADS = {"LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD", "LOAD_NAME"}
ARGUMENT_LOADS = {"LOAD_FAST", "LOAD_CONST", "LOAD_DEREF"}
CALLS = {"PRECALL", "CALL", "CALL_FUNCTION_EX"}
NO_RESULT = {"STORE_FAST", "STORE_GLOBAL", "STORE_NAME", "STORE_ATTR", "STORE_SUBSCR", "STORE_DEREF", "POP_TOP",
             "DELETE_FAST", "DELETE_SUBSCR", "DELETE_ATTR", "DELETE_GLOBAL", "DELETE_NAME", "LIST_EXTEND",
             "LIST_APPEND", "SET_ADD", "MAP_ADD", "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE", "RETURN_VALUE",
             "PRECALL", "KW_NAMES", "RESUME", "NOP", "JUMP_FORWARD", "JUMP_BACKWARD", "EXTENDED_ARG", "CACHE"}


def call_roles(instructions: list[Instruction]) -> dict[int, str]:
    """The role of each PRECALL/CALL/CALL_FUNCTION_EX: that of the instruction that loaded its callee.

    A straight-line stack simulation (3.11 call layout: [NULL|method, callable|self, args...]) with
    this interpreter's `dis.stack_effect`; it stops at the first instruction it cannot follow."""
    import dis

    stack: list[int] = []  # index of the instruction that pushed each slot
    roles: dict[int, str] = {}
    for k, inst in enumerate(instructions):
        opcode = dis.opmap.get(inst.op)
        if opcode is None:
            break
        arg = inst.arg if opcode >= dis.HAVE_ARGUMENT else None
        try:
            net = dis.stack_effect(opcode, arg, jump=False) if arg is not None or opcode >= dis.HAVE_ARGUMENT \
                else dis.stack_effect(opcode)
        except ValueError:
            break
        if inst.op in ("PRECALL", "CALL") and inst.arg is not None and len(stack) > inst.arg:
            roles[k] = instructions[stack[-(inst.arg + 1)]].role
            for slot in stack[len(stack) - inst.arg:]:  # the arguments serve the call
                if instructions[slot].role in ("restore", "inserted") and instructions[slot].op in ARGUMENT_LOADS:
                    roles.setdefault(slot, roles[k])
        elif inst.op == "CALL_FUNCTION_EX" and len(stack) >= 2 + ((inst.arg or 0) & 1):
            roles[k] = instructions[stack[-(2 + ((inst.arg or 0) & 1))]].role
        if inst.op == "SWAP" and inst.arg and len(stack) >= inst.arg:
            stack[-1], stack[-inst.arg] = stack[-inst.arg], stack[-1]
            continue
        if inst.op == "COPY" and inst.arg and len(stack) >= inst.arg:
            stack.append(stack[-inst.arg])
            continue
        pushes = 0 if inst.op in NO_RESULT else 2 if inst.op == "LOAD_METHOD" or (
            inst.op == "LOAD_GLOBAL" and (inst.arg or 0) & 1) else 1
        pops = pushes - net
        if pops < 0 or pops > len(stack):
            break
        del stack[len(stack) - pops:]
        stack.extend([k] * pushes)
    return roles


@dataclass
class Row:
    """One row of the side-by-side view: an original instruction, a modified one, or both."""

    original: Instruction | None
    modified: Instruction | None


def align(original: Listing, modified: Listing) -> list[Row]:
    """Original and modified side by side; modified instructions without a counterpart get a Dynamo role."""
    a, b = original.instructions, modified.instructions
    matcher = difflib.SequenceMatcher(None, [i.key for i in a], [i.key for i in b], autojunk=False)
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" and _meaningful(a[i1:i2]):
            rows.extend(Row(a[i], b[j]) for i, j in zip(range(i1, i2), range(j1, j2)))
            continue
        for j in range(j1, j2):
            b[j].role = classify(b[j])
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            rows.append(Row(left[k] if k < len(left) else None, right[k] if k < len(right) else None))
    names = {inst.argrepr.removeprefix("NULL + ") for inst in a if inst.op in NAMED_LOADS and inst.argrepr}
    for inst in b:  # the user's call Dynamo could not trace, loaded again (LOAD_METHOD may become LOAD_ATTR)
        if inst.role != "kept" and inst.op in NAMED_LOADS and inst.argrepr.removeprefix("NULL + ") in names:
            inst.role = "kept"
    for k, role in call_roles(b).items():  # a call is what it calls; its arguments serve it
        if b[k].role != "kept":
            b[k].role = role
    previous = None  # an instruction naming nothing (COPY, SWAP, POP_TOP…) belongs to the inserted code before it
    for inst in b:
        if inst.role == "kept":
            previous = None
            continue
        if inst.role in ("inserted", "restore") and previous and not inst.argrepr and inst.op not in CALLS:
            inst.role = previous
        previous = inst.role
    return rows


def called_names(listing: Listing) -> tuple[list[str], list[tuple[str, int]]]:
    """The compiled graphs (`__compiled_fn_N_<uuid>`, in order of N) and resume functions
    (`__resume_at_<offset>_N`, with offset) a listing calls, each once."""
    graphs: dict[str, int] = {}
    resumes: dict[str, int] = {}
    for inst in listing.instructions:
        for match in COMPILED_FN.finditer(inst.argrepr):
            graphs.setdefault(match[0], int(match["n"]))
        for match in RESUME_AT.finditer(inst.argrepr):
            resumes.setdefault(match[0], int(match["offset"]))
    return sorted(graphs, key=graphs.get), list(resumes.items())


def line_at_offset(listing: Listing, offset: int) -> int | None:
    """The source line of the instruction at `offset` (or the last one before it)."""
    line = None
    for inst in listing.instructions:
        if inst.offset > offset:
            break
        line = inst.line
    return line


def resume_base(co_name: str | None) -> str:
    """The user function a (possibly nested) resume function continues: its name without the prefix ("" for a
    compile that logged no name)."""
    if co_name is None:
        return ""
    match = RESUME_NAME.match(co_name)
    return match["base"] if match else co_name


def resume_name(co_name: str, line: int) -> str:
    """The name Dynamo gives the resume function created at `line` of the frame `co_name`."""
    return f"{RESUME_PREFIX}{resume_base(co_name)}_at_{line}"


def resume_target(listing: Listing) -> int | None:
    """Where a resume function's prologue jumps to: the offset at which the original code resumes."""
    for inst in listing.instructions[:12]:
        match = re.match(r"to (\d+)$", inst.argrepr)
        if inst.op.startswith("JUMP") and match:
            return int(match[1])
    return None
