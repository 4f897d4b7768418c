"""The board (Moe's task workflow): the pure model and rules (model.py), the files under
.moss/board/ (store.py), and the use cases (service.py).
"""
