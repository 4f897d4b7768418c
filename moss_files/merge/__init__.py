"""Git as the transport: the merge driver that merges the toolkit's files by their structure
(driver.py). Each clone
defines the driver through the scaffold (`moss merge setup`)."""
