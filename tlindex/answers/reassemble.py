"""A code object rebuilt from a `dis` listing, accepted only if it disassembles to the same text.

depyf (and every decompiler) works on code objects; the trace holds only `dis` text. The text
carries each instruction's opcode, raw argument and shown value, and the source lines, so for
the interpreter that wrote it a code object can be rebuilt: the bytes (opcode, argument, inline
caches up to the next offset), the names, local names and literal constants at the indexes the
arguments give, the cell and free variables of a closure (`MAKE_CELL`, `COPY_FREE_VARS`, the
`*_DEREF` slots), and a line table. It cannot carry the argument count, constants without a
literal repr, or unused names (slots no instruction names get placeholder names, which `dis`
does not print). The rebuilt object is accepted only when `dis.Bytecode(code).dis()` gives back
exactly the logged text - which also fails for a listing written by another Python version,
whose opcodes, caches or format differ. Whatever goes wrong is a CannotReassemble with a reason,
never an exception of another kind.
"""

from __future__ import annotations

import ast
import dis
import sys
import types

from tlindex.answers.bytecode import Listing

NAME_OPS = {"LOAD_ATTR", "STORE_ATTR", "DELETE_ATTR", "LOAD_METHOD", "IMPORT_NAME", "IMPORT_FROM",
            "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"}
FAST_OPS = {"LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"}
CONST_OPS = {"LOAD_CONST", "KW_NAMES", "RETURN_CONST"}
DEREF_OPS = {"LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF", "MAKE_CELL"}


class CannotReassemble(Exception):
    """Why a listing cannot be turned back into a code object (shown to the user)."""


def _slot(table: dict[int, object], index: int, value: object, what: str) -> None:
    if table.get(index, value) != value:
        raise CannotReassemble(f"{what} {index} is shown as both {table[index]!r} and {value!r}")
    table[index] = value


def _dense(table: dict[int, object], filler) -> list:
    return [table.get(i, filler(i)) for i in range(max(table, default=-1) + 1)]


def _line_table(units: list[int | None], first_line: int) -> bytes:
    """A 3.11+ location table giving each code unit its line (no columns)."""
    out = bytearray()
    previous = first_line
    k = 0
    while k < len(units):
        line = units[k]
        length = 1
        while k + length < len(units) and units[k + length] == line and length < 8:
            length += 1
        if line is None:
            out.append(0x80 | (15 << 3) | (length - 1))  # no location
        else:
            out.append(0x80 | (13 << 3) | (length - 1))  # line only
            delta = line - previous
            value = (-delta << 1) | 1 if delta < 0 else delta << 1
            while value >= 0x40:
                out.append(0x40 | (value & 0x3F))
                value >>= 6
            out.append(value)
            previous = line
        k += length
    return bytes(out)


def _slots(fast: dict[int, object], derefs: dict[int, object], cells: set[int],
           free_count: int) -> tuple[tuple, tuple, tuple]:
    """(varnames, cellvars, freevars) that put every named slot at the index the listing gives.

    3.11 numbers the "fast locals" as locals, then cells that are not arguments, then free
    variables (the last `free_count` slots, filled by COPY_FREE_VARS). A cell at an index a
    plain local also uses is an argument cell: it stays among the locals and is a cell too.
    """
    frees = sorted(set(derefs) - cells)
    nlocals = max(fast, default=-1) + 1
    outer_cells = sorted(c for c in cells if c >= nlocals)
    first_free = frees[0] if frees else max([nlocals - 1, *outer_cells]) + 1
    if outer_cells:
        nlocals = min(outer_cells)
    if frees and (len(frees) > free_count or frees[-1] >= first_free + free_count):
        raise CannotReassemble(f"free variable slots {frees} do not fit COPY_FREE_VARS {free_count}")
    if any(c >= first_free for c in cells) or any(f < nlocals for f in frees):
        raise CannotReassemble("the cell and free variable slots overlap the locals")
    names = {**fast, **derefs}
    varnames = tuple(names.get(i, f"__unknown_local_{i}") for i in range(nlocals))
    cellvars = tuple([names[c] for c in sorted(cells) if c < nlocals]
                     + [names.get(i, f"__unknown_cell_{i}") for i in range(nlocals, first_free)])
    freevars = tuple(names.get(i, f"__unknown_free_{i}") for i in range(first_free, first_free + free_count))
    if len(set(cellvars) | set(freevars)) != len(cellvars) + len(freevars):
        raise CannotReassemble("a name is both a cell and a free variable")
    return varnames, cellvars, freevars


def reassemble(listing: Listing, text: str, name: str, filename: str, first_line: int) -> types.CodeType:
    """The code object `text` was printed from, or CannotReassemble saying why not."""
    try:
        return _reassemble(listing, text, name, filename, first_line)
    except CannotReassemble:
        raise
    except Exception as error:  # a listing no rule here foresaw: decline, with what went wrong
        raise CannotReassemble(f"rebuilding it failed ({type(error).__name__}: {error})") from None


def _reassemble(listing: Listing, text: str, name: str, filename: str, first_line: int) -> types.CodeType:
    _check_rebuildable(listing)
    slots = _Slots()
    code, units = bytearray(), []
    instructions = listing.instructions
    for k, inst in enumerate(instructions):
        opcode = dis.opmap.get(inst.op)
        if opcode is None:
            raise CannotReassemble(f"{inst.op} is not an opcode of this Python")
        slots.take(inst)
        if len(code) != inst.offset:
            raise CannotReassemble(f"offset {inst.offset} does not follow the previous instruction")
        code += bytes([opcode, (inst.arg or 0) & 0xFF])
        end = instructions[k + 1].offset if k + 1 < len(instructions) else len(code)
        if end < len(code) or (end - len(code)) % 2:
            raise CannotReassemble(f"offset {end} is not where an instruction can start")
        code += bytes(end - len(code))  # inline CACHE entries
        units += [inst.line] * ((end - inst.offset) // 2)
    line0 = next((i.line for i in instructions if i.line is not None), first_line)
    varnames, cellvars, freevars = _slots(slots.fast, slots.derefs, slots.cells, slots.free_count)
    flags = 3 | (0x10 if freevars else 0)  # CO_OPTIMIZED | CO_NEWLOCALS (| CO_NESTED)
    built = types.CodeType(
        0, 0, 0, len(varnames), 64, flags, bytes(code), tuple(_dense(slots.consts, lambda i: None)),
        tuple(_dense(slots.names, lambda i: f"__unknown_name_{i}")), varnames, filename, name, name,
        line0, _line_table(units, line0), b"", freevars, cellvars)
    if dis.Bytecode(built).dis() != text:
        raise CannotReassemble("the rebuilt code does not disassemble to the logged listing")
    return built


def _check_rebuildable(listing: Listing) -> None:
    """CannotReassemble unless this Python is 3.11 and the listing is whole (every line an instruction, no
    exception table)."""
    if sys.version_info[:2] != (3, 11):
        raise CannotReassemble(f"only Python 3.11 listings are rebuilt; this server runs "
                               f"{sys.version_info[0]}.{sys.version_info[1]}")
    if listing.unparsed:
        number, raw = listing.unparsed[0]
        raise CannotReassemble(f"line {number} of the listing is not an instruction of this Python's dis: {raw.strip()!r}")
    if listing.exception_table:
        raise CannotReassemble("the listing has an exception table, which dis does not print in full")


class _Slots:
    """The names, locals, constants and cells the instructions name, by the index each instruction gives."""

    def __init__(self) -> None:
        self.names: dict[int, object] = {}
        self.fast: dict[int, object] = {}
        self.consts: dict[int, object] = {}
        self.derefs: dict[int, object] = {}
        self.cells: set[int] = set()
        self.free_count = 0

    def take(self, inst) -> None:
        arg = inst.arg or 0
        if inst.op in DEREF_OPS:
            _slot(self.derefs, arg, inst.argrepr, "cell")
            if inst.op == "MAKE_CELL":
                self.cells.add(arg)
        elif inst.op == "COPY_FREE_VARS":
            self.free_count = arg
        elif inst.op in dis.hasfree:
            raise CannotReassemble(f"{inst.op} uses closure cells in a way this rebuild does not know")
        if inst.op == "LOAD_GLOBAL":
            _slot(self.names, arg >> 1, inst.argrepr.removeprefix("NULL + "), "name")
        elif inst.op in NAME_OPS:
            _slot(self.names, arg, inst.argrepr, "name")
        elif inst.op in FAST_OPS:
            _slot(self.fast, arg, inst.argrepr, "local")
        elif inst.op in CONST_OPS:
            try:
                value = ast.literal_eval(inst.argrepr)
            except (ValueError, SyntaxError):
                raise CannotReassemble(f"constant {inst.argrepr!r} has no literal form") from None
            _slot(self.consts, arg, value, "constant")
