"""IR -> vendor SQL text, one module per dialect (`emit(op, args) -> str`)."""
