"""Developer tools: tiny local checkpoints for trying specdeploy and for end-to-end tests."""
