"""Workloads: problem instances to play the memory mapping game on.

:mod:`mallocgame.workloads.synthetic` generates random instances shaped like compiled
ML programs (``synthetic-v2/...`` names; ``synthetic-v1/...``, its first version).
"""
