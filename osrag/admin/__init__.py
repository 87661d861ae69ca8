"""The admin side: install, reindex, lifecycle, status, doctor and roles of an alias."""
