"""Profile stage: the YAML a user writes, loaded into typed, validated models."""
