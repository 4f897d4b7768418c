"""Format upgrades: every toolkit file of a workspace brought to its kind's current format
version (`moss upgrade`). The versions, markers and steps are the foundation's
(`moss_files.foundation.formats`); `service` finds the files, plans and applies.
"""
