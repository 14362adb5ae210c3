"""Agent-facing tools: propose, follow and start a replacement, retry-safe by design
(docs/design.md §10). One implementation behind `sagactl mcp` and the AgentCore Gateway's
Lambda target."""
