"""The auditor side: log audit, diagrams, the move graph, invariants and the verifier."""
