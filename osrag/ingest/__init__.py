"""The write side: documents -> chunks -> index (read, parse, chunk, count, embed, write, flip)."""
