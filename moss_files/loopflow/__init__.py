"""Insights and sessions (LoopFlow): the pure models (insights.py, sessions.py) and the use cases
over their files (service.py).
"""
