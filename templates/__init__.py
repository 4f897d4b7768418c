"""Template files that `moss init` and install.sh copy into projects (data only, no code).

Installed as the `moss_files.templates` package (see pyproject.toml); this file makes it a
regular package so `importlib.resources` finds it in editable installs as well as wheels.
"""
