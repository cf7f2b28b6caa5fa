"""Run a rendered engine launch on this host: as a local process now, in Docker later.

`targets.py` picks a `RunTarget` by name; `local.py` starts the engine as a child process group,
waits for its health path and stops it cleanly; `engine_log.py` turns an engine's dying words
into a readable what/why/fix.
"""
