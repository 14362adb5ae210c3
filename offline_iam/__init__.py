"""IAM policy evaluation, offline: what AWS would allow the stack's roles (docs/design.md §11)."""
