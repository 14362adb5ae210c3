"""The saga's benchmark: counts per example case, per ledger path, and handler cold starts.

python -m sagactl.bench              (or `make bench`): cases.py, then coldstart.py
python -m sagactl.bench.ledger       DynamoDB requests per ledger path
python -m sagactl.bench.coldstart    cold starts alone
"""
