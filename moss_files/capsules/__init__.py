"""Capsules (Moss): the pure model and file forms (model.py), the files under .moss/capsules/
(store.py), and the use cases (service.py; export/import in transfer.py, git history in
history.py).
"""
