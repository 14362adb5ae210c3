"""The saga's benchmark: counts per example case, per ledger path, and handler cold starts.

python -m saga_bench              (or `make bench`): cases.py, then coldstart.py
python -m saga_bench.ledger       DynamoDB requests per ledger path
python -m saga_bench.coldstart    cold starts alone
"""
