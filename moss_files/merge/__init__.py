"""Git as the transport: the merge driver that merges the toolkit's files by their structure
(driver.py) and the per-clone git settings it needs (clone.py)."""
