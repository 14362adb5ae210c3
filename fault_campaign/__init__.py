"""The fault campaign (issue 14): many random cases through the real state machine in the local
AWS, with faults at every boundary, invariants checked over everything that happened.

- `generator`: a case plan from (seed, index): parameters, sandbox faults, nemeses, redrives;
- `approval`: the one place a generated case is approved;
- `nemeses`: faults the sandbox alone cannot give (a crash after the downstream call, a lost
  invoke answer, DynamoDB throttling / conflicts / lost answers, clock jumps);
- `observe`: what happened, read black-box through the AWS APIs of the local AWS;
- `runner`: one case: its executions, duplicates, redrives, snapshots;
- `invariants`: the checks after every case and over every account;
- `shards`: processes with their own local AWS, blocks of cases durable on disk, resumable;
- `shrink`: a failing plan reduced to a minimal one;
- `report`: docs/campaign.md and its chart;
- `mutants`, `mutate`: plausible bugs in the safety rules, applied one at a time to a copy.

`python -m fault_campaign --help` (or `make campaign`) runs it.
"""
