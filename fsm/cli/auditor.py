"""Auditor commands: diagram and verify."""
