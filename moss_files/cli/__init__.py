"""The `moss` command line (main.py), the options and error reporting every CLI shares
(support.py), and one module per command group. The only package that imports typer.
"""
