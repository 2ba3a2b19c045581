"""tlindex: index torch.compile TORCH_TRACE logs into SQLite."""

__version__ = "0.1.0"
