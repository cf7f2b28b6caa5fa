"""specdeploy: deploy LLM servers with speculative decoding, or say precisely why it would not work."""

__version__ = "0.1.0"
