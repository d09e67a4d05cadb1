"""Backends: turn a spec into the resources the engine reconciles."""
