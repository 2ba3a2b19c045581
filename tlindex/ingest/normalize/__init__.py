"""Records in, rows out: the normalizer (one handler per envelope family)."""

from tlindex.ingest.normalize.core import FileNormalizer
from tlindex.ingest.normalize.state import Compile, CompileState, Process, compile_id_text

__all__ = ["FileNormalizer", "Compile", "CompileState", "Process", "compile_id_text"]
