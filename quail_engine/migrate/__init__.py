"""`quail migrate`: find a dbt project's warehouse AI calls and say how each moves to Quail."""
