"""Records in, rows out: the normalizer (one handler per envelope family)."""

from .core import FileNormalizer
from .state import Compile, CompileState, Process, compile_id_text

__all__ = ["FileNormalizer", "Compile", "CompileState", "Process", "compile_id_text"]
