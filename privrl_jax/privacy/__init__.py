"""privacy subpackage."""
