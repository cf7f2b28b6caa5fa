"""Platform emitters: one module per platform behind `orchestrator.emitters.base.Emitter`."""
