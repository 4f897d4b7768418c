"""Capsules (Moss): the pure model and file forms (model.py), the files under .moss/capsules/
(store.py), and the use cases (service.py).
"""
