"""`specdeploy tune`: draft length x load, measured, and the engine schedule written from it."""
