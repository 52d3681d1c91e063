"""Experiments that write the tables and figures of the report (resumable sweeps)."""
