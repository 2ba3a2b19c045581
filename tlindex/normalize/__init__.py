"""Records in, rows out: the normalizer (one handler per envelope family)."""

from .core import FileNormalizer
from .state import Compile, Process, compile_id_text

__all__ = ["FileNormalizer", "Compile", "Process", "compile_id_text"]
