"""`python -m moss_files`: the `moss` command run by this interpreter (entry layer).

`moss agent` starts its own MCP server this way (`python -m moss_files serve`), so the server is
this very toolkit whether or not a `moss` command is on PATH.
"""

from moss_files.cli.main import main

if __name__ == "__main__":
    main()
