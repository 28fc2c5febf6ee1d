"""What is recorded: the row schema, the version-pair Parquet dataset, diffs and the expected-results
gate, the dataset card, and publishing to the Hub.

Taught in notebooks 01 (reading) and 06 (publishing).
"""
