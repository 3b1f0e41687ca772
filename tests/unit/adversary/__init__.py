"""Adversarial findings: tests that fail until the defect they name is fixed."""
