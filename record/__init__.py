"""The run record: the contract between whatever drove a target and whatever judges it.

Harness writes records, gates judge them, reports show them; this package imports none of them
(nor the engine), so every arrow points here.
"""
