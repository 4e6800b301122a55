"""Logical rewrite rules, one per module; each is `rule(plan, ctx) -> plan`."""
