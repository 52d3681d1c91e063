"""The memory mapping game (SPEC sections 2-6): state, rules, Drop-backup, features."""

from mallocgame.game.state import ACTION_NAMES, COPY, DROP, NOCOPY, Game, replay
from mallocgame.game.tables import GameTables, build_tables

__all__ = ["Game", "replay", "GameTables", "build_tables", "COPY", "NOCOPY", "DROP", "ACTION_NAMES"]
