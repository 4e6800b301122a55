"""SQL front ends: warehouse dialects -> canonical IR, and transpilation between dialects."""
