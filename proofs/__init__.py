"""Claim registry and checks for arXiv:2602.18849v2 (see paper_checks.md)."""
