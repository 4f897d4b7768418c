"""Insights and sessions (LoopFlow): the pure models (insights.py, sessions.py), their files
under .moss/insights/ and .moss/sessions/ (store.py), and the use cases (service.py).
"""
