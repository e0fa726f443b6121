"""Migration versions, oldest first by their ``down_revision`` chain."""
