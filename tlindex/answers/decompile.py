"""Python source for a logged bytecode listing, by depyf, shown only when it checks out.

The listing is rebuilt into a code object (`tlindex.answers.reassemble`, exact round trip), depyf
decompiles that, and the source is compiled again: its reachable operations (names loaded and
stored, attributes, calls, operators, branches, returns) must be those of the rebuilt code, in
order. Anything else is reported with the reason instead of source that may be wrong.
"""

from __future__ import annotations

import dis
import threading
import types
from dataclasses import dataclass, field

from tlindex.answers.bytecode import Listing
from tlindex.answers.reassemble import CannotReassemble, reassemble

STOPS = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
         "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP"}

EQUIVALENT_CALLS = {"LIST_EXTEND": ("attr", "extend"), "BUILD_SLICE": ("load", "slice")}


@dataclass
class Decompiled:
    source: str | None  # depyf's source, when it checks out
    reason: str | None  # why there is no source
    notes: list[str] = field(default_factory=list)  # how the source differs from the bytecode, harmlessly


def _reachable(code: types.CodeType) -> list[dis.Instruction]:
    instructions = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    at = {inst.offset: k for k, inst in enumerate(instructions)}
    seen: set[int] = set()
    todo = [0]
    while todo:
        k = todo.pop()
        while k < len(instructions) and k not in seen:
            seen.add(k)
            inst = instructions[k]
            if inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs:
                if inst.argval in at:
                    todo.append(at[inst.argval])
            if inst.opname in STOPS:
                break
            k += 1
    return [instructions[k] for k in sorted(seen)]


def operations(code: types.CodeType) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """What a code object does, as far as source can show it, from its reachable instructions:
    the stores, calls, operators, branches and returns in order, and the globals and attributes
    it reads, sorted (a stack machine may load a callee long before the call that source shows).
    Stack shuffles and depyf's temporaries are left out."""
    ops: list[tuple[str, str]] = []
    reads: list[tuple[str, str]] = []
    for inst in _reachable(code):
        name = inst.opname
        value = str(inst.argval)
        if name in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"):
            reads.append(("load", value))
        elif name in ("LOAD_ATTR", "LOAD_METHOD"):
            reads.append(("attr", value))
        elif name in ("STORE_ATTR", "STORE_GLOBAL", "DELETE_ATTR"):
            ops.append((name.lower(), value))
        elif name in ("STORE_FAST", "STORE_NAME", "STORE_DEREF") and not value.startswith("__temp"):
            ops.append(("store", value))
        elif name in ("CALL", "CALL_FUNCTION_EX", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW"):
            ops.append(("call", ""))
        elif name in ("BINARY_OP", "COMPARE_OP"):
            ops.append(("op", inst.argrepr))
        elif name in EQUIVALENT_CALLS:  # depyf writes these as calls: x.extend(y), slice(a, b)
            reads.append(EQUIVALENT_CALLS[name])
            ops.append(("call", ""))
        elif name.startswith("POP_JUMP"):
            ops.append(("branch", ""))
        elif name in ("RETURN_VALUE", "RETURN_CONST"):
            ops.append(("return", ""))
    return ops, sorted(reads)


def _function_code(source: str, name: str, params: tuple[str, ...], free: tuple[str, ...] = ()) -> types.CodeType:
    """depyf's function compiled, with the rebuilt code's locals as its parameters (so they stay locals)
    and, for a closure, inside a function that binds its free variables."""
    head, _, body = source.partition("\n")
    if not head.startswith(f"def {name}("):
        raise ValueError(f"depyf's source does not start with def {name}(")
    function = f"def {name}({', '.join(params)}):\n{body}"
    if free:
        inner = "\n".join("    " + line for line in function.splitlines())
        function = f"def __tlindex_outer__():\n    {' = '.join(free)} = None\n{inner}\n    return {name}"
    module = compile(function, "<depyf>", "exec")
    todo = list(module.co_consts)
    while todo:
        const = todo.pop()
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            todo += const.co_consts
    raise ValueError(f"no function {name} in depyf's source")


_DEPYF = threading.Lock()


def _depyf_source(depyf: types.ModuleType, code: types.CodeType) -> str:
    """depyf's source of `code`, its temporaries numbered from 1: depyf counts them in a class attribute
    across calls, so a page read them as __temp_37 or __temp_5 by what the process decompiled before."""
    with _DEPYF:
        if isinstance(getattr(depyf, "Decompiler", None), type):
            depyf.Decompiler.temp_count = 0
        return depyf.decompile(code)


def decompile(listing: Listing, text: str, name: str, filename: str, first_line: int) -> Decompiled:
    """depyf's source of the listing, or the reason it is not shown (never an exception)."""
    try:
        return _decompile(listing, text, name, filename, first_line)
    except Exception as error:  # a check this module did not foresee failing: decline, saying how
        return Decompiled(None, f"Checking the decompiled source failed ({type(error).__name__}: {error}).")


def _decompile(listing: Listing, text: str, name: str, filename: str, first_line: int) -> Decompiled:
    try:
        code = reassemble(listing, text, name, filename, first_line)
    except CannotReassemble as e:
        return Decompiled(None, f"The listing cannot be turned back into a code object: {e}.")
    try:
        import depyf
    except ImportError:
        return Decompiled(None, "depyf is not installed on this server (pip install depyf).")
    version = getattr(depyf, "__version__", None)
    try:
        source = _depyf_source(depyf, code)
    except Exception as e:  # depyf raises anything on code it does not know
        return Decompiled(None, f"depyf {version} could not decompile it: {type(e).__name__}: {e}")
    try:
        recompiled = _function_code(source, name, code.co_varnames, code.co_freevars)
    except (SyntaxError, ValueError) as e:
        return Decompiled(None, f"depyf {version}'s source does not compile: {e}")
    (want, want_reads), (got, got_reads) = operations(code), operations(recompiled)
    if set(want_reads) != set(got_reads):
        differ = sorted(set(want_reads) ^ set(got_reads))
        return Decompiled(None, f"depyf {version}'s source does not read the names the bytecode reads "
                                f"({', '.join(' '.join(d) for d in differ[:3])}).")
    if want != got:
        k = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        expected = " ".join(want[k]) if k < len(want) else "nothing"
        found = " ".join(got[k]) if k < len(got) else "nothing"
        return Decompiled(None, f"depyf {version}'s source does not do what the bytecode does: operation "
                                f"{k + 1} is `{found}` where the bytecode has `{expected}`.")
    notes = [f"depyf's source reads {value} {got_reads.count((kind, value))} times where the bytecode "
             f"reads it {want_reads.count((kind, value))} times (it copies the value on the stack)"
             for kind, value in sorted(set(want_reads)) if want_reads.count((kind, value)) != got_reads.count((kind, value))]
    return Decompiled(source, None, notes)
