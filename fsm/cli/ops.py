"""Operator commands: run, resume, runs, approvals, approve, deny, show, history, audit, sweep."""
