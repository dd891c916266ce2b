"""Compare predictions with published measurement tables (the format of shared/validation/*.csv)."""
