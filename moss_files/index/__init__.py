"""The derived search index: the model of rows and sources (model.py), the readers per artifact
kind (readers.py, board_reader.py; registered in sources.py), the query language (query.py), the
disk scan (scan.py), the SQLite cache (database.py) and the search use cases (service.py); and
the path-history record `moss history` reads (pathhistory.py). database.py and pathhistory.py
are the modules that import sqlite3.
"""
